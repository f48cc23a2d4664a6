//! Which thread names a thread's header shows: its `threading` name (`name`), and the
//! system's (`native_name`) where that says more.

use crate::model::{Report, ThreadReport};

/// Bytes of a thread's name the system keeps (Linux `TASK_COMM_LEN` less its NUL).
const MAX_NATIVE_NAME_BYTES: usize = 15;

/// The system's name of `t` where the header shows it beside its `threading` name: when it
/// says more than that name and than the process's own name. Not when it is the `threading`
/// name, or that name cut to the system's 15 bytes (3.14's `threading` names each thread so);
/// not when it is the name of the process (its main thread's, `r.python.pid`, when the report
/// lists it), which every thread inherits until it is given its own. A thread without a
/// `threading` name is headed by its system name alone ([`ThreadReport::any_name`]), so
/// nothing is shown beside it.
pub fn shown_native_name<'a>(r: &Report, t: &'a ThreadReport) -> Option<&'a str> {
    let native = t.native_name.as_deref()?;
    let name = t.name.as_deref()?;
    // Cut inside a UTF-8 sequence, the bytes kept end before it: up to 3 fewer.
    let cut = name.len() > MAX_NATIVE_NAME_BYTES
        && native.len() + 3 >= MAX_NATIVE_NAME_BYTES
        && name.starts_with(native);
    if native == name || cut {
        return None;
    }
    let pid = r.python.pid.map(u64::from);
    let process = r
        .threads
        .iter()
        .find(|m| m.native_id.is_some() && m.native_id == pid)
        .and_then(|m| m.native_name.as_deref());
    (process != Some(native)).then_some(native)
}

#[cfg(test)]
mod tests {
    use super::super::test_support::report_of;
    use super::shown_native_name;
    use crate::model::{Report, ThreadReport};

    fn thread(id: u64, name: Option<&str>, native: Option<&str>) -> ThreadReport {
        ThreadReport {
            native_id: Some(id),
            thread_id: Some(id),
            name: name.map(Into::into),
            native_name: native.map(Into::into),
            holds_gil: Some(false),
            interpreter: Some(1),
            interpreter_id: None,
            thread_state: Some(2),
            frames: Vec::new(),
            truncated: false,
            why: None,
        }
    }

    fn report(threads: Vec<ThreadReport>) -> Report {
        report_of("3.14.0", 10, threads)
    }

    #[test]
    fn only_a_name_that_says_more_is_shown() {
        let r = report(vec![
            thread(10, Some("MainThread"), Some("python3.14")),
            // Its own name, the same, cut to 15 bytes, inherited, and one of its own.
            thread(11, Some("io"), Some("io-loop")),
            thread(12, Some("worker"), Some("worker")),
            thread(13, Some("worker-with-a-long-name"), Some("worker-with-a-l")),
            thread(14, Some("Thread-3 (run)"), Some("python3.14")),
            // "é" is 2 bytes: 15 bytes end inside it, so 14 are kept.
            thread(15, Some("aaaaaaaaaaaaaaé"), Some("aaaaaaaaaaaaaa")),
            thread(16, None, Some("pt_autograd_0")),
            thread(17, Some("x"), None),
            // Cut to 15 bytes, but not a prefix: something else named it.
            thread(18, Some("worker-with-a-long-name"), Some("worker-with-a-X")),
        ]);
        let shown: Vec<Option<&str>> = r.threads.iter().map(|t| shown_native_name(&r, t)).collect();
        assert_eq!(
            shown,
            [
                None,
                Some("io-loop"),
                None,
                None,
                None,
                None,
                None,
                None,
                Some("worker-with-a-X")
            ]
        );
        // Without its main thread the report cannot tell an inherited name.
        let r = report(vec![thread(14, Some("Thread-3 (run)"), Some("python3.14"))]);
        assert_eq!(shown_native_name(&r, &r.threads[0]), Some("python3.14"));
    }
}

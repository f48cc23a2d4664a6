use super::*;
use crate::report::group_text::{headline, render};
use crate::report::test_support::python_frame as py;
use crate::report::text::Sources;

fn thread<'a>(id: u64, name: &'a str, frames: &'a [FrameReport]) -> ThreadIn<'a> {
    ThreadIn {
        task: None,
        greenlet: None,
        wait: None,
        native_id: Some(id),
        name: Some(name),
        native_name: None,
        frames,
        truncated: false,
        why: None,
        call: None,
    }
}

fn pids(g: &Group) -> Vec<u32> {
    g.threads.iter().map(|m| m.pid.unwrap()).collect()
}

#[test]
fn the_straggler_is_an_outlier_and_the_rest_one_group() {
    let wait = [py("allreduce", "r.py", 10), py("<module>", "r.py", 30)];
    let load = [py("load", "r.py", 20), py("<module>", "r.py", 31)];
    let mut g = Grouper::new(GroupBy::Line);
    for pid in 100..104 {
        let frames: &[FrameReport] = if pid == 102 { &load } else { &wait };
        g.add_report(
            Some("b7"),
            Some(pid),
            [thread(pid as u64, "MainThread", frames)],
        );
    }
    let out = g.finish(Vec::new());
    assert_eq!(out.groups.len(), 2);
    assert_eq!(out.reports, 4);
    assert_eq!(out.threads, 4);
    let (big, odd) = (&out.groups[0], &out.groups[1]);
    assert_eq!(pids(big), [100, 101, 103]);
    assert_eq!((big.count, big.processes, big.outlier), (3, 3, false));
    assert_eq!(pids(odd), [102]);
    assert_eq!((odd.count, odd.processes, odd.outlier), (1, 1, true));
    assert_eq!(odd.frames[0].function.as_deref(), Some("load"));
    assert_eq!(headline(big), "3 processes × MainThread");
    assert_eq!(
        headline(odd),
        "1 process (pid 102, host b7) × MainThread [outlier]"
    );
}

#[test]
fn one_stack_in_two_interpreters_is_two_groups_and_the_text_marks_the_crossing() {
    let in_interp = |ids: [u32; 2]| {
        let mut f = [py("park", "c.py", 7), py("run", "m.py", 3)];
        f[0].interpreter_id = Some(ids[0]);
        f[1].interpreter_id = Some(ids[1]);
        f
    };
    let (a, b) = (in_interp([1, 0]), in_interp([2, 0]));
    let mut g = Grouper::new(GroupBy::Line);
    g.add_report(
        Some("h"),
        Some(1),
        [
            thread(1, "t1", &a),
            thread(2, "t2", &b),
            thread(3, "t3", &a),
        ],
    );
    let out = g.finish(Vec::new());
    assert_eq!(out.groups.len(), 2);
    assert_eq!(out.groups[0].count, 2);
    assert_eq!(out.groups[0].frames[0].interpreter_id, Some(1));
    assert_eq!(out.groups[1].frames[0].interpreter_id, Some(2));
    let text = render(
        &crate::report::gather::Gathered {
            grouped: out,
            verdict: None,
            tree: None,
            task_tree: None,
            greenlet_tree: None,
        },
        &mut Sources::default(),
    );
    assert!(text.contains(
        "  File \"c.py\", line 7, in park\n  --- interpreter 1 (entered from interpreter 0) ---\n  File \"m.py\", line 3, in run\n"
    ), "{text}");
}

#[test]
fn lines_split_groups_unless_grouped_by_function() {
    let a = [py("work", "w.py", 5)];
    let b = [py("work", "w.py", 6)];
    let mut by_line = Grouper::new(GroupBy::Line);
    let mut by_function = Grouper::new(GroupBy::Function);
    for g in [&mut by_line, &mut by_function] {
        g.add_report(Some("h"), Some(1), [thread(1, "MainThread", &a)]);
        g.add_report(Some("h"), Some(2), [thread(2, "MainThread", &b)]);
    }
    assert_eq!(by_line.finish(Vec::new()).groups.len(), 2);
    let f = by_function.finish(Vec::new());
    assert_eq!(f.groups.len(), 1);
    // The lines differ: none is shown, and the text says so.
    assert_eq!(f.groups[0].frames[0].line, None);
    let text = render(
        &crate::report::gather::Gathered {
            grouped: f,
            verdict: None,
            tree: None,
            task_tree: None,
            greenlet_tree: None,
        },
        &mut Sources::default(),
    );
    assert!(
        text.contains("File \"w.py\", lines differ, in work"),
        "{text}"
    );
    assert!(text.starts_with("1 group of identical Python stacks over 2 processes, 2 threads\n"));
}

#[test]
fn threads_of_one_process_count_once_and_biggest_group_comes_first() {
    let idle = [py("idle", "p.py", 1)];
    let busy = [py("busy", "p.py", 2)];
    let mut g = Grouper::new(GroupBy::Line);
    g.add_report(
        Some("h"),
        Some(7),
        [
            thread(1, "MainThread", &busy),
            thread(2, "worker-0", &idle),
            thread(3, "worker-1", &idle),
            thread(4, "worker-2", &idle),
        ],
    );
    g.add_report(Some("h"), Some(8), [thread(5, "MainThread", &busy)]);
    let out = g.finish(Vec::new());
    assert_eq!(out.groups[0].frames[0].function.as_deref(), Some("idle"));
    assert_eq!((out.groups[0].count, out.groups[0].processes), (3, 1));
    assert!(out.groups[0].outlier);
    assert_eq!(
        headline(&out.groups[0]),
        "1 process (pid 7, host h) × 3 threads (worker-0, worker-1, worker-2) [outlier]"
    );
    assert_eq!((out.groups[1].count, out.groups[1].processes), (2, 2));
    assert!(!out.groups[1].outlier);
}

#[test]
fn one_process_alone_has_no_outliers() {
    let a = [py("a", "x.py", 1)];
    let b = [py("b", "x.py", 2)];
    let mut g = Grouper::new(GroupBy::Line);
    g.add_report(
        None,
        Some(1),
        [thread(1, "MainThread", &a), thread(2, "t", &b)],
    );
    let out = g.finish(Vec::new());
    assert!(out.groups.iter().all(|g| !g.outlier));
}

#[test]
fn native_frames_are_not_the_key_and_unreadable_frames_match() {
    let mut n1 = FrameReport::native(0x10, Some("sem_wait".into()), None, None);
    n1.address = Some(0x10);
    let n2 = FrameReport::native(0x20, Some("futex_wait".into()), None, None);
    let s1 = [
        n1,
        py("get", "q.py", 3),
        FrameReport::unreadable(0x1, "page not in core at 0x1".into()),
    ];
    let s2 = [
        n2,
        py("get", "q.py", 3),
        FrameReport::unreadable(0x2, "page not in core at 0x2".into()),
    ];
    let mut g = Grouper::new(GroupBy::Line);
    g.add_report(Some("h"), Some(1), [thread(1, "MainThread", &s1)]);
    g.add_report(Some("h"), Some(2), [thread(2, "MainThread", &s2)]);
    let out = g.finish(Vec::new());
    assert_eq!(out.groups.len(), 1);
    let grp = &out.groups[0];
    assert_eq!(grp.frames.len(), 2);
    assert_eq!(grp.frames[1].kind, FrameKind::Unreadable);
    // The reasons differ (their addresses): none is shown.
    assert_eq!(grp.frames[1].reason, None);
    let native = grp.native_frames.as_ref().unwrap();
    assert_eq!(native[0].function.as_deref(), Some("sem_wait"));
}

#[test]
fn tasks_are_counted_as_tasks() {
    let chain = [py("Event.wait", "locks.py", 212), py("fetch", "a.py", 3)];
    let mut g = Grouper::new(GroupBy::Line);
    for pid in [1, 2] {
        let tasks = (0..2).map(|i| ThreadIn {
            task: Some(0x7000 + i),
            greenlet: None,
            wait: None,
            native_id: Some(pid as u64),
            name: Some(["fetch-0", "fetch-1"][i as usize]),
            native_name: None,
            frames: &chain,
            truncated: false,
            why: None,
            call: None,
        });
        g.add_report(Some("h"), Some(pid), tasks);
    }
    let out = g.finish(Vec::new());
    assert_eq!(out.groups.len(), 1);
    assert_eq!(out.groups[0].threads[0].task, Some(0x7000));
    assert_eq!(
        headline(&out.groups[0]),
        "2 processes × 4 tasks (fetch-0, fetch-1)"
    );
}

#[test]
fn with_why_the_same_stack_in_two_states_is_two_groups() {
    let a = [py("get", "q.py", 3)];
    let mut g = Grouper::new(GroupBy::Line);
    for (pid, state) in [
        (1, StateWord::Running),
        (2, StateWord::Syscall),
        (3, StateWord::Syscall),
    ] {
        let mut t = thread(pid as u64, "MainThread", &a);
        t.why = Some(GroupWhy {
            state: Some(state),
            syscall: (state == StateWord::Syscall).then(|| "futex".into()),
            waiting: None,
        });
        g.add_report(Some("h"), Some(pid), [t]);
    }
    let out = g.finish(Vec::new());
    assert_eq!(out.groups.len(), 2);
    assert_eq!(
        headline(&out.groups[0]),
        "2 processes × MainThread [syscall: futex]"
    );
    assert_eq!(
        headline(&out.groups[1]),
        "1 process (pid 1, host h) × MainThread [running] [outlier]"
    );
}

#[test]
fn a_truncated_stack_is_not_the_same_as_a_short_one() {
    let a = [py("f", "x.py", 1)];
    let mut g = Grouper::new(GroupBy::Line);
    g.add_report(Some("h"), Some(1), [thread(1, "MainThread", &a)]);
    let mut t = thread(2, "MainThread", &a);
    t.truncated = true;
    g.add_report(Some("h"), Some(2), [t]);
    let out = g.finish(Vec::new());
    assert_eq!(out.groups.len(), 2);
    assert_eq!(out.groups.iter().filter(|g| g.truncated).count(), 1);
}

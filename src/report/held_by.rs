//! `heap.retainers`' paths read back from a saved report, and written as a Python expression.

use crate::model::HeldStep;

/// Steps read back from a saved report's `held_by`; None when one is not a step.
pub fn steps_of(v: &serde_json::Value) -> Option<Vec<HeldStep>> {
    let text = |s: &serde_json::Value, k: &str| s.get(k)?.as_str().map(str::to_string);
    v.as_array()?
        .iter()
        .map(|s| {
            let m = s.as_object()?;
            Some(if let Some(n) = text(s, "module") {
                HeldStep::Module(n)
            } else if let Some(n) = text(s, "attr") {
                HeldStep::Attr(n)
            } else if let Some(n) = text(s, "key") {
                HeldStep::Key(n)
            } else if let Some(i) = m.get("index").and_then(|i| i.as_u64()) {
                HeldStep::Index(i)
            } else if let Some(n) = text(s, "closure") {
                HeldStep::Closure(n)
            } else if let Some(n) = text(s, "via") {
                HeldStep::Via(n)
            } else {
                HeldStep::Local {
                    name: text(s, "local")?,
                    function: text(s, "function")?,
                    thread: m.get("thread").and_then(|t| t.as_u64()),
                    thread_name: None,
                }
            })
        })
        .collect()
}

/// `steps` as Python would reach the object: `__main__._cache`, `__main__.Registry.items`,
/// `__main__.keep_fn closure blobs`, `thread 1234 "holder" worker() local batch[3]`.
pub fn expression(steps: &[HeldStep]) -> String {
    let mut out = String::new();
    for s in steps {
        match s {
            HeldStep::Module(m) => out += m,
            HeldStep::Attr(a) => {
                out.push('.');
                out += a;
            }
            HeldStep::Key(k) => out += &format!("[{k}]"),
            HeldStep::Index(i) => out += &format!("[{i}]"),
            HeldStep::Closure(v) => out += &format!(" closure {v}"),
            HeldStep::Via(t) => out += &format!(" -> <{t}>"),
            HeldStep::Local {
                name,
                function,
                thread,
                thread_name,
            } => {
                let who = match (thread, thread_name) {
                    (Some(n), Some(t)) => format!("thread {n} \"{t}\" "),
                    (Some(n), None) => format!("thread {n} "),
                    _ => String::new(),
                };
                out += &format!("{who}{function}() local {name}");
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_read_as_python() {
        let m = |s: &str| HeldStep::Module(s.into());
        let a = |s: &str| HeldStep::Attr(s.into());
        assert_eq!(expression(&[m("__main__"), a("_cache")]), "__main__._cache");
        assert_eq!(
            expression(&[
                m("app"),
                a("REG"),
                HeldStep::Key("'k'".into()),
                HeldStep::Index(3)
            ],),
            "app.REG['k'][3]"
        );
        assert_eq!(
            expression(&[
                m("__main__"),
                a("keep_fn"),
                HeldStep::Closure("blobs".into())
            ]),
            "__main__.keep_fn closure blobs"
        );
        let local = HeldStep::Local {
            name: "batch".into(),
            function: "worker".into(),
            thread: Some(1234),
            thread_name: Some("holder".into()),
        };
        assert_eq!(
            expression(&[local.clone(), HeldStep::Index(0)]),
            "thread 1234 \"holder\" worker() local batch[0]"
        );
        assert_eq!(
            serde_json::to_string(&[local, a("x"), HeldStep::Index(2)]).unwrap(),
            r#"[{"local":"batch","function":"worker","thread":1234},{"attr":"x"},{"index":2}]"#
        );
    }
}

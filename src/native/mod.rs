//! Splicing Python frames into a native stack: each eval-loop frame gets the run of Python
//! frames it executes, and the interpreter's call plumbing between two of them can be hidden.

use serde::Serialize;

pub mod jit;
pub mod x86;

/// What a native frame is, judged by its symbol name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NativeRole {
    /// The bytecode eval loop: it runs one run of Python frames.
    Eval,
    /// Call plumbing between Python frames (vectorcall and friends).
    Internal,
    Other,
}

/// Eval-loop symbols; LTO builds add suffixes such as `.lto_priv.0`, and `.cold` parts are the
/// same function.
const EVAL_FUNCTIONS: &[&str] = &["_PyEval_EvalFrameDefault", "PyEval_EvalFrameEx"];

/// Interpreter call plumbing (Objects/call.c, Python/ceval.c, Objects/methodobject.c,
/// Objects/genobject.c ...), by prefix.
const INTERNAL_PREFIXES: &[&str] = &[
    "_PyEval_Vector",
    "_PyEval_EvalFrame",
    "_PyEval_EvalCode",
    "_PyFunction_Vectorcall",
    "_PyObject_Vectorcall",
    "_PyObject_Call",
    "_PyObject_FastCall",
    "_PyObject_MakeTpCall",
    "PyObject_Vectorcall",
    "PyObject_Call",
    "_PyVectorcall_Call",
    "PyVectorcall_Call",
    "method_vectorcall",
    "cfunction_call",
    "cfunction_vectorcall",
    "function_code_fastcall",
    "call_function",
    "do_call_core",
    "object_vacall",
    "slot_tp_call",
    "vectorcall_method",
    "vectorcall_unbound",
    "gen_send_ex",
    "gen_iternext",
    "_PyGen_Send",
    "PyIter_Send",
];

pub fn classify(name: &str) -> NativeRole {
    let base = name.split('.').next().unwrap_or(name);
    if EVAL_FUNCTIONS.contains(&base) {
        NativeRole::Eval
    } else if INTERNAL_PREFIXES.iter().any(|p| base.starts_with(p)) {
        NativeRole::Internal
    } else {
        NativeRole::Other
    }
}

/// What a frontend does with one native frame.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "action", rename_all = "lowercase")]
pub enum Splice {
    /// Show these Python frames (indices into the thread's frame list, innermost first)
    /// instead of the native frame.
    Python {
        frames: Vec<usize>,
    },
    /// Interpreter plumbing between two Python frames.
    Hide,
    Keep,
}

/// `names`: the native frames innermost first (`None` when the debugger has no name);
/// `entries`: for each Python frame (innermost first), whether it is the entry frame of its
/// eval-loop call. Runs are matched to eval-loop frames in order; an eval frame with no run
/// left is kept as it is.
pub fn splice(names: &[Option<String>], entries: &[bool], hide_internal: bool) -> Vec<Splice> {
    let mut runs: Vec<Vec<usize>> = Vec::new();
    let mut cur = Vec::new();
    for (i, &e) in entries.iter().enumerate() {
        cur.push(i);
        if e {
            runs.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        runs.push(cur);
    }
    let roles: Vec<NativeRole> = names
        .iter()
        .map(|n| n.as_deref().map_or(NativeRole::Other, classify))
        .collect();
    let first_eval = roles.iter().position(|r| *r == NativeRole::Eval);
    let last_eval = roles.iter().rposition(|r| *r == NativeRole::Eval);
    let mut runs = runs.into_iter();
    roles
        .iter()
        .enumerate()
        .map(|(i, role)| match role {
            NativeRole::Eval => match runs.next() {
                Some(frames) => Splice::Python { frames },
                None => Splice::Keep,
            },
            NativeRole::Internal
                if hide_internal
                    && first_eval.is_some_and(|f| f < i)
                    && last_eval.is_some_and(|l| l > i) =>
            {
                Splice::Hide
            }
            _ => Splice::Keep,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    fn n(v: &[&str]) -> Vec<Option<String>> {
        v.iter().map(|s| Some(s.to_string())).collect()
    }
    #[test]
    fn runs_go_to_eval_frames_in_order() {
        let names = n(&[
            "select",
            "_PyEval_EvalFrameDefault",
            "_PyFunction_Vectorcall",
            "builtin_sorted",
            "_PyEval_EvalFrameDefault.lto_priv.0",
            "PyEval_EvalCode",
            "main",
        ]);
        let s = splice(&names, &[false, true, false, true], true);
        assert_eq!(s[0], Splice::Keep);
        assert_eq!(s[1], Splice::Python { frames: vec![0, 1] });
        assert_eq!(s[2], Splice::Hide);
        assert_eq!(s[3], Splice::Keep);
        assert_eq!(s[4], Splice::Python { frames: vec![2, 3] });
        assert_eq!(s[5], Splice::Keep);
        let s = splice(&names, &[true], false);
        assert_eq!(s[2], Splice::Keep);
        assert_eq!(s[4], Splice::Keep);
    }
}

//! Splicing Python frames into a native stack: each eval-loop frame gets the run of Python
//! frames it executes, and the interpreter's call plumbing between two of them can be hidden.

use serde::Serialize;

pub mod jit;
pub mod pthread;
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
    // The tail-calling interpreter (3.14+, `--with-tail-call-interp`, Python/ceval_macros.h):
    // one native frame per instruction handler between the eval loop and its callees.
    "_TAIL_CALL_",
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

/// One Python frame as splicing sees it: whether it is the entry frame of its eval-loop call,
/// and where that call's own entry frame lives (3.12+: on the eval loop's C stack).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunMark {
    pub entry: bool,
    pub shim: Option<u64>,
}

impl RunMark {
    /// The marks of a thread's walked frames, innermost first (an unreadable item ends no run).
    pub fn of_walk(walk: &crate::cpython::FrameWalk) -> Vec<RunMark> {
        walk.items
            .iter()
            .map(|i| match i {
                crate::cpython::FrameItem::Python(p) => RunMark {
                    entry: p.entry,
                    shim: p.shim,
                },
                crate::cpython::FrameItem::Unreadable { .. } => RunMark::default(),
            })
            .collect()
    }
}

/// The runs of Python frames, innermost first: the frame indices each eval-loop call
/// executes, and (3.12+) where that call's own entry frame lives.
pub fn runs(marks: &[RunMark]) -> Vec<(Vec<usize>, Option<u64>)> {
    let mut runs = Vec::new();
    let mut cur = Vec::new();
    for (i, m) in marks.iter().enumerate() {
        cur.push(i);
        if m.entry {
            runs.push((std::mem::take(&mut cur), m.shim));
        }
    }
    if !cur.is_empty() {
        runs.push((cur, None));
    }
    runs
}

/// `names`: the native frames innermost first (`None` when the debugger has no name); `sps`:
/// their stack pointers, when the debugger gives them; `marks`: for each Python frame
/// (innermost first), where its eval-loop call ends.
///
/// Each run of Python frames goes to the native frame that runs it: the one whose stack frame
/// (from its own SP up to its caller's) holds the run's entry frame, when every run has one
/// (3.12+) and SPs are given; this needs no symbol, so stripped LTO builds (3.14, 3.15) work.
/// Otherwise runs go to the eval-loop frames, found by name, in order. An eval frame with no
/// run left is kept as it is.
///
/// `in_interpreter`: for each native frame, whether its PC is in the interpreter's own code
/// (the executable or libpython holding `_PyRuntime`). When given, the plumbing hidden
/// between two eval-loop frames is every such frame, by address, so a stripped build hides
/// what a build with symbols does; otherwise it is known by name.
pub fn splice(
    names: &[Option<String>],
    sps: Option<&[u64]>,
    marks: &[RunMark],
    hide_internal: bool,
    in_interpreter: Option<&[bool]>,
) -> Vec<Splice> {
    let runs = runs(marks);
    let placed = sps
        .filter(|s| s.len() == names.len())
        .and_then(|sps| place_by_stack(sps, &runs));
    let roles: Vec<NativeRole> = match &placed {
        Some(owner) => owner
            .iter()
            .zip(names)
            .map(|(o, n)| match (o, n.as_deref().map(classify)) {
                (Some(_), _) => NativeRole::Eval,
                (None, Some(NativeRole::Eval)) => NativeRole::Other,
                (None, r) => r.unwrap_or(NativeRole::Other),
            })
            .collect(),
        None => names
            .iter()
            .map(|n| n.as_deref().map_or(NativeRole::Other, classify))
            .collect(),
    };
    let roles: Vec<NativeRole> = match in_interpreter.filter(|v| v.len() == roles.len()) {
        Some(inside) => roles
            .into_iter()
            .zip(inside)
            .map(|(r, &inside)| match r {
                NativeRole::Eval => NativeRole::Eval,
                _ if inside => NativeRole::Internal,
                _ => NativeRole::Other,
            })
            .collect(),
        None => roles,
    };
    let first_eval = roles.iter().position(|r| *r == NativeRole::Eval);
    let last_eval = roles.iter().rposition(|r| *r == NativeRole::Eval);
    let mut in_order = runs.iter().map(|r| r.0.clone());
    roles
        .iter()
        .enumerate()
        .map(|(i, role)| match role {
            NativeRole::Eval => {
                let run = match &placed {
                    Some(owner) => owner[i].map(|k| runs[k].0.clone()),
                    None => in_order.next(),
                };
                match run {
                    Some(frames) => Splice::Python { frames },
                    None => Splice::Keep,
                }
            }
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

/// For each native frame, the run whose entry frame lies in its stack frame; `None` unless
/// every run has an entry frame address and at least one is placed.
fn place_by_stack(sps: &[u64], runs: &[(Vec<usize>, Option<u64>)]) -> Option<Vec<Option<usize>>> {
    if runs.is_empty() || runs.iter().any(|r| r.1.is_none()) {
        return None;
    }
    let mut owner = vec![None; sps.len()];
    let mut any = false;
    for (k, (_, shim)) in runs.iter().enumerate() {
        let a = shim.unwrap_or(0);
        // Frame i spans [its SP, its caller's SP). Inlined frames share an SP, so the
        // outermost of them (the real function) gets the span.
        let hit =
            (0..sps.len()).find(|&i| sps[i] <= a && sps.get(i + 1).is_none_or(|&next| a < next));
        if let Some(i) = hit {
            if owner[i].is_none() {
                owner[i] = Some(k);
                any = true;
            }
        }
    }
    any.then_some(owner)
}

#[cfg(test)]
mod tests {
    use super::*;
    fn n(v: &[&str]) -> Vec<Option<String>> {
        v.iter().map(|s| Some(s.to_string())).collect()
    }
    #[test]
    fn runs_end_at_entry_frames() {
        let mark = |entry, shim| RunMark { entry, shim };
        let marks = [
            mark(false, None),
            mark(true, Some(0x10)),
            mark(true, Some(0x20)),
            mark(false, None),
        ];
        assert_eq!(
            runs(&marks),
            vec![
                (vec![0, 1], Some(0x10)),
                (vec![2], Some(0x20)),
                (vec![3], None)
            ]
        );
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
        let marks = |v: &[bool]| -> Vec<RunMark> {
            v.iter()
                .map(|&entry| RunMark { entry, shim: None })
                .collect()
        };
        let s = splice(
            &names,
            None,
            &marks(&[false, true, false, true]),
            true,
            None,
        );
        assert_eq!(s[0], Splice::Keep);
        assert_eq!(s[1], Splice::Python { frames: vec![0, 1] });
        assert_eq!(s[2], Splice::Hide);
        assert_eq!(s[3], Splice::Keep);
        assert_eq!(s[4], Splice::Python { frames: vec![2, 3] });
        assert_eq!(s[5], Splice::Keep);
        let s = splice(&names, None, &marks(&[true]), false, None);
        assert_eq!(s[2], Splice::Keep);
        assert_eq!(s[4], Splice::Keep);
    }

    #[test]
    fn runs_go_to_the_frames_that_hold_their_entry_frames() {
        // A stripped build: the eval frames have no names, but their stacks hold the entry
        // frames (0x1050 in frame 1, 0x1450 in frame 4).
        let names = vec![Some("kill".to_string()), None, None, None, None, None];
        let sps = [0x1000, 0x1040, 0x1100, 0x1200, 0x1400, 0x1500];
        let marks = [
            RunMark::default(),
            RunMark {
                entry: true,
                shim: Some(0x1050),
            },
            RunMark {
                entry: true,
                shim: Some(0x1450),
            },
        ];
        let s = splice(&names, Some(&sps), &marks, true, None);
        assert_eq!(s[0], Splice::Keep);
        assert_eq!(s[1], Splice::Python { frames: vec![0, 1] });
        assert_eq!(s[2], Splice::Keep);
        assert_eq!(s[4], Splice::Python { frames: vec![2] });
        // Without SPs the same stack falls back to names, and nothing is named.
        let s = splice(&names, None, &marks, true, None);
        assert!(s.iter().all(|a| *a == Splice::Keep));
        // By address: frames 2 and 3 are in the interpreter, between two eval frames.
        let inside = [false, true, true, true, true, true];
        let s = splice(&names, Some(&sps), &marks, true, Some(&inside));
        assert_eq!(s[2], Splice::Hide);
        assert_eq!(s[3], Splice::Hide);
        assert_eq!(s[5], Splice::Keep);
        let s = splice(&names, Some(&sps), &marks, false, Some(&inside));
        assert_eq!(s[2], Splice::Keep);
    }
}

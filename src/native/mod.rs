//! Splicing Python frames into a native stack: each eval-loop frame gets the run of Python
//! frames it executes, and the interpreter's call plumbing between two of them can be hidden.

use serde::Serialize;

pub mod jit;
pub mod pthread;

/// What a native frame is, judged by its symbol name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NativeRole {
    /// The bytecode eval loop: it runs one run of Python frames.
    Eval,
    /// Call plumbing between Python frames (see [`PLUMBING`]).
    Internal,
    Other,
}

/// Eval-loop symbols; LTO builds add suffixes such as `.lto_priv.0`, and `.cold` parts are the
/// same function.
const EVAL_FUNCTIONS: &[&str] = &["_PyEval_EvalFrameDefault", "PyEval_EvalFrameEx"];

/// How a plumbing entry matches a symbol (its base name, suffixes such as `.lto_priv.0` off).
#[derive(Clone, Copy, Debug)]
enum Match {
    Exact(&'static str),
    Prefix(&'static str),
}

/// The interpreter's call plumbing, hidden between two Python frames by `--native`, gdb's `bt`
/// and the lldb provider: the eval loop's own entry points, the vectorcall and `tp_call`
/// dispatch, the trampolines that turn a call of a method, function or type into a call of
/// its C or Python code, and what runs a signal handler from C. Nothing else is: the C
/// functions that do the program's work (`builtin_sorted`, `list_sort_impl`,
/// `partial_vectorcall`, `dict_subscript`, a C extension's functions and what they call) stay,
/// and so do the type slots that C code calls on an object whose slot runs Python code: a
/// generator's `tp_iternext` (`gen_iternext`, `gen_send_ex2`: `next()` or `sorted` over a
/// generator), a coroutine's `send` (`gen_send`, `gen_send_ex`, `PyIter_Send`), a class's
/// dunder slots (`slot_tp_iternext`, `slot_mp_subscript`, `slot_tp_init`...): they are what
/// the C caller called, as `map_next` and `filter_next` are. `pystack --native` shows the same
/// frames but for one choice: it hides every name containing `vectorcall` (a type's own,
/// `partial_vectorcall`, too). Names from CPython 3.10 to 3.15; each group names the file
/// that defines it.
const PLUMBING: &[(Match, &str)] = &[
    // The eval loop's entry and exit: `_PyEval_Vector`, `_PyEval_EvalFrame` (3.11+, inline in
    // Include/internal/pycore_ceval.h), 3.10's `_PyEval_EvalCode`; `PyEval_EvalCode` and
    // `PyEval_EvalCodeEx` run `exec` and `eval` code.
    (Match::Prefix("_PyEval_"), "Python/ceval.c"),
    (Match::Prefix("PyEval_EvalCode"), "Python/ceval.c"),
    (
        Match::Exact("PyEval_CallObjectWithKeywords"),
        "Python/ceval.c (3.10)",
    ),
    // 3.10's call opcodes.
    (Match::Exact("call_function"), "Python/ceval.c (3.10)"),
    (Match::Exact("trace_call_function"), "Python/ceval.c (3.10)"),
    (Match::Exact("do_call_core"), "Python/ceval.c (3.10)"),
    // The tail-calling interpreter (3.14+, `--with-tail-call-interp`, Python/ceval_macros.h):
    // one native frame per instruction handler between the eval loop and its callees.
    (Match::Prefix("_TAIL_CALL_"), "Python/generated_cases.c.h"),
    // Generic calls and vectorcall dispatch: `PyObject_Call`, `PyObject_CallOneArg`,
    // `PyObject_CallMethod`..., `_PyObject_MakeTpCall`, `PyObject_Vectorcall` and the inline
    // `_PyObject_VectorcallTstate` (Include/internal/pycore_call.h, 3.10's
    // Include/cpython/abstract.h), `_PyFunction_Vectorcall` (the Python function's vectorcall);
    // the prefix also takes `PyObject_CallFinalizerFromDealloc` (Objects/object.c), which
    // calls a `__del__`.
    (Match::Prefix("PyObject_Call"), "Objects/call.c"),
    (Match::Prefix("_PyObject_Call"), "Objects/call.c"),
    (Match::Prefix("_PyObject_FastCall"), "Objects/call.c"),
    (Match::Prefix("PyObject_Vectorcall"), "Objects/call.c"),
    (Match::Prefix("_PyObject_Vectorcall"), "Objects/call.c"),
    (Match::Exact("_PyObject_MakeTpCall"), "Objects/call.c"),
    (Match::Exact("_PyFunction_Vectorcall"), "Objects/call.c"),
    (Match::Exact("PyVectorcall_Call"), "Objects/call.c"),
    (Match::Exact("_PyVectorcall_Call"), "Objects/call.c"),
    (Match::Exact("object_vacall"), "Objects/call.c"),
    (Match::Exact("callmethod"), "Objects/call.c"),
    (
        Match::Exact("function_code_fastcall"),
        "Objects/call.c (3.8, 3.9)",
    ),
    // Builtin functions and bound builtin methods (`PyCFunctionObject`): one dispatcher per
    // calling convention, `cfunction_vectorcall_FASTCALL_KEYWORDS`...
    (
        Match::Prefix("cfunction_vectorcall"),
        "Objects/methodobject.c",
    ),
    (Match::Exact("cfunction_call"), "Objects/methodobject.c"),
    (
        Match::Exact("PyCFunction_Call"),
        "Objects/methodobject.c (3.10)",
    ),
    // Unbound methods of C types (`method_descriptor`): `method_vectorcall_O`...; and bound
    // methods (`PyMethodObject`), `method_vectorcall`, in Objects/classobject.c.
    (
        Match::Prefix("method_vectorcall"),
        "Objects/descrobject.c, Objects/classobject.c",
    ),
    (Match::Exact("method_call"), "Objects/classobject.c"),
    (Match::Exact("methoddescr_call"), "Objects/descrobject.c"),
    (
        Match::Exact("classmethoddescr_call"),
        "Objects/descrobject.c",
    ),
    (Match::Exact("wrapperdescr_call"), "Objects/descrobject.c"),
    (
        Match::Exact("wrapperdescr_raw_call"),
        "Objects/descrobject.c",
    ),
    (Match::Exact("wrapper_call"), "Objects/descrobject.c"),
    // Calling an instance of a class with `__call__` (`slot_tp_call`: a `tp_call`, call
    // dispatch as `type_call` is), the helpers that find and call a class's dunder for the
    // slots (`slot_mp_subscript`... stay), and a type's own `tp_call`.
    (Match::Exact("slot_tp_call"), "Objects/typeobject.c"),
    (Match::Exact("vectorcall_method"), "Objects/typeobject.c"),
    (Match::Exact("vectorcall_unbound"), "Objects/typeobject.c"),
    (Match::Exact("vectorcall_maybe"), "Objects/typeobject.c"),
    (Match::Exact("call_method"), "Objects/typeobject.c (3.10)"),
    (Match::Exact("call_unbound"), "Objects/typeobject.c (3.10)"),
    (Match::Exact("type_call"), "Objects/typeobject.c"),
    // `-X perf`'s evaluator (3.12+), which runs the eval loop through a perf trampoline.
    (
        Match::Exact("py_trampoline_evaluator"),
        "Python/perf_trampoline.c",
    ),
    // Running Python signal handlers and pending calls: from the eval loop's breaker
    // (`eval_frame_handle_pending` in 3.10's Python/ceval.c, `_Py_HandlePending` and
    // `make_pending_calls` in Python/ceval_gil.c) or from a C function that checks for signals
    // (`PyErr_CheckSignals`, `_PyErr_CheckSignalsTstate` in Modules/signalmodule.c).
    (
        Match::Exact("eval_frame_handle_pending"),
        "Python/ceval.c (3.10)",
    ),
    (Match::Exact("_Py_HandlePending"), "Python/ceval_gil.c"),
    (Match::Exact("make_pending_calls"), "Python/ceval_gil.c"),
    (Match::Exact("handle_signals"), "Python/ceval_gil.c"),
    (Match::Exact("Py_MakePendingCalls"), "Python/ceval_gil.c"),
    (Match::Exact("PyErr_CheckSignals"), "Modules/signalmodule.c"),
    (
        Match::Prefix("_PyErr_CheckSignals"),
        "Modules/signalmodule.c",
    ),
];

/// Whether `name` (a symbol, with or without a compiler suffix) is call plumbing.
pub fn is_plumbing(name: &str) -> bool {
    let base = name.split('.').next().unwrap_or(name);
    PLUMBING.iter().any(|(m, _)| match *m {
        Match::Exact(s) => base == s,
        Match::Prefix(p) => base.starts_with(p),
    })
}

pub fn classify(name: &str) -> NativeRole {
    let base = name.split('.').next().unwrap_or(name);
    if EVAL_FUNCTIONS.contains(&base) {
        NativeRole::Eval
    } else if is_plumbing(base) {
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
    Python { frames: Vec<usize> },
    /// Interpreter plumbing between two Python frames.
    Hide,
    Keep {
        /// A frame with no symbol that runs the builtin a Python frame calls: the builtin's
        /// name, from its `PyMethodDef` (`sorted`).
        #[serde(skip_serializing_if = "Option::is_none")]
        builtin: Option<String>,
    },
}

impl Splice {
    pub const KEEP: Splice = Splice::Keep { builtin: None };
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
/// `hide_internal`: hide the call plumbing between the outermost and innermost eval-loop
/// frames, known by name ([`PLUMBING`], and eval-loop frames that run no Python frame).
/// `in_interpreter`: for each native frame, whether its PC is in the interpreter's own code
/// (the executable or libpython holding `_PyRuntime`). When given, only the interpreter's
/// frames are hidden, and among them also those without a name (a stripped build: plumbing
/// and the builtins' helpers cannot be told apart; [`name_builtins`] shows the builtin's own
/// frame again).
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
                // The eval loop running no Python frame of ours is plumbing too.
                (None, Some(NativeRole::Eval)) => NativeRole::Internal,
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
            .zip(names)
            .map(|((r, &inside), n)| match r {
                NativeRole::Eval => NativeRole::Eval,
                NativeRole::Internal if inside => NativeRole::Internal,
                NativeRole::Other if inside && n.is_none() => NativeRole::Internal,
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
                    None => Splice::KEEP,
                }
            }
            NativeRole::Internal
                if hide_internal
                    && first_eval.is_some_and(|f| f < i)
                    && last_eval.is_some_and(|l| l > i) =>
            {
                Splice::Hide
            }
            _ => Splice::KEEP,
        })
        .collect()
}

/// The native frames between each Python run and the next inner one, innermost first, for
/// [`name_builtins`]: (the run's action index, its frames, the native indices between).
pub fn run_gaps(actions: &[Splice]) -> Vec<(usize, &[usize], Vec<usize>)> {
    let mut out = Vec::new();
    let mut pending = Vec::new();
    for (level, a) in actions.iter().enumerate() {
        match a {
            Splice::Python { frames } => {
                out.push((level, frames.as_slice(), std::mem::take(&mut pending)));
            }
            _ => pending.push(level),
        }
    }
    out
}

/// Shows again a hidden frame without a symbol that runs a builtin: `running` is, for each
/// gap of [`run_gaps`], the native index running the builtin its Python frame calls and that
/// builtin's name.
pub fn name_builtins(actions: &mut [Splice], running: &[(usize, String)]) {
    for (k, name) in running {
        if let Some(a @ Splice::Hide) = actions.get_mut(*k) {
            *a = Splice::Keep {
                builtin: Some(name.clone()),
            };
        }
    }
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
        assert_eq!(s[0], Splice::KEEP);
        assert_eq!(s[1], Splice::Python { frames: vec![0, 1] });
        assert_eq!(s[2], Splice::Hide);
        assert_eq!(s[3], Splice::KEEP);
        assert_eq!(s[4], Splice::Python { frames: vec![2, 3] });
        assert_eq!(s[5], Splice::KEEP);
        let s = splice(&names, None, &marks(&[true]), false, None);
        assert_eq!(s[2], Splice::KEEP);
        assert_eq!(s[4], Splice::KEEP);
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
        assert_eq!(s[0], Splice::KEEP);
        assert_eq!(s[1], Splice::Python { frames: vec![0, 1] });
        assert_eq!(s[2], Splice::KEEP);
        assert_eq!(s[4], Splice::Python { frames: vec![2] });
        // Without SPs the same stack falls back to names, and nothing is named.
        let s = splice(&names, None, &marks, true, None);
        assert!(s.iter().all(|a| *a == Splice::KEEP));
        // By address: frames 2 and 3 are in the interpreter, between two eval frames.
        let inside = [false, true, true, true, true, true];
        let s = splice(&names, Some(&sps), &marks, true, Some(&inside));
        assert_eq!(s[2], Splice::Hide);
        assert_eq!(s[3], Splice::Hide);
        assert_eq!(s[5], Splice::KEEP);
        let s = splice(&names, Some(&sps), &marks, false, Some(&inside));
        assert_eq!(s[2], Splice::KEEP);
    }

    #[test]
    fn only_plumbing_is_hidden_between_python_frames() {
        // pyenv 3.12's stack under `sorted(..., key=functools.partial(keyfunc, d))`.
        let names = n(&[
            "_PyEval_EvalFrameDefault",
            "_PyObject_VectorcallTstate",
            "partial_vectorcall",
            "PyObject_CallOneArg",
            "list_sort_impl",
            "list_sort",
            "cfunction_vectorcall_FASTCALL_KEYWORDS",
            "PyObject_Vectorcall",
            "builtin_sorted",
            "cfunction_vectorcall_FASTCALL_KEYWORDS.lto_priv.0",
            "slot_mp_subscript",
            "_PyEval_EvalFrameDefault",
        ]);
        let marks = [true, true].map(|entry| RunMark { entry, shim: None });
        let inside = [true; 12];
        let s = splice(&names, None, &marks, true, Some(&inside));
        let kept: Vec<&str> = s
            .iter()
            .zip(&names)
            .filter(|(a, _)| **a == Splice::KEEP)
            .filter_map(|(_, n)| n.as_deref())
            .collect();
        assert_eq!(
            kept,
            [
                "partial_vectorcall",
                "list_sort_impl",
                "list_sort",
                "builtin_sorted",
                "slot_mp_subscript"
            ]
        );
        // Outside the interpreter nothing is hidden, whatever its name.
        let outside = [
            true, false, false, false, false, false, false, false, false, false, false, true,
        ];
        let s = splice(&names, None, &marks, true, Some(&outside));
        assert_eq!(s.iter().filter(|a| **a == Splice::Hide).count(), 0);
    }

    #[test]
    fn what_resumes_a_generator_from_c_is_kept() {
        // pyenv 3.12 under `next(gen)` and under a coroutine's `send`: the generator's and
        // the coroutine's own slots stay, as `map_next` does; the eval loop's entry goes.
        for (name, hidden) in [
            ("gen_iternext", false),
            ("gen_send_ex2", false),
            ("gen_send_ex", false),
            ("gen_send", false),
            ("PyIter_Send", false),
            ("slot_tp_iternext", false),
            ("map_next", false),
            ("slot_tp_call", true),
            ("_PyEval_EvalFrame", true),
            ("method_vectorcall_O", true),
        ] {
            assert_eq!(is_plumbing(name), hidden, "{name}");
        }
    }

    #[test]
    fn a_stripped_builtin_frame_is_shown_again_with_its_name() {
        let names = vec![None, None, Some("PyObject_Vectorcall".to_string()), None];
        let marks = [true, true].map(|entry| RunMark {
            entry,
            shim: Some(0),
        });
        let mut s = splice(&names, None, &marks, true, Some(&[true; 4]));
        // Without SPs or names no eval frame is known: nothing to hide.
        assert!(s.iter().all(|a| *a == Splice::KEEP));
        let marks = [
            RunMark {
                entry: true,
                shim: Some(0x1008),
            },
            RunMark {
                entry: true,
                shim: Some(0x1308),
            },
        ];
        let sps = [0x1000, 0x1100, 0x1200, 0x1300];
        s = splice(&names, Some(&sps), &marks, true, Some(&[true; 4]));
        assert_eq!(s[1], Splice::Hide);
        assert_eq!(s[2], Splice::Hide);
        let gaps = run_gaps(&s);
        assert_eq!(gaps[1].2, vec![1, 2]);
        name_builtins(&mut s, &[(1, "sorted".to_string())]);
        assert_eq!(
            serde_json::to_string(&s[1]).unwrap(),
            r#"{"action":"keep","builtin":"sorted"}"#
        );
        assert_eq!(
            serde_json::to_string(&s[3]).unwrap(),
            r#"{"action":"python","frames":[1]}"#
        );
    }
}

//! `py-bt`'s stack as libpython walks it: a thread's Python frames and, with its native
//! frames, the native lines libpython shows between them (the C function a frame calls,
//! `Waiting for the GIL`, `Garbage-collecting`), at the levels the debugger shows. Its text is
//! [`crate::report::views::render_bt`]'s.

use super::native_stacks::{splice, Natives};
use super::{Session, ThreadKey};
use crate::cpython::callables::NativeFrame;
use crate::cpython::FrameItem;
use crate::error::Result;
use crate::model::{FrameKind, StackEntry};
use crate::native::Splice;

/// The thread's stack as libpython's py-bt and py-up walk it, innermost first: its Python
/// frames and, when its native frames are given, the native frames libpython shows
/// between them (see [`StackEntry`]).
pub fn stack_entries(
    s: &Session,
    key: ThreadKey,
    natives: Option<&Natives>,
) -> Result<Vec<StackEntry>> {
    let t = s.thread(key)?;
    let python = |index: usize, level: Option<usize>| StackEntry {
        kind: FrameKind::Python,
        index: Some(index),
        level,
        text: None,
    };
    let Some(n) = natives else {
        return Ok((0..t.walk.items.len()).map(|i| python(i, None)).collect());
    };
    let actions = splice(s, key, &n.names, n.sps.as_deref(), None, false);
    // Without symbols, the GIL and GC markers come from memory: the thread blocked on the
    // GIL's own address; the interpreter's collector running and this thread the GIL's
    // last holder (a finalizer the collector runs may have released it, as in a sleep).
    let named: Vec<String> = markers(&n.names, &(0..n.names.len()).collect::<Vec<_>>())
        .into_iter()
        .map(|m| m.1)
        .collect();
    let mut from_memory = Vec::new();
    let (interp, holds) = (t.info.interp, t.info.holds_gil);
    if !named.iter().any(|m| m == WAITING_FOR_GIL)
        && n.wait_addr
            .is_some_and(|a| s.snap.waits_for_gil(interp, holds, a))
    {
        // At the interpreter's innermost frame, where libpython finds `take_gil` by name:
        // the frames inside it are the C library's wait.
        let inside = s.in_interpreter(&n.pcs);
        let first_run = actions
            .iter()
            .position(|a| matches!(a, Splice::Python { .. }))
            .unwrap_or(actions.len());
        let at = (0..first_run).find(|&k| inside.get(k) == Some(&true));
        from_memory.push((at.unwrap_or(0), WAITING_FOR_GIL.to_string()));
    }
    let collecting =
        !named.iter().any(|m| m == COLLECTING) && s.snap.is_collecting(interp, t.info.addr);
    // Each Python run with the native frames between it and the next inner one, and the C
    // callable its innermost frame is calling.
    let mut runs = Vec::new();
    let mut pending: Vec<usize> = Vec::new();
    for (level, a) in actions.iter().enumerate() {
        let Splice::Python { frames } = a else {
            pending.push(level);
            continue;
        };
        let mut called = None;
        if let Some(FrameItem::Python(p)) = frames.first().and_then(|&i| t.walk.items.get(i)) {
            let natives: Vec<NativeFrame> = pending
                .iter()
                .map(|&k| NativeFrame {
                    name: n.names[k].clone(),
                    pc: n.pcs.get(k).copied().unwrap_or(0),
                })
                .collect();
            let outer_pc = n.pcs.get(level).copied().unwrap_or(0);
            let inner = frames
                .first()
                .and_then(|&i| i.checked_sub(1))
                .and_then(|i| t.walk.items.get(i))
                .map(|f| match f {
                    FrameItem::Python(f) => f.addr,
                    FrameItem::Unreadable { addr, .. } => *addr,
                });
            called = s.snap.called_callable(p, &natives, outer_pc, inner);
        }
        runs.push((level, frames, std::mem::take(&mut pending), called));
    }
    // The collector runs under `gc.collect` when Python code called it (libpython shows
    // the line just inside that call), else it is the innermost code.
    let gc_run = collecting
        .then(|| {
            runs.iter()
                .position(|r| r.3.as_ref().is_some_and(|c| s.snap.is_gc_collect(c.obj)))
        })
        .flatten();
    if collecting && gc_run.is_none() {
        from_memory.push((0, COLLECTING.to_string()));
    }
    let mut from_memory = Some(from_memory);
    let native = |(level, text): (usize, String)| StackEntry {
        kind: FrameKind::Native,
        index: None,
        level: Some(level),
        text: Some(text),
    };
    let mut out = Vec::new();
    let mut shown = vec![false; t.walk.items.len()];
    for (r, (level, frames, natives, called)) in runs.into_iter().enumerate() {
        let mut lines = markers(&n.names, &natives);
        lines.extend(from_memory.take().unwrap_or_default());
        if let Some(c) = called {
            if collecting && gc_run == Some(r) {
                lines.push((natives[c.at.saturating_sub(1)], COLLECTING.to_string()));
            }
            lines.push((natives[c.at], c.text));
        }
        lines.sort_by_key(|l| l.0);
        out.extend(lines.into_iter().map(native));
        for &i in frames {
            shown[i] = true;
            out.push(python(i, Some(level)));
        }
    }
    // A thread with no Python run in its native frames still gets the markers.
    let mut last = markers(&n.names, &pending);
    last.extend(from_memory.take().unwrap_or_default());
    last.sort_by_key(|l| l.0);
    out.extend(last.into_iter().map(native));
    out.extend(
        (0..shown.len())
            .filter(|&i| !shown[i])
            .map(|i| python(i, None)),
    );
    if let Some(levels) = &n.levels {
        shown_levels(&mut out, &actions, levels, n.python_levels.as_deref());
    }
    Ok(out)
}

/// Gives the entries the levels the debugger shows (see [`Natives::levels`]). An entry whose
/// native frame is hidden takes the level of the next shown frame outward: the plumbing the
/// debugger folds away sits there.
fn shown_levels(
    entries: &mut [StackEntry],
    actions: &[Splice],
    levels: &[Option<usize>],
    python_levels: Option<&[Option<usize>]>,
) {
    // Without `python_levels` the debugger shows the eval-loop frames themselves.
    let level = |k: usize| levels.get(k).copied().flatten();
    let python_level = |i: usize| python_levels.and_then(|p| p.get(i).copied().flatten());
    let outward = |k: usize| {
        (k..actions.len()).find_map(|j| match &actions[j] {
            Splice::Python { frames } if python_levels.is_some() => {
                frames.first().and_then(|&i| python_level(i))
            }
            _ => level(j),
        })
    };
    for e in entries {
        e.level = match (e.kind, e.index) {
            (FrameKind::Python, Some(i)) if python_levels.is_some() => {
                python_level(i).or_else(|| e.level.and_then(outward))
            }
            (FrameKind::Python, _) => e.level.and_then(level),
            _ => e.level.and_then(outward),
        };
    }
}

const WAITING_FOR_GIL: &str = "Waiting for the GIL";
const COLLECTING: &str = "Garbage-collecting";

/// Native functions libpython.py marks in py-bt (Tools/gdb/libpython.py,
/// `is_waiting_for_gil`, `is_gc_collect`; 3.13 added the generational names).
const GIL_WAIT_FUNCTIONS: &[&str] = &["take_gil"];
const GC_FUNCTIONS: &[&str] = &[
    "collect",
    "gc_collect_main",
    "gc_collect_full",
    "gc_collect_young",
    "gc_collect_increment",
];

/// The "Waiting for the GIL" and "Garbage-collecting" lines for the native frames `levels`.
fn markers(names: &[Option<String>], levels: &[usize]) -> Vec<(usize, String)> {
    levels
        .iter()
        .filter_map(|&k| {
            let name = names.get(k)?.as_deref()?;
            let base = name.split('.').next().unwrap_or(name);
            if GIL_WAIT_FUNCTIONS.contains(&base) {
                Some((k, WAITING_FOR_GIL.to_string()))
            } else if GC_FUNCTIONS.contains(&base) {
                Some((k, COLLECTING.to_string()))
            } else {
                None
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(kind: FrameKind, index: Option<usize>, level: usize) -> StackEntry {
        StackEntry {
            kind,
            index,
            level: Some(level),
            text: (kind == FrameKind::Native).then(|| "line".to_string()),
        }
    }

    #[test]
    fn provided_levels_replace_ours_and_hidden_frames_take_the_next_shown_one() {
        // Ours: 0 libc, 1 the C function, 2 plumbing (hidden by the debugger), 3 eval loop
        // running Python frames 0 and 1, 4 main. The debugger shows: 0, 1, Python 0 at 2,
        // Python 1 at 3, main at 4.
        let actions = vec![
            Splice::KEEP,
            Splice::KEEP,
            Splice::Hide,
            Splice::Python { frames: vec![0, 1] },
            Splice::KEEP,
        ];
        let levels = vec![Some(0), Some(1), None, None, Some(4)];
        let python_levels = vec![Some(2), Some(3)];
        let mut entries = vec![
            entry(FrameKind::Native, None, 1),
            entry(FrameKind::Native, None, 2),
            entry(FrameKind::Python, Some(0), 3),
            entry(FrameKind::Python, Some(1), 3),
        ];
        let mut own = entries.clone();
        shown_levels(&mut entries, &actions, &levels, Some(&python_levels));
        let got: Vec<_> = entries.iter().map(|e| e.level).collect();
        assert_eq!(got, vec![Some(1), Some(2), Some(2), Some(3)]);
        // The debugger's own frames, fewer than ours (lldb 19 stops early): its levels where
        // it shows the frame, none past its last one.
        let levels = vec![Some(0), Some(1), Some(2)];
        shown_levels(&mut own, &actions, &levels, None);
        let got: Vec<_> = own.iter().map(|e| e.level).collect();
        assert_eq!(got, vec![Some(1), Some(2), None, None]);
    }
}

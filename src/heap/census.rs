//! `--heap` over a stop: the census of the interpreters' objects ([`crate::cpython::heap`])
//! and what keeps the most alive ([`super::retainers`]) added to a report (its text is
//! [`crate::report::heap_text`]).

use super::retainers;
use crate::cpython::heap::{LocalRoot, Roots};
use crate::cpython::{FrameItem, StackRef};
use crate::error::ReadError;
use crate::model::{
    ErrorReport, HeapCount, HeapObject, HeapProcess, HeapReport, HeapType, HeapUnreached, Report,
    SizeSource,
};
use crate::session::Session;
use crate::target::SourceKind;

/// How many of the largest objects `--heap` lists unless `--heap-top` says.
pub const DEFAULT_TOP: usize = 20;
/// Most locals read of one frame (a code object has at most a few thousand).
const MAX_LOCALS: u64 = 1 << 16;
/// Most largest objects listed (`--heap-top` beyond it is capped).
pub const MAX_TOP: usize = 100_000;
/// Modules read of one interpreter's `sys.modules`.
const MAX_MODULES: u64 = 1 << 16;

/// `r` with the heap's census (`--heap`), what stopped the walk among its errors.
pub fn add_to(s: &Session, r: &mut Report, top: usize) {
    let mut errors = Vec::new();
    let interps = s
        .snap
        .interpreters_noting_cap(&mut errors)
        .unwrap_or_else(|e| {
            errors.push(e);
            Vec::new()
        });
    let roots = Roots {
        modules: modules(s, &interps, &mut errors),
        locals: frame_locals(s, &mut errors),
    };
    let top = top.min(MAX_TOP);
    let mut c = s.snap.heap_census(&interps, &roots, top);
    let retainers = match c.graph.take() {
        Some(graph) => retainers::top(&s.snap, graph, &roots, top).unwrap_or_else(|e| {
            c.note(e);
            Vec::new()
        }),
        None => Vec::new(),
    };
    r.errors.extend(
        errors
            .iter()
            .chain(&c.errors)
            .map(|e| ErrorReport::read(e, "heap")),
    );
    r.heap = Some(HeapReport {
        types: c
            .types
            .into_iter()
            .map(|t| HeapType {
                type_name: t.name,
                count: t.count,
                bytes: t.bytes,
                data_bytes: t.data.map(|d| d.0),
                device_bytes: t.data.map(|d| d.1),
            })
            .collect(),
        largest: c
            .largest
            .into_iter()
            .map(|o| HeapObject {
                address: o.address,
                type_name: o.type_name,
                bytes: o.bytes,
                len: o.len,
            })
            .collect(),
        retainers,
        objects: c.objects,
        bytes: c.bytes,
        unreached: HeapUnreached {
            unwalked: c
                .unwalked
                .into_iter()
                .map(|(type_name, count)| HeapCount { type_name, count })
                .collect(),
            unreadable: c.unreadable,
            unreadable_by: c
                .unreadable_by
                .into_iter()
                .map(|(type_name, count)| HeapCount { type_name, count })
                .collect(),
        },
        complete: c.complete,
        process: process(s, &mut r.errors),
    });
}

/// The process's own size: live, `/proc/PID/smaps_rollup` read now; from a core, its written
/// anonymous bytes; None through a debugger (whose process may be remote).
fn process(s: &Session, errors: &mut Vec<ErrorReport>) -> Option<HeapProcess> {
    match (s.target.kind, s.target.pid) {
        (SourceKind::Live, Some(pid)) => {
            let path = format!("/proc/{pid}/smaps_rollup");
            match std::fs::read_to_string(&path) {
                Ok(text) => Some(HeapProcess {
                    rss: smaps_field(&text, "Rss:"),
                    pss: smaps_field(&text, "Pss:"),
                    source: SizeSource::SmapsRollup,
                }),
                Err(e) => {
                    errors.push(ErrorReport {
                        address: 0,
                        what: format!("heap: {path}: {e}"),
                    });
                    None
                }
            }
        }
        (SourceKind::Core, _) => s.target.core_anonymous_bytes.map(|n| HeapProcess {
            rss: Some(n),
            pss: None,
            source: SizeSource::Core,
        }),
        _ => None,
    }
}

/// A `Name:   123 kB` line of smaps_rollup, in bytes.
fn smaps_field(text: &str, name: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(name))?;
    let kb: u64 = line[name.len()..].split_whitespace().next()?.parse().ok()?;
    kb.checked_mul(1024)
}

/// Every interpreter's `sys.modules`: (module, its name there).
fn modules(s: &Session, interps: &[u64], errors: &mut Vec<ReadError>) -> Vec<(u64, String)> {
    let mut out = Vec::new();
    for &interp in interps {
        let read = s.snap.sys_modules(interp).and_then(|d| match d {
            Some(d) => s.snap.dict_items(d, MAX_MODULES),
            None => Ok(Vec::new()),
        });
        match read {
            Ok(items) => out.extend(
                items
                    .into_iter()
                    .filter_map(|(k, v)| Some((v, s.snap.read_str(k).ok()?))),
            ),
            Err(e) => errors.push(e),
        }
    }
    out
}

/// The objects every thread's Python frames hold in their locals (arguments, cells; not the
/// value stacks), tagged ints (3.14+) left out, innermost frames first.
fn frame_locals(s: &Session, errors: &mut Vec<ReadError>) -> Vec<LocalRoot> {
    let mut out = Vec::new();
    for t in s.threads() {
        for item in &t.walk.items {
            let FrameItem::Python(f) = item else {
                continue;
            };
            let read = s.snap.localsplus(f).and_then(|(base, tag_bits)| {
                let n = f.code.locals.len() as u64;
                let raw = s.snap.mem.read_vec(base, n * 8, MAX_LOCALS * 8)?;
                for (w, (name, _)) in raw.chunks_exact(8).zip(&f.code.locals) {
                    let bits = u64::from_le_bytes(w.try_into().unwrap_or_default());
                    let StackRef::Object(obj) = StackRef::decode(bits, tag_bits) else {
                        continue;
                    };
                    out.push(LocalRoot {
                        obj,
                        name: name.clone(),
                        function: f.code.qualname.to_string(),
                        thread: t.info.native_id,
                        thread_name: t.info.name.clone(),
                    });
                }
                Ok(())
            });
            if let Err(e) = read {
                errors.push(e);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smaps_rollup_fields_in_bytes() {
        let t = "55a0-7ffd ---p 00000000 00:00 0  [rollup]\nRss:              416 kB\nPss:               400 kB\nPss_Anon:          300 kB\n";
        assert_eq!(smaps_field(t, "Rss:"), Some(416 * 1024));
        assert_eq!(smaps_field(t, "Pss:"), Some(400 * 1024));
        assert_eq!(smaps_field(t, "Swap:"), None);
    }
}

//! `--heap` over a stop: the census of the interpreters' objects ([`crate::cpython::heap`])
//! added to a report, and its text.

use super::Session;
use crate::cpython::heap::{LocalRoot, Retainer, Roots};
use crate::cpython::FrameItem;
use crate::error::ReadError;
use crate::model::HeapRetainer;
use crate::model::{
    ErrorReport, HeapCount, HeapObject, HeapProcess, HeapReport, HeapType, HeapUnreached, Report,
};
use crate::report::bytes_text::{human, thousands};
use crate::report::held_by;
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
    let c = s.snap.heap_census(&interps, &roots, top.min(MAX_TOP));
    r.errors
        .extend(errors.iter().chain(&c.errors).map(|e| ErrorReport {
            address: e.addr,
            what: format!("heap: {e}"),
        }));
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
        retainers: c.retainers.into_iter().map(retainer).collect(),
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
                    source: "smaps_rollup".into(),
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
            source: "core".into(),
        }),
        _ => None,
    }
}

/// What a type's objects keep beside their own bytes: `  + 3.8 MiB data, 1.0 GiB on CUDA`.
fn data_text(t: &HeapType) -> String {
    let part = |v: Option<Option<u64>>, what: &str| match v {
        None | Some(Some(0)) => None,
        Some(Some(n)) => Some(format!("{} {what}", human(n))),
        Some(None) => Some(format!("? {what}")),
    };
    let parts: Vec<String> = [part(t.data_bytes, "data"), part(t.device_bytes, "on CUDA")]
        .into_iter()
        .flatten()
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("  + {}", parts.join(", "))
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
                    if tag_bits != 0 && bits & tag_bits == tag_bits {
                        continue;
                    }
                    out.push(LocalRoot {
                        obj: bits & !tag_bits,
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

fn retainer(r: Retainer) -> HeapRetainer {
    HeapRetainer {
        address: r.address,
        type_name: r.type_name,
        len: r.len,
        bytes: r.bytes,
        retained: r.retained,
        held_by: r.held_by,
    }
}

/// The heap's text: the top types (count, bytes, share of the bytes) and the largest objects,
/// `top` rows of each.
pub fn render(h: &HeapReport, top: usize) -> String {
    let of = match &h.process {
        Some(HeapProcess {
            rss: Some(rss),
            source,
            ..
        }) if source == "core" => format!(" of {} written anonymous memory", human(*rss)),
        Some(HeapProcess { rss: Some(rss), .. }) => format!(" of {} RSS", human(*rss)),
        _ => String::new(),
    };
    let mut out = format!(
        "Heap: {} objects, {}{of}{}\n\n",
        thousands(h.objects),
        human(h.bytes),
        if h.complete {
            ""
        } else {
            " — the walk stopped early: a lower bound"
        }
    );
    let w = h
        .types
        .iter()
        .take(top)
        .map(|t| t.type_name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    out += &format!(
        "{:<w$}  {:>10}  {:>12}  {:>6}\n",
        "type", "count", "bytes", "share"
    );
    for t in h.types.iter().take(top) {
        let share = if h.bytes == 0 {
            0.0
        } else {
            t.bytes as f64 * 100.0 / h.bytes as f64
        };
        out += &format!(
            "{:<w$}  {:>10}  {:>12}  {:>5.1}%{}\n",
            t.type_name,
            t.count,
            human(t.bytes),
            share,
            data_text(t)
        );
    }
    if h.types.len() > top {
        out += &format!("... {} more types\n", h.types.len() - top);
    }
    out += "\nLargest objects:\n";
    for o in h.largest.iter().take(top) {
        out += &format!(
            "  {:#x}  {:<w$}  {:>12}{}\n",
            o.address,
            o.type_name,
            human(o.bytes),
            o.len.map_or(String::new(), |n| format!("  len {n}"))
        );
    }
    if !h.retainers.is_empty() {
        out += "\nWhat keeps the most alive (retained: it and what only it reaches):\n";
        for r in h.retainers.iter().take(top) {
            out += &format!(
                "  {:>12}  {:#x}  {}{}  {}\n",
                human(r.retained),
                r.address,
                r.type_name,
                r.len.map_or(String::new(), |n| format!(" len {n}")),
                r.held_by
                    .as_deref()
                    .map_or_else(|| "(path too long)".into(), held_by::expression)
            );
        }
    }
    let u = &h.unreached;
    if !u.unwalked.is_empty() || u.unreadable > 0 {
        out += "\nNot counted: objects referred to only by ";
        let kinds: Vec<String> = u
            .unwalked
            .iter()
            .take(8)
            .map(|c| format!("{} ({})", c.type_name, c.count))
            .collect();
        out += &kinds.join(", ");
        if u.unwalked.len() > 8 {
            out += ", ...";
        }
        out += ", or by C memory";
        if u.unreadable > 0 {
            let by: Vec<String> = u
                .unreadable_by
                .iter()
                .take(4)
                .map(|c| format!("{} {}", c.count, c.type_name))
                .collect();
            out += &format!(
                "; {} referents could not be read (held by: {})",
                u.unreadable,
                by.join(", ")
            );
        }
        out += "\n";
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_says_a_lower_bound() {
        let h = HeapReport {
            types: vec![HeapType {
                type_name: "bytes".into(),
                count: 2,
                bytes: 100,
                data_bytes: Some(Some(3 << 20)),
                device_bytes: Some(None),
            }],
            largest: vec![HeapObject {
                address: 0x1000,
                type_name: "bytes".into(),
                bytes: 60,
                len: Some(27),
            }],
            retainers: Vec::new(),
            objects: 2,
            bytes: 100,
            unreached: HeapUnreached {
                unwalked: vec![HeapCount {
                    type_name: "function".into(),
                    count: 3,
                }],
                unreadable: 0,
                unreadable_by: Vec::new(),
            },
            complete: false,
            process: Some(HeapProcess {
                rss: Some(3 << 20),
                pss: Some(2 << 20),
                source: "smaps_rollup".into(),
            }),
        };
        // Every line whole: the headline with the process and the lower bound, the type row
        // with its share and data, the largest object, what was not counted.
        let want = [
            "Heap: 2 objects, 100 B of 3.0 MiB RSS — the walk stopped early: a lower bound",
            "",
            "type        count         bytes   share",
            "bytes           2         100 B  100.0%  + 3.0 MiB data, ? on CUDA",
            "",
            "Largest objects:",
            "  0x1000  bytes          60 B  len 27",
            "",
            "Not counted: objects referred to only by function (3), or by C memory",
        ];
        assert_eq!(render(&h, 20).lines().collect::<Vec<_>>(), want);
    }

    #[test]
    fn smaps_rollup_fields_in_bytes() {
        let t = "55a0-7ffd ---p 00000000 00:00 0  [rollup]\nRss:              416 kB\nPss:               400 kB\nPss_Anon:          300 kB\n";
        assert_eq!(smaps_field(t, "Rss:"), Some(416 * 1024));
        assert_eq!(smaps_field(t, "Pss:"), Some(400 * 1024));
        assert_eq!(smaps_field(t, "Swap:"), None);
    }
}

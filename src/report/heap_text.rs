//! `--heap`'s text: the top types (count, bytes, share of the bytes), the largest objects,
//! what keeps the most alive and what was not counted.

use super::bytes_text::{human, thousands};
use super::held_by;
use crate::model::{HeapProcess, HeapReport, HeapType, SizeSource};

/// The heap's text: the top types (count, bytes, share of the bytes) and the largest objects,
/// `top` rows of each.
pub fn render(h: &HeapReport, top: usize) -> String {
    let of = match &h.process {
        Some(HeapProcess {
            rss: Some(rss),
            source: SizeSource::Core,
            ..
        }) => format!(" of {} written anonymous memory", human(*rss)),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{HeapCount, HeapObject, HeapUnreached};

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
                source: SizeSource::SmapsRollup,
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
}

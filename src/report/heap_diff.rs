//! The text of `pyunwind diff` ([`crate::heap::diff`]): the top growth first, then the types
//! that changed and the containers that grew.

use serde_json::Value;

use super::bytes_text::{human, thousands};
use super::held_by::{expression, steps_of};
use crate::heap::diff::{delta, Grown, HeapDiff, TypeDelta};

/// The change of what a type's objects keep beside them: `+38.1 MiB data`, `? on CUDA`; empty
/// when it did not change or the type keeps nothing.
fn kept_text(t: &TypeDelta) -> String {
    let part = |d: Option<Option<i64>>, what: &str| match d {
        None | Some(Some(0)) => None,
        Some(Some(n)) => Some(format!("{} {what}", signed(n, human))),
        Some(None) => Some(format!("? {what}")),
    };
    [
        part(t.data_bytes_delta, "data"),
        part(t.device_bytes_delta, "on CUDA"),
    ]
    .into_iter()
    .flatten()
    .collect::<Vec<_>>()
    .join(", ")
}

fn signed(n: i64, f: impl Fn(u64) -> String) -> String {
    if n < 0 {
        format!("-{}", f(n.unsigned_abs()))
    } else {
        format!("+{}", f(n as u64))
    }
}

fn path_text(held_by: &Option<Value>, address: u64) -> String {
    held_by
        .as_ref()
        .and_then(steps_of)
        .map_or_else(|| format!("{address:#x}"), |s| expression(&s))
}

fn grown_text(g: &Grown) -> String {
    let len = match (g.len_before, g.len) {
        (Some(b), Some(n)) if n != b => format!(" {} → {}", thousands(b), thousands(n)),
        _ => String::new(),
    };
    format!(
        "{} grew{len} ({} retained)",
        path_text(&g.held_by, g.address),
        signed(delta(g.retained, g.retained_before), human)
    )
}

/// The text: the top growth first, then the types that changed and the containers that grew,
/// `top` rows of each.
pub fn render(d: &HeapDiff, top: usize) -> String {
    let mut lead = Vec::new();
    if let Some(t) = d.types.first().filter(|t| t.grew_by() > 0) {
        let kept = kept_text(t);
        lead.push(format!(
            "{} {} objects ({}{})",
            signed(t.count_delta, thousands),
            t.type_name,
            signed(t.bytes_delta, human),
            if kept.is_empty() {
                kept
            } else {
                format!(", {kept}")
            }
        ));
    }
    if let Some(g) = d.grown.first() {
        lead.push(grown_text(g));
    }
    let mut out = if lead.is_empty() {
        "Nothing grew.\n".to_string()
    } else {
        lead.join("; ") + "\n"
    };
    let changed: Vec<&TypeDelta> = d
        .types
        .iter()
        .filter(|t| t.count_delta != 0 || t.bytes_delta != 0 || !kept_text(t).is_empty())
        .take(top)
        .collect();
    if !changed.is_empty() {
        let w = changed.iter().map(|t| t.type_name.len()).max().unwrap_or(4);
        out += &format!(
            "\n{:<w$}  {:>10}  {:>12}  {:>10}  {:>12}\n",
            "type", "count", "bytes", "+count", "+bytes"
        );
        for t in changed {
            let kept = kept_text(t);
            out += &format!(
                "{:<w$}  {:>10}  {:>12}  {:>10}  {:>12}{}\n",
                t.type_name,
                thousands(t.count),
                human(t.bytes),
                signed(t.count_delta, thousands),
                signed(t.bytes_delta, human),
                if kept.is_empty() {
                    kept
                } else {
                    format!("  {kept}")
                }
            );
        }
    }
    if !d.grown.is_empty() {
        out += "\nGrown:\n";
        for g in d.grown.iter().take(top) {
            out += &format!("  {}  {}\n", grown_text(g), g.type_name);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::heap::diff::{diff, Saved, SavedHeap};

    fn heap(json: &str) -> SavedHeap {
        serde_json::from_str::<Saved>(json).unwrap().heap.unwrap()
    }

    #[test]
    fn growth_is_matched_by_address_then_by_path() {
        let old = heap(
            r#"{"heap": {"types": [{"type": "bytes", "count": 10, "bytes": 1000},
                {"type": "gone", "count": 1, "bytes": 5}],
              "retainers": [{"address": 16, "type": "dict", "len": 2, "bytes": 100,
                "retained": 300, "held_by": [{"module": "__main__"}, {"attr": "_cache"}]},
                {"address": 32, "type": "list", "len": 5, "bytes": 90, "retained": 90,
                "held_by": [{"module": "m"}, {"attr": "q"}]}]}}"#,
        );
        let new = heap(
            r#"{"heap": {"types": [{"type": "bytes", "count": 10010, "bytes": 1001000}],
              "retainers": [{"address": 48, "type": "dict", "len": 4, "bytes": 200,
                "retained": 2_000_300, "held_by": [{"module": "__main__"}, {"attr": "_cache"}]},
                {"address": 32, "type": "list", "len": 5, "bytes": 90, "retained": 90,
                "held_by": [{"module": "m"}, {"attr": "q"}]}]}}"#
                .replace("2_000_300", "2000300")
                .as_str(),
        );
        let d = diff(&old, &new);
        assert_eq!(
            d.types
                .iter()
                .map(|t| (t.type_name.as_str(), t.count_delta, t.bytes_delta))
                .collect::<Vec<_>>(),
            vec![("bytes", 10000, 1_000_000), ("gone", -1, -5)]
        );
        assert_eq!(d.grown.len(), 1);
        assert_eq!(
            (d.grown[0].address, d.grown[0].len_before, d.grown[0].len),
            (48, Some(2), Some(4))
        );
        let text = render(&d, 20);
        assert_eq!(
            text.lines().next().unwrap(),
            "+10,000 bytes objects (+976.6 KiB); __main__._cache grew 2 → 4 (+1.9 MiB retained)"
        );
    }

    #[test]
    fn tensor_storages_count_in_the_growth() {
        // Ten more tensors: their objects are small, their storages are not; a type that
        // could not be read on one side has no delta; one that never kept memory has none.
        let old = heap(
            r#"{"heap": {"types": [{"type": "list", "count": 5, "bytes": 5000},
                {"type": "torch.Tensor", "count": 2, "bytes": 144, "data_bytes": 8000,
                 "device_bytes": null}]}}"#,
        );
        let new = heap(
            r#"{"heap": {"types": [{"type": "list", "count": 6, "bytes": 6000},
                {"type": "torch.Tensor", "count": 12, "bytes": 864, "data_bytes": 4008000,
                 "device_bytes": null}]}}"#,
        );
        let d = diff(&old, &new);
        let t = &d.types[0];
        assert_eq!(
            (
                t.type_name.as_str(),
                t.bytes_delta,
                t.data_bytes,
                t.data_bytes_delta,
                t.device_bytes,
                t.device_bytes_delta
            ),
            (
                "torch.Tensor",
                720,
                Some(Some(4_008_000)),
                Some(Some(4_000_000)),
                Some(None),
                Some(None)
            )
        );
        assert_eq!(
            (d.types[1].data_bytes, d.types[1].data_bytes_delta),
            (None, None)
        );
        let json = serde_json::to_value(&d.types[1]).unwrap();
        assert!(json.get("data_bytes").is_none(), "{json}");
        let text = render(&d, 20);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "+10 torch.Tensor objects (+720 B, +3.8 MiB data, ? on CUDA)"
        );
        assert!(
            lines[3].ends_with("+720 B  +3.8 MiB data, ? on CUDA"),
            "{text}"
        );
    }
}

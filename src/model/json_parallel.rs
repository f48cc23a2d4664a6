//! A long list written as JSON on every core: 100,000 tasks are about 50 MB of JSON, which
//! serde_json wrote on one thread in a third of `--tasks --json`'s time (a key's escaping,
//! a buffered write per key and value). The items are written in parts, each part on a
//! thread into its own buffer, and the buffers then go out in order, item by item, as they
//! are: the same bytes as the list written on one thread.

use serde::ser::{Error, Serialize, SerializeSeq, SerializeStruct, Serializer};

/// Shorter lists are written on the calling thread.
const PARALLEL_MIN: usize = 8192;
/// Items a thread writes at a time.
const PART: usize = 4096;

/// serde_json writes a struct of this name, with a field of this name, as the field's text
/// itself: that is how its `RawValue` serializes (serde_json 1.0 `raw::TOKEN`, ser.rs
/// `serialize_struct`). A `&RawValue` would parse each item's text again to check it; this
/// text is serde_json's own. `raw_json_is_written_as_it_is` fails if serde_json changes it.
const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

/// One item's JSON text, written as it is.
struct RawJson<'a>(&'a str);

impl Serialize for RawJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut raw = s.serialize_struct(RAW_VALUE_TOKEN, 1)?;
        raw.serialize_field(RAW_VALUE_TOKEN, self.0)?;
        raw.end()
    }
}

/// `serialize_with` for a list that may be long (with `skip_serializing_if` for None). Only
/// for serde_json's serializer, the one this crate writes reports with.
pub fn long_list<T: Serialize + Sync, S: Serializer>(
    v: &Option<Vec<T>>,
    s: S,
) -> Result<S::Ok, S::Error> {
    let Some(items) = v else {
        return s.serialize_none();
    };
    if items.len() < PARALLEL_MIN {
        return items.serialize(s);
    }
    let parts: Vec<&[T]> = items.chunks(PART).collect();
    // Each part's text, and where each of its items ends in it.
    let written = crate::parallel::map(&parts, 1, true, |part| {
        let mut text = Vec::new();
        let mut ends = Vec::with_capacity(part.len());
        for item in *part {
            serde_json::to_writer(&mut text, item)?;
            ends.push(text.len());
        }
        Ok::<_, serde_json::Error>((text, ends))
    });
    let mut seq = s.serialize_seq(Some(items.len()))?;
    for part in written {
        let (text, ends) = part.map_err(S::Error::custom)?;
        let text = std::str::from_utf8(&text).map_err(S::Error::custom)?;
        let mut start = 0;
        for end in ends {
            seq.serialize_element(&RawJson(&text[start..end]))?;
            start = end;
        }
    }
    seq.end()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Serialize)]
    struct Item {
        id: u64,
        name: String,
        frames: Vec<(&'static str, u32)>,
    }

    #[derive(serde::Serialize)]
    struct Listed {
        #[serde(serialize_with = "long_list")]
        items: Option<Vec<Item>>,
        after: u32,
    }

    fn items(n: u64) -> Vec<Item> {
        (0..n)
            .map(|id| Item {
                id,
                name: format!("Task-{id} \"quoted\" \\ é \u{1}"),
                frames: vec![("sleep", 7), ("main", id as u32)],
            })
            .collect()
    }

    #[test]
    fn raw_json_is_written_as_it_is() {
        let text = r#"{"a":[1,2],"b":"c"}"#;
        assert_eq!(serde_json::to_string(&RawJson(text)).unwrap(), text);
    }

    #[test]
    fn a_long_list_is_written_as_on_one_thread() {
        for n in [
            0,
            1,
            PARALLEL_MIN as u64 - 1,
            PARALLEL_MIN as u64,
            3 * PART as u64 + 17,
        ] {
            let v = items(n);
            let want = format!(
                "{{\"items\":{},\"after\":3}}",
                serde_json::to_string(&v).unwrap()
            );
            let got = serde_json::to_string(&Listed {
                items: Some(v),
                after: 3,
            })
            .unwrap();
            assert_eq!(got, want, "{n} items");
        }
    }
}

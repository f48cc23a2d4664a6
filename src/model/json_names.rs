//! Frames' function and file names as JSON, escaped once per name instead of once per frame:
//! the names of a 100,000-frame stack are the same few strings, and escaping them byte by byte
//! was the largest part of writing its report (13% of `pid --json`).

use std::cell::RefCell;
use std::sync::Arc;

use serde::ser::{Error, Serialize, Serializer};
use serde_json::value::RawValue;

/// Names remembered per thread: the last few, looked through in order (a hash of each name's
/// key cost as much as the escaping it saved). A stack's frames repeat a few names in turn.
const SLOTS: usize = 8;

/// (address, length, the name, its JSON): a frame's names are the `Arc`s of its code object,
/// and the memo holds a clone of each, so an address cannot be reused for another name while
/// it is here.
#[derive(Default)]
struct Memo {
    slots: Vec<(usize, usize, Arc<str>, Box<RawValue>)>,
    next: usize,
}

thread_local! {
    static ESCAPED: RefCell<Memo> = RefCell::default();
}

/// `serialize_with` for `Option<Arc<str>>` fields (with `skip_serializing_if` for None).
pub fn name<S: Serializer>(v: &Option<Arc<str>>, s: S) -> Result<S::Ok, S::Error> {
    let Some(name) = v else {
        return s.serialize_none();
    };
    let (ptr, len) = (name.as_ptr() as usize, name.len());
    ESCAPED.with(|memo| {
        let mut memo = memo.borrow_mut();
        let i = match memo.slots.iter().position(|e| e.0 == ptr && e.1 == len) {
            Some(i) => i,
            None => {
                let text = serde_json::to_string(&**name).map_err(S::Error::custom)?;
                let raw = RawValue::from_string(text).map_err(S::Error::custom)?;
                let entry = (ptr, len, name.clone(), raw);
                if memo.slots.len() < SLOTS {
                    memo.slots.push(entry);
                    memo.slots.len() - 1
                } else {
                    let i = memo.next;
                    memo.next = (i + 1) % SLOTS;
                    memo.slots[i] = entry;
                    i
                }
            }
        };
        memo.slots[i].3.serialize(s)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Serialize)]
    struct F {
        #[serde(serialize_with = "name")]
        n: Option<Arc<str>>,
    }

    #[test]
    fn names_are_escaped_as_serde_json_escapes_them() {
        for text in ["recurse", "a\"b\\c\n\u{1}é", ""] {
            let f = F {
                n: Some(text.into()),
            };
            let want = format!("{{\"n\":{}}}", serde_json::to_string(text).unwrap());
            // Twice: the second comes from the memo.
            assert_eq!(serde_json::to_string(&f).unwrap(), want);
            assert_eq!(serde_json::to_string(&f).unwrap(), want);
        }
    }
}

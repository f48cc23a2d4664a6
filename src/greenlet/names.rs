//! gevent's names for its greenlets: `Greenlet.name`, the function it runs, and the
//! `Greenlet-N` gevent generates when no name was given.

use std::collections::{HashMap, HashSet};

use super::Raw;
use crate::cpython::values::field;
use crate::cpython::Snapshot;

/// Most entries read from one gevent ident registry.
const MAX_IDENTS: u64 = 1 << 20;
/// Words of a gevent `IdentRegistry` searched for its `_registry` (a Cython object: the
/// header, maybe a vtable pointer, then its fields).
const IDENT_REGISTRY_WORDS: u64 = 6;

/// The names gevent generated (`Greenlet-N`, `N` being `minimal_ident`): `N` lives in the
/// compiled `Greenlet`, whose layout no table says, but also in the hub's `ident_registry`,
/// a `WeakKeyDictionary` from each greenlet to `(N, weakref)` (gevent/_ident.py).
pub(super) fn gevent_idents(
    snap: &Snapshot,
    raws: &[Raw],
    root: u64,
    parents: &HashSet<u64>,
) -> HashMap<u64, u64> {
    let mut out = HashMap::new();
    let header = snap.layout.pyobject.header_size();
    // A hub is a greenlet subclass, and the parent of the greenlets it runs.
    for r in raws
        .iter()
        .filter(|r| r.tp != root && parents.contains(&r.obj))
    {
        let Ok(Some(reg)) = snap.instance_attr(r.obj, "ident_registry") else {
            continue;
        };
        let weak_dict = (0..IDENT_REGISTRY_WORDS).find_map(|i| {
            let p = snap.mem.read_ptr(reg.checked_add(header + 8 * i)?).ok()?;
            (p != 0 && snap.type_of(p).ok()?.name == "WeakKeyDictionary").then_some(p)
        });
        let Some(data) = weak_dict.and_then(|w| snap.instance_attr(w, "data").ok().flatten())
        else {
            continue;
        };
        let Ok(items) = snap.dict_items(data, MAX_IDENTS) else {
            continue;
        };
        for (key, value) in items {
            let ident = (|| {
                // `PyWeakReference.wr_object`, right after the header (Include/cpython/weakrefobject.h).
                let obj = snap.mem.read_ptr(key.checked_add(header)?).ok()?;
                let t = &snap.layout.tuple_object;
                let first = snap.mem.read_ptr(value.checked_add(t.ob_item)?).ok()?;
                Some((obj, snap.read_int(first).ok()?.parse::<u64>().ok()?))
            })();
            if let Some((obj, n)) = ident {
                out.insert(obj, n);
            }
        }
    }
    out
}

/// gevent's `Greenlet.name` and the function it runs (`_run`), from its instance dict.
pub(super) fn gevent_names(snap: &Snapshot, obj: u64) -> (Option<String>, Option<String>) {
    let Ok(attrs) = snap.instance_attrs(obj, &["name", "_run"]) else {
        return (None, None);
    };
    let name = attrs[0].and_then(|n| snap.read_str(n).ok());
    let function = attrs[1].and_then(|f| {
        let t = snap.type_of(f).ok()?;
        if t.name != "function" {
            return None;
        }
        let code = snap
            .mem
            .read_ptr(field(f, snap.layout.function_code).ok()?)
            .ok()?;
        Some(snap.code(code).ok()?.qualname.to_string())
    });
    (name, function)
}

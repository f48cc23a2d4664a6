//! The walk on small fake targets.

use super::{LocalRoot, Roots, ROOTS};
use crate::cpython::gc::GC_HEAD_SIZE;
use crate::cpython::layout::tpflags;
use crate::cpython::layout::Layout;
use crate::cpython::snapshot::Snapshot;
use crate::cpython::version::Version;
use crate::memory::FakeMemory;

const LIST_TYPE: u64 = 0x1000;
const BYTES_TYPE: u64 = 0x2000;
const INTERP: u64 = 0x10_0000;

/// A 3.12 target with `list` and `bytes` and an interpreter whose GC lists are empty.
fn target() -> (FakeMemory, Layout) {
    let l = Layout::builtin(Version::new(3, 12, 1)).unwrap();
    let mut m = FakeMemory::new();
    for (tp, name, text, flags, size, item) in [
        (
            LIST_TYPE,
            0x1800u64,
            &b"list"[..],
            tpflags::LIST_SUBCLASS | tpflags::HAVE_GC,
            40u64,
            0u64,
        ),
        (
            BYTES_TYPE,
            0x2800,
            &b"bytes"[..],
            tpflags::BYTES_SUBCLASS,
            33,
            1,
        ),
    ] {
        m.put(tp, &[0u8; 0x400]);
        m.put_u64(tp + l.type_object.tp_name, name);
        m.put_u64(tp + l.type_object.tp_flags, flags);
        m.put_u64(tp + l.type_object.tp_basicsize, size);
        m.put_u64(tp + l.type_object.tp_basicsize + 8, item);
        m.put(name, &[0u8; 64]).put(name, text);
    }
    let lists = l.interpreter_state.gc.unwrap();
    m.put(INTERP, &[0u8; 0x1000]);
    for h in lists.heads {
        let head = INTERP + lists.gc + h;
        m.put_u64(head, head).put_u64(head + 8, head);
    }
    (m, l)
}

/// Links the objects (addresses after their GC headers) on the first GC list.
fn gc_list(m: &mut FakeMemory, l: &Layout, objs: &[u64]) {
    let lists = l.interpreter_state.gc.unwrap();
    let head = INTERP + lists.gc + lists.heads[0];
    let nodes: Vec<u64> = objs.iter().map(|o| o - GC_HEAD_SIZE).collect();
    let mut prev = head;
    for &n in &nodes {
        m.put_u64(prev, n).put_u64(n + 8, prev);
        prev = n;
    }
    m.put_u64(prev, head).put_u64(head + 8, prev);
}

/// A list at `at` (items at `at + 0x100`), allocated as long as it is.
fn list(m: &mut FakeMemory, l: &Layout, at: u64, items: &[u64]) {
    m.put(at - GC_HEAD_SIZE, &[0u8; 0x100]);
    m.put_u64(at + l.pyobject.ob_type, LIST_TYPE);
    m.put_u64(at + l.list_object.ob_size, items.len() as u64);
    m.put_u64(at + l.list_object.ob_item, at + 0x100);
    m.put_u64(at + l.list_object.ob_item + 8, items.len() as u64);
    for (i, item) in items.iter().enumerate() {
        m.put_u64(at + 0x100 + 8 * i as u64, *item);
    }
}

fn bytes(m: &mut FakeMemory, l: &Layout, at: u64, len: u64) {
    m.put(at, &[0u8; 0x100]);
    m.put_u64(at + l.pyobject.ob_type, BYTES_TYPE);
    m.put_u64(at + l.bytes_object.ob_size, len);
}

#[test]
fn counts_gc_objects_and_what_they_hold_once() {
    let (mut m, l) = target();
    // Two lists holding each other (a cycle) and the same bytes object twice; one that
    // only a list holds (not GC-tracked) is found through it.
    list(&mut m, &l, 0x20_0000, &[0x30_0000, 0x40_0000, 0x40_0000]);
    list(&mut m, &l, 0x30_0000, &[0x20_0000, 0x50_0000]);
    bytes(&mut m, &l, 0x40_0000, 100);
    bytes(&mut m, &l, 0x50_0000, 7);
    gc_list(&mut m, &l, &[0x20_0000, 0x30_0000]);
    let c = Snapshot::for_test(m, l).heap_census(&[INTERP], &Roots::default(), 2);
    assert!(c.complete && c.errors.is_empty(), "{:?}", c.errors);
    assert_eq!(c.objects, 4);
    // list: 40 + 8 × allocated + the GC header; bytes: 33 + len.
    let want = [
        ("bytes".to_string(), 2, 133 + 40),
        ("list".to_string(), 2, 40 + 24 + 16 + 40 + 16 + 16),
    ];
    let got: Vec<_> = c
        .types
        .iter()
        .map(|t| (t.name.clone(), t.count, t.bytes))
        .collect();
    assert_eq!(got, want);
    assert_eq!(c.bytes, 173 + 152);
    assert_eq!(c.largest.len(), 2);
    assert_eq!(
        (c.largest[0].address, c.largest[0].bytes, c.largest[0].len),
        (0x40_0000, 133, Some(100))
    );
    assert_eq!(c.largest[1].address, 0x20_0000);
}

#[test]
fn wild_pointers_and_lying_sizes_are_errors_not_hangs() {
    let (mut m, l) = target();
    // An item that points nowhere, a list that claims 2^40 items.
    list(&mut m, &l, 0x20_0000, &[0x7777_0000, 0x30_0000]);
    list(&mut m, &l, 0x30_0000, &[]);
    m.put_u64(0x30_0000 + l.list_object.ob_size, 1 << 40);
    gc_list(&mut m, &l, &[0x20_0000]);
    let c = Snapshot::for_test(m, l).heap_census(&[INTERP], &Roots::default(), 20);
    assert_eq!(c.unreadable, 1, "{:?}", c.errors);
    // The list held the item that points nowhere.
    assert_eq!(c.unreadable_by, vec![("list".to_string(), 1)]);
    assert_eq!(c.errors.len(), 2);
    assert_eq!(c.objects, 2);
    // A root that is no object is the roots'.
    let (m, l) = target();
    let c = Snapshot::for_test(m, l).heap_census(
        &[INTERP],
        &Roots {
            modules: Vec::new(),
            locals: vec![LocalRoot {
                obj: 0x7777_0000,
                name: "x".into(),
                function: "f".into(),
                thread: None,
                thread_name: None,
            }],
        },
        20,
    );
    assert_eq!(c.unreadable_by, vec![(ROOTS.to_string(), 1)]);
}

#[test]
fn a_cut_gc_list_is_a_lower_bound() {
    let (mut m, l) = target();
    list(&mut m, &l, 0x20_0000, &[]);
    gc_list(&mut m, &l, &[0x20_0000]);
    // Its back link disagrees.
    m.put_u64(0x20_0000 - GC_HEAD_SIZE + 8, 0x1234_5670);
    let c = Snapshot::for_test(m, l).heap_census(&[INTERP], &Roots::default(), 20);
    assert!(!c.complete);
    assert_eq!(c.errors.len(), 2, "{:?}", c.errors);
    // What a partial graph's objects keep alive cannot be told.
    assert!(c.graph.is_none());
    assert!(
        c.errors[1].to_string().contains("retainers"),
        "{}",
        c.errors[1]
    );
}

const TENSOR_TYPE: u64 = 0x3000;

/// A tensor at `at` (type `torch._C.TensorBase`, 56 bytes) whose `TensorImpl` at `imp` has
/// the storage at `st` (torch 2.15.0's layout: crate::cpython::torch).
fn tensor(m: &mut FakeMemory, l: &Layout, at: u64, imp: u64, st: u64) {
    m.put(at, &[0u8; 0x40]);
    m.put_u64(at + l.pyobject.ob_type, TENSOR_TYPE);
    m.put_u64(at + 16, imp);
    m.put(imp, &[0u8; 0x40]).put_u64(imp + 16, st);
}

fn with_tensor_type(m: &mut FakeMemory, l: &Layout) {
    m.put(TENSOR_TYPE, &[0u8; 0x400]);
    m.put_u64(TENSOR_TYPE + l.type_object.tp_name, 0x3800);
    m.put_u64(TENSOR_TYPE + l.type_object.tp_basicsize, 56);
    m.put(0x3800, &[0u8; 64])
        .put(0x3800, b"torch._C.TensorBase");
}

#[test]
fn a_storage_views_share_counts_once_and_is_retained_by_its_dominator() {
    let (mut m, l) = target();
    with_tensor_type(&mut m, &l);
    // Two views of storage S (4,000,000 bytes), one tensor of its own storage R (800 bytes),
    // all in one list: the list retains them and both storages.
    let (s, r) = (0x60_0000, 0x61_0000);
    tensor(&mut m, &l, 0x40_0000, 0x50_0000, s);
    tensor(&mut m, &l, 0x40_1000, 0x50_1000, s);
    tensor(&mut m, &l, 0x40_2000, 0x50_2000, r);
    for (st, n) in [(s, 4_000_000u64), (r, 800)] {
        m.put(st, &[0u8; 0x40]).put_u64(st + 48, n);
    }
    list(&mut m, &l, 0x20_0000, &[0x40_0000, 0x40_1000, 0x40_2000]);
    gc_list(&mut m, &l, &[0x20_0000]);
    let snap = Snapshot::for_test(m, l);
    let _ = snap
        .torch
        .set(Ok(Some(crate::cpython::torch::CHECKED_VERSION.into())));
    let roots = Roots {
        modules: Vec::new(),
        locals: vec![LocalRoot {
            obj: 0x20_0000,
            name: "batch".into(),
            function: "f".into(),
            thread: None,
            thread_name: None,
        }],
    };
    let mut c = snap.heap_census(&[INTERP], &roots, 4);
    assert!(c.complete && c.errors.is_empty(), "{:?}", c.errors);
    let graph = c.graph.take().expect("a whole graph");
    let retainers = crate::heap::retainers::top(&snap, graph, &roots, 4).unwrap();
    let t = c
        .types
        .iter()
        .find(|t| t.name == "torch._C.TensorBase")
        .unwrap();
    assert_eq!((t.count, t.bytes), (3, 3 * 56));
    assert_eq!(t.data, Some((Some(4_000_800), Some(0))));
    // Storages are no objects of the census.
    assert_eq!(c.objects, 4);
    let list_bytes = 40 + 24 + 16;
    assert_eq!(retainers[0].address, 0x20_0000);
    assert_eq!(retainers[0].retained, list_bytes + 3 * 56 + 4_000_800);
    // The tensor alone with R retains it; the views of S retain only themselves.
    let of = |a: u64| {
        retainers
            .iter()
            .find(|r| r.address == a)
            .map(|r| r.retained)
    };
    assert_eq!(of(0x40_2000), Some(56 + 800));
    assert_eq!(of(0x40_0000), Some(56));
}

#[test]
fn storages_that_point_back_at_objects_or_nowhere_are_errors_not_hangs() {
    let (mut m, l) = target();
    with_tensor_type(&mut m, &l);
    // One tensor's storage is the list itself (an object's address), one's impl is its own
    // storage (a cycle), one's impl points nowhere; a fourth has another version's torch.
    tensor(&mut m, &l, 0x40_0000, 0x50_0000, 0x20_0000);
    tensor(&mut m, &l, 0x40_1000, 0x50_1000, 0x50_1000);
    tensor(&mut m, &l, 0x40_2000, 0x50_2000, 0);
    m.put_u64(0x40_2000 + 16, 0x7777_0000);
    list(&mut m, &l, 0x20_0000, &[0x40_0000, 0x40_1000, 0x40_2000]);
    gc_list(&mut m, &l, &[0x20_0000]);
    let snap = Snapshot::for_test(m.clone(), l.clone());
    let _ = snap
        .torch
        .set(Ok(Some(crate::cpython::torch::CHECKED_VERSION.into())));
    let c = snap.heap_census(&[INTERP], &Roots::default(), 4);
    assert_eq!(c.objects, 4, "{:?}", c.errors);
    assert_eq!(c.errors.len(), 1, "{:?}", c.errors);
    let snap = Snapshot::for_test(m, l);
    let _ = snap.torch.set(Ok(Some("2.1.0".into())));
    let c = snap.heap_census(&[INTERP], &Roots::default(), 4);
    let t = c
        .types
        .iter()
        .find(|t| t.name == "torch._C.TensorBase")
        .unwrap();
    assert_eq!(t.data, Some((None, None)));
    assert_eq!(c.errors.len(), 1, "{:?}", c.errors);
    assert!(
        c.errors[0].to_string().contains("2.15.0"),
        "{}",
        c.errors[0]
    );
}

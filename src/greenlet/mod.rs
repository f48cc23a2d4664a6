//! greenlet: every greenlet of a stopped process, its state, the thread it belongs to and the
//! Python stack a suspended one resumes in.
//!
//! - Nothing lists greenlets: blocked gevent greenlets are held only by libev/libuv watchers
//!   in C. So they are found as gevent itself finds them (`gc.get_objects()`): among the
//!   interpreter's GC objects (its GC lists; a free-threaded build's mimalloc GC heaps,
//!   [`crate::cpython::mimalloc`]), by type (`greenlet.greenlet` from `sys.modules`, and its
//!   subclasses).
//! - Each is validated by a round trip (`pimpl->_self`, greenlet 3.1.1+), and the part of the
//!   C++ layout that varies is calibrated from a main greenlet ([`layout`]).
//! - A suspended greenlet's stack is its saved `_top_frame`: since greenlet 3.0.3 its chain is
//!   on the heap and ends at the greenlet's `run` frame (TPythonState.cpp `expose_frames`).
//!   The running greenlet's stack is its thread's.
//! - A greenlet's thread: all greenlets of a thread live on that thread's C stack, so the
//!   stack addresses a greenlet records (`stack_stop`, `_stack_start`) lie in the mapping that
//!   holds the thread's own stack (its `pthread_t` for a glibc thread, its stack pointer, or
//!   `[stack]` for the main thread).

mod find;
pub mod layout;
pub mod waits;

use std::collections::{HashMap, HashSet};

use find::{derives_from, scan_heap, subclasses};
use layout::{GreenletLayout, THREAD_STATE_CURRENT};

use crate::cpython::layout::FrameModel;
use crate::cpython::values::field;
use crate::cpython::{FrameItem, FrameWalk, Snapshot};
use crate::error::{ReadError, ReadErrorKind};
use crate::memory::addr_map::AddrMap;

/// Most greenlets we list.
pub const MAX_GREENLETS: usize = 1 << 20;
/// Deepest chain of not-started parents followed to find a greenlet's thread.
const MAX_PARENT_DEPTH: usize = 64;
/// Greenlets a thread takes at once when they are read in parallel.
const PARALLEL_BATCH: usize = 256;
/// Furthest a glibc thread's stack lies below its `pthread_t` (the thread descriptor sits at
/// the top of the stack's own mapping), or the main thread's below `__libc_stack_end`, when
/// the target's mappings are unknown.
const MAX_STACK_BELOW_TOP: u64 = 1 << 30;
/// `PyFrameObject.f_frame` (3.11+), from the end of `PyObject_HEAD`: after `f_back`
/// (Include/internal/pycore_frame.h, 3.11 to 3.15).
const FRAMEOBJECT_F_FRAME: u64 = 8;

/// A Python thread, as the greenlet reader needs it.
pub struct GThread<'a> {
    /// The interpreters it has a thread state in (the one it runs in, those it entered that
    /// one from or left).
    pub interps: Vec<u64>,
    pub native_id: Option<u64>,
    /// `PyThreadState.thread_id`: glibc's `pthread_t`, the thread's descriptor.
    pub pthread: u64,
    pub walk: &'a FrameWalk,
}

/// Where the target's threads keep their stacks, and its heap, as far as the source says.
#[derive(Default)]
pub struct Stacks<'a> {
    /// Every mapping, ascending (empty: unknown).
    pub regions: &'a [(u64, u64)],
    /// (LWP, address on its stack).
    pub anchors: &'a [(u64, u64)],
    /// Where no mappings are known: the main thread's LWP and the top of its stack (glibc's
    /// `__libc_stack_end`).
    pub main_stack: Option<(u64, u64)>,
    /// The file-backed mappings, which hold no heap objects.
    pub files: Vec<(u64, u64)>,
    /// The memory a heap scan reads (every mapping that is not a file's), not charged to the
    /// stop's budget (a heap scan has its own cap).
    pub raw: Option<std::sync::Arc<dyn crate::memory::Memory>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Running,
    Suspended,
    NotStarted,
    Dead,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Running => "running",
            State::Suspended => "suspended",
            State::NotStarted => "not_started",
            State::Dead => "dead",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Greenlet {
    pub addr: u64,
    pub state: State,
    pub main: bool,
    pub parent: Option<u64>,
    pub type_name: String,
    /// Index of the thread it belongs to; None once that thread has ended, or when it cannot
    /// be told (then `errors` says so).
    pub thread: Option<usize>,
    /// Innermost first: the saved stack of a suspended greenlet, its thread's of a running one.
    pub frames: Vec<FrameItem>,
    /// The interpreter whose greenlet module made it (whose GC lists hold it).
    pub interp: u64,
    pub truncated: bool,
    /// gevent's `Greenlet.name` and the spawned function's qualified name, where memory has
    /// them.
    pub name: Option<String>,
    pub function: Option<String>,
    /// What a suspended gevent greenlet waits on, where its frames show it.
    pub waiting: Option<crate::report::Waiting>,
}

#[derive(Clone, Debug, Default)]
pub struct GreenletView {
    pub greenlets: Vec<Greenlet>,
    /// greenlet's `__version__`, when greenlet is imported.
    pub version: Option<String>,
    pub errors: Vec<(u64, String)>,
}

/// The raw words of one greenlet.
struct Raw {
    obj: u64,
    tp: u64,
    imp: u64,
    stack_start: u64,
    stack_stop: u64,
    top_frame: u64,
}

impl Raw {
    fn is_main(&self) -> bool {
        self.stack_stop == u64::MAX
    }
}

/// Every greenlet of every interpreter.
pub fn analyze(snap: &Snapshot, threads: &[GThread], stacks: &Stacks) -> GreenletView {
    let mut view = GreenletView::default();
    let interps = match snap.interpreters() {
        Ok(i) => i,
        Err(e) => {
            view.errors.push((e.addr, format!("greenlets: {e}")));
            return view;
        }
    };
    for interp in interps {
        if let Err(e) = interpreter(snap, interp, threads, stacks, &mut view) {
            view.errors.push((e.addr, format!("greenlets: {e}")));
        }
    }
    view
}

/// (major, minor, patch) of a version string such as "3.5.6" or "3.1.0a1".
fn parse_version(v: &str) -> Option<(u32, u32, u32)> {
    let mut it = v.split('.').map(|p| {
        p.chars()
            .take_while(|c| c.is_ascii_digit())
            .collect::<String>()
            .parse::<u32>()
            .ok()
    });
    Some((it.next()??, it.next()??, it.next().flatten().unwrap_or(0)))
}

fn interpreter(
    snap: &Snapshot,
    interp: u64,
    threads: &[GThread],
    stacks: &Stacks,
    view: &mut GreenletView,
) -> Result<(), ReadError> {
    let Some(modules) = snap.sys_modules(interp)? else {
        return Ok(());
    };
    let Some(cmod) = snap.module_dict(modules, "greenlet._greenlet")? else {
        return Ok(());
    };
    let mut err = |addr: u64, what: String| view.errors.push((addr, format!("greenlets: {what}")));
    let version = match snap.module_dict(modules, "greenlet")? {
        Some(d) => match snap.dict_get(d, "__version__")? {
            Some(v) => Some(snap.read_str(v)?),
            None => None,
        },
        None => None,
    };
    let Some(v) = version.as_deref().and_then(parse_version) else {
        err(
            cmod,
            "greenlet is imported but its version is unknown".into(),
        );
        return Ok(());
    };
    view.version = version.clone();
    let version = version.unwrap_or_default();
    if v.0 != 3 || v.1 > 5 {
        err(
            cmod,
            format!("greenlet {version} is not supported (3.0 to 3.5 are)"),
        );
        return Ok(());
    }
    let Some(ty) = snap.dict_get(cmod, "greenlet")? else {
        err(cmod, "greenlet._greenlet has no `greenlet` type".into());
        return Ok(());
    };
    let t = snap.type_at(ty)?;
    // greenlet.h: `PyObject_HEAD; weakreflist; dict; pimpl` (PyGreenlet.cpp sets
    // `tp_dictoffset` to `dict`).
    let pimpl = (t.dictoffset as u64).wrapping_add(8);
    if t.name != "greenlet.greenlet" || t.dictoffset <= 0 || t.basicsize != pimpl + 8 {
        err(
            ty,
            format!(
                "greenlet {version}: its type is not the one greenlet 3 defines ({}, size {})",
                t.name, t.basicsize
            ),
        );
        return Ok(());
    }
    let py310 = matches!(snap.layout.frame, FrameModel::FrameObject { .. });
    let mut lay = GreenletLayout::prefix(pimpl, v >= (3, 1, 1), py310);

    // Every greenlet: an object whose type is `greenlet.greenlet` or derives from it, among
    // the GC's objects (its lists; a free-threaded build's mimalloc GC heaps); where a
    // collection has them on its own lists, anywhere in the heap.
    let mut objs: Vec<(u64, u64)> = Vec::new();
    let mut too_many = false;
    let mut kinds: AddrMap<bool> = AddrMap::default();
    // Objects of one type often come in runs: the last answer first.
    let mut last = (0u64, false);
    let mut keep = |obj: u64, tp: u64| {
        let is = if tp == last.0 {
            last.1
        } else {
            let is = *kinds
                .entry(tp)
                .or_insert_with(|| derives_from(snap, tp, ty));
            last = (tp, is);
            is
        };
        if is {
            if objs.len() < MAX_GREENLETS {
                objs.push((obj, tp));
            } else {
                too_many = true;
            }
        }
        !too_many
    };
    let scanned = match snap.layout.interpreter_state.gc {
        Some(lists) if snap.gc_collecting(interp) != Some(true) => {
            let gc_errors = snap.gc_objects(interp, &lists, |obj, tp| {
                keep(obj, tp);
            });
            for e in gc_errors {
                err(
                    e.addr,
                    format!("GC list: {e} (greenlets after it are not listed)"),
                );
            }
            false
        }
        None => {
            let ob_type = snap.layout.pyobject.ob_type;
            let mut cut = None;
            let mut heap_errors = snap.mimalloc_gc_objects(interp, |obj| {
                match snap.mem.read_ptr(obj.wrapping_add(ob_type)) {
                    Ok(tp) => keep(obj, tp),
                    Err(e) => {
                        cut = Some(e);
                        false
                    }
                }
            });
            heap_errors.extend(cut);
            // Once the stop's budget is spent every read fails alike: said once.
            let mut limit = false;
            for e in heap_errors {
                if matches!(e.kind, ReadErrorKind::Limit { .. })
                    && std::mem::replace(&mut limit, true)
                {
                    continue;
                }
                err(
                    e.addr,
                    format!("GC heaps: {e} (greenlets past it are not listed)"),
                );
            }
            false
        }
        Some(_) => {
            if !lay.has_self {
                err(
                    ty,
                    format!(
                        "greenlet {version}: a heap scan needs greenlet 3.1.1+ (its `_self` check)"
                    ),
                );
                return Ok(());
            }
            if stacks.regions.is_empty() {
                err(
                    interp,
                    "stopped inside a collection: greenlets are found by a heap scan then, which needs the target's memory map (not known when memory is read through the debugger)".into(),
                );
                return Ok(());
            }
            let types = subclasses(snap, ty, &mut err);
            for e in scan_heap(snap, stacks, &types, &mut objs) {
                err(
                    e.addr,
                    format!("heap scan: {e} (greenlets past it are not listed)"),
                );
            }
            if objs.len() > MAX_GREENLETS {
                objs.truncate(MAX_GREENLETS);
                too_many = true;
            }
            true
        }
    };
    if too_many {
        err(interp, format!("cut at {MAX_GREENLETS} greenlets"));
    }

    // Their `Greenlet`s: the fixed prefix, checked by the round trip.
    let mut raws = Vec::with_capacity(objs.len());
    let mut bad = 0usize;
    let read = crate::parallel::map(&objs, PARALLEL_BATCH, snap.mem.any_thread(), |(obj, tp)| {
        read_raw(snap, &lay, *obj, *tp)
    });
    for ((obj, _), r) in objs.into_iter().zip(read) {
        match r {
            Ok(Some(r)) => raws.push(r),
            // Being freed (`~Greenlet` clears `pimpl`).
            Ok(None) => {}
            // A word that only looks like a greenlet's type pointer (a `tp_base`, a tuple
            // item, freed memory): the round trip is what tells.
            Err(_) if scanned => {}
            Err(e) => {
                bad += 1;
                err(obj, format!("greenlet {obj:#x}: {e}"));
            }
        }
    }
    if bad > 0 && raws.is_empty() {
        err(
            ty,
            format!("greenlet {version}: no greenlet matches its layout (not listed)"),
        );
        return Ok(());
    }
    // The rest of the layout, from the main greenlets.
    let mut size = None;
    for r in raws.iter().filter(|r| r.is_main()) {
        if let Some(s) = lay.calibrate(snap, r.obj, r.imp)? {
            size = Some(s);
            break;
        }
    }
    let Some(size) = size else {
        if !raws.is_empty() {
            err(
                ty,
                format!("greenlet {version}: no main greenlet to calibrate its layout with (not listed)"),
            );
        }
        return Ok(());
    };
    lay.size = size;

    // Main greenlets: their thread state and the greenlet it runs.
    let mut mains: AddrMap<(u64, u64)> = AddrMap::default();
    for r in raws.iter().filter(|r| r.is_main()) {
        let ts = snap.mem.read_ptr(field(r.imp, lay.thread_state())?)?;
        let current = if ts == 0 {
            0
        } else {
            match snap.mem.read_ptr(field(ts, THREAD_STATE_CURRENT)?) {
                Ok(c) => c,
                Err(e) => {
                    err(ts, format!("greenlet thread state: {e}"));
                    0
                }
            }
        };
        mains.insert(r.obj, (ts, current));
    }
    // Every other greenlet's main greenlet and parent.
    let mut links: AddrMap<(u64, u64)> = AddrMap::default();
    for r in raws.iter().filter(|r| !r.is_main()) {
        let mg = snap.mem.read_ptr(field(r.imp, lay.main_greenlet())?)?;
        let parent = snap.mem.read_ptr(field(r.imp, lay.parent())?)?;
        links.insert(r.obj, (mg, parent));
    }
    // A greenlet not started yet has no main greenlet: its parents' lineage says which.
    let main_of = |obj: u64| -> Option<u64> {
        let mut cur = obj;
        for _ in 0..MAX_PARENT_DEPTH {
            if mains.contains_key(&cur) {
                return Some(cur);
            }
            let (mg, parent) = *links.get(&cur)?;
            if mg != 0 {
                return mains.contains_key(&mg).then_some(mg);
            }
            cur = parent;
        }
        None
    };

    // Which thread each main greenlet belongs to, by the stack addresses its greenlets record.
    let mut stack_addrs: AddrMap<Vec<u64>> = AddrMap::default();
    for r in &raws {
        let Some(m) = main_of(r.obj) else { continue };
        let a = stack_addrs.entry(m).or_default();
        if !r.is_main() && r.stack_stop != 0 {
            a.push(r.stack_stop);
        }
        // The main greenlet's `_stack_start` is 1 until it first switches away.
        if r.stack_start > 1 && mains.get(&m).is_some_and(|(_, cur)| *cur != r.obj) {
            a.push(r.stack_start);
        }
    }
    let ours: Vec<usize> = (0..threads.len())
        .filter(|i| threads[*i].interps.contains(&interp))
        .collect();
    let mut thread_of_main: AddrMap<Option<usize>> = AddrMap::default();
    for (m, (ts, _)) in &mains {
        let t = if *ts == 0 {
            None
        } else {
            let found = stack_addrs.get(m).and_then(|addrs| {
                addrs
                    .iter()
                    .find_map(|a| thread_of(*a, threads, &ours, stacks))
            });
            if found.is_none() {
                err(
                    *m,
                    format!("main greenlet {m:#x}: which thread it belongs to is not known"),
                );
            }
            found
        };
        thread_of_main.insert(*m, t);
    }

    let parents: HashSet<u64> = links.values().map(|l| l.1).collect();
    let idents = gevent_idents(snap, &raws, ty, &parents);
    // gevent's waits are only worth reading for where gevent is imported (a program of
    // 100,000 plain greenlets would read every innermost value stack for nothing).
    let gevent = snap.dict_get(modules, "gevent")?.is_some();
    // Each greenlet on its own (their saved frames are most of the work), its errors kept
    // in order.
    let built = crate::parallel::map(&raws, PARALLEL_BATCH, snap.mem.any_thread(), |r| {
        let mut errors: Vec<(u64, String)> = Vec::new();
        let main = r.is_main();
        let m = main_of(r.obj);
        let (ts, current) = m.and_then(|m| mains.get(&m).copied()).unwrap_or((0, 0));
        let state = if main {
            if current == r.obj {
                State::Running
            } else if ts == 0 {
                // Its thread has ended: it can never run again.
                State::Dead
            } else {
                State::Suspended
            }
        } else if r.stack_stop == 0 {
            State::NotStarted
        } else if r.stack_start == 0 {
            State::Dead
        } else if ts != 0 && current == r.obj {
            State::Running
        } else {
            State::Suspended
        };
        let thread = m.and_then(|m| thread_of_main.get(&m).copied().flatten());
        let (frames, truncated) = match state {
            State::Running => match thread {
                Some(i) => (threads[i].walk.items.clone(), threads[i].walk.truncated),
                None => (Vec::new(), false),
            },
            State::Suspended if r.top_frame != 0 => {
                let walk = suspended_frames(snap, r.top_frame, py310);
                if let Some(cut) = walk.cut {
                    errors.push((
                        cut.addr,
                        format!("greenlet {:#x}: frame walk: {cut}", r.obj),
                    ));
                }
                (walk.items, walk.truncated)
            }
            _ => (Vec::new(), false),
        };
        for f in &frames {
            if let FrameItem::Unreadable { addr, error } = f {
                errors.push((*addr, format!("greenlet {:#x}: frame: {error}", r.obj)));
            }
        }
        let parent = if main {
            None
        } else {
            links.get(&r.obj).map(|l| l.1).filter(|p| *p != 0)
        };
        // Only gevent's classes (subclasses) have names and spawned functions.
        let (mut name, function) = if r.tp == ty {
            (None, None)
        } else {
            gevent_names(snap, r.obj)
        };
        if name.is_none() {
            name = idents.get(&r.obj).map(|i| format!("Greenlet-{i}"));
        }
        let g = Greenlet {
            addr: r.obj,
            state,
            main,
            parent,
            type_name: snap
                .type_at(r.tp)
                .map(|t| t.name.clone())
                .unwrap_or_else(|_| "?".into()),
            thread,
            waiting: (gevent && state == State::Suspended)
                .then(|| waits::gevent_wait(snap, &frames))
                .flatten(),
            frames,
            interp,
            truncated,
            name,
            function,
        };
        (g, errors)
    });
    let mut found: Vec<Greenlet> = Vec::with_capacity(built.len());
    for (g, errors) in built {
        for (addr, what) in errors {
            err(addr, what);
        }
        found.push(g);
    }
    // By thread (in the threads' order; ended threads last), the main greenlet first. The
    // keys are sorted, not the greenlets (each a few hundred bytes, 100,000s of them).
    let mut order: Vec<(usize, bool, bool, u64, usize)> = found
        .iter()
        .enumerate()
        .map(|(i, g)| {
            (
                g.thread.unwrap_or(usize::MAX),
                !g.main,
                g.state != State::Running,
                g.addr,
                i,
            )
        })
        .collect();
    order.sort_unstable();
    let mut slots: Vec<Option<Greenlet>> = found.into_iter().map(Some).collect();
    view.greenlets
        .extend(order.iter().filter_map(|k| slots.get_mut(k.4)?.take()));
    Ok(())
}

fn read_raw(
    snap: &Snapshot,
    lay: &GreenletLayout,
    obj: u64,
    tp: u64,
) -> Result<Option<Raw>, ReadError> {
    let imp = snap.mem.read_ptr(field(obj, lay.pimpl)?)?;
    if imp == 0 {
        return Ok(None);
    }
    // Up to `_top_frame`: 16 words at most (greenlet 3.1.1+ on 3.10).
    let mut buf = [0u8; 128];
    let words = buf
        .get_mut(..(lay.top_frame + 8) as usize)
        .ok_or(ReadError::corrupt(imp, "greenlet layout"))?;
    snap.mem.read_into(imp, words)?;
    let words = &*words;
    let word = |o: u64| {
        words
            .get(o as usize..o as usize + 8)
            .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
    };
    if lay.has_self && word(8) != obj {
        return Err(ReadError::corrupt(
            imp,
            "its Greenlet does not point back at it (not a greenlet 3.1.1+ layout?)",
        ));
    }
    Ok(Some(Raw {
        obj,
        tp,
        imp,
        stack_start: word(lay.stack_start),
        stack_stop: word(lay.stack_stop),
        top_frame: word(lay.top_frame),
    }))
}

/// The frames a suspended greenlet resumes in, from its saved `PyFrameObject`.
fn suspended_frames(snap: &Snapshot, top: u64, py310: bool) -> FrameWalk {
    if py310 {
        return snap.walk_frames(top);
    }
    let first = field(top, snap.layout.pyobject.ob_type + 8)
        .and_then(|o| field(o, FRAMEOBJECT_F_FRAME))
        .and_then(|a| snap.mem.read_ptr(a));
    match first {
        Ok(f) => snap.walk_frames(f),
        Err(e) => {
            let mut w = FrameWalk::default();
            w.stop(top, e);
            w
        }
    }
}

/// The thread (among `ours`) whose stack holds `addr`.
fn thread_of(addr: u64, threads: &[GThread], ours: &[usize], stacks: &Stacks) -> Option<usize> {
    if !stacks.regions.is_empty() {
        let i = stacks.regions.partition_point(|r| r.0 <= addr);
        let (start, end) = *stacks.regions.get(i.checked_sub(1)?)?;
        if addr >= end {
            return None;
        }
        let inside = |a: u64| a >= start && a < end;
        return ours.iter().copied().find(|&t| {
            let th = &threads[t];
            inside(th.pthread)
                || stacks
                    .anchors
                    .iter()
                    .any(|(lwp, a)| Some(*lwp) == th.native_id && inside(*a))
        });
    }
    // No mappings: a glibc thread's stack lies right below its descriptor, the main thread's
    // below `__libc_stack_end` (its descriptor is elsewhere, in the dynamic linker's TLS).
    let below = |top: u64| top > addr && top - addr < MAX_STACK_BELOW_TOP;
    ours.iter()
        .copied()
        .filter(|&t| below(threads[t].pthread))
        .min_by_key(|&t| threads[t].pthread)
        .or_else(|| {
            let (lwp, _) = stacks.main_stack.filter(|m| below(m.1))?;
            ours.iter()
                .copied()
                .find(|&t| threads[t].native_id == Some(lwp))
        })
}

/// Most entries read from one gevent ident registry.
const MAX_IDENTS: u64 = 1 << 20;
/// Words of a gevent `IdentRegistry` searched for its `_registry` (a Cython object: the
/// header, maybe a vtable pointer, then its fields).
const IDENT_REGISTRY_WORDS: u64 = 6;

/// The names gevent generated (`Greenlet-N`, `N` being `minimal_ident`): `N` lives in the
/// compiled `Greenlet`, whose layout no table says, but also in the hub's `ident_registry`,
/// a `WeakKeyDictionary` from each greenlet to `(N, weakref)` (gevent/_ident.py).
fn gevent_idents(
    snap: &Snapshot,
    raws: &[Raw],
    root: u64,
    parents: &HashSet<u64>,
) -> HashMap<u64, u64> {
    let mut out = HashMap::new();
    let header = snap.layout.pyobject.ob_type + 8;
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
fn gevent_names(snap: &Snapshot, obj: u64) -> (Option<String>, Option<String>) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(parse_version("3.5.6"), Some((3, 5, 6)));
        assert_eq!(parse_version("3.1.0a1"), Some((3, 1, 0)));
        assert_eq!(parse_version("3.2"), Some((3, 2, 0)));
        assert_eq!(parse_version("x"), None);
    }
}

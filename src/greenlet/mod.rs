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
mod names;
mod tree;
pub mod waits;

use std::collections::{HashMap, HashSet};

use layout::GreenletLayout;
use names::{gevent_idents, gevent_names};
use tree::Tree;

use crate::cpython::layout::FrameModel;
use crate::cpython::values::field;
use crate::cpython::{FrameItem, FrameWalk, Snapshot};
use crate::error::ReadError;
use crate::memory::addr_map::{AddrMap, AddrSet};
use crate::model::ErrorReport;

/// Most greenlets we list.
pub const MAX_GREENLETS: usize = 1 << 20;
/// Greenlets a thread takes at once when they are read in parallel.
const PARALLEL_BATCH: usize = 256;

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

/// A greenlet's state, as the report names it.
pub use crate::model::GreenletState as State;

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
    pub waiting: Option<crate::model::Waiting>,
}

#[derive(Clone, Debug, Default)]
pub struct GreenletView {
    pub greenlets: Vec<Greenlet>,
    /// greenlet's `__version__`, when greenlet is imported.
    pub version: Option<String>,
    pub errors: Vec<ErrorReport>,
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
            view.errors.push(ErrorReport::read(&e, "greenlets"));
            return view;
        }
    };
    for interp in interps {
        if let Err(e) = interpreter(snap, interp, threads, stacks, &mut view) {
            view.errors.push(ErrorReport::read(&e, "greenlets"));
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

/// What one interpreter's greenlet module says: enough to find and read its greenlets.
struct Module {
    /// `greenlet.greenlet`.
    ty: u64,
    /// greenlet's `__version__`.
    version: String,
    /// Its layout, `size` still 0 until [`calibrate`].
    lay: GreenletLayout,
    /// gevent is imported.
    gevent: bool,
}

fn interpreter(
    snap: &Snapshot,
    interp: u64,
    threads: &[GThread],
    stacks: &Stacks,
    view: &mut GreenletView,
) -> Result<(), ReadError> {
    let Some(mut m) = greenlet_module(snap, interp, view)? else {
        return Ok(());
    };
    let mut err = |addr: u64, what: String| {
        view.errors
            .push(ErrorReport::new(addr, format!("greenlets: {what}")))
    };
    let Some((objs, scanned)) = find::objects(snap, interp, stacks, &m, &mut err) else {
        return Ok(());
    };
    let found = from_objects(
        snap, interp, &mut m, objs, scanned, threads, stacks, &mut err,
    );
    view.greenlets.extend(in_thread_order(found));
    Ok(())
}

/// The greenlets among `objs` (object, type), found by a heap scan if `scanned`: their
/// layout calibrated into `m`, each with its state, thread and frames.
#[allow(clippy::too_many_arguments)]
fn from_objects(
    snap: &Snapshot,
    interp: u64,
    m: &mut Module,
    objs: Vec<(u64, u64)>,
    scanned: bool,
    threads: &[GThread],
    stacks: &Stacks,
    err: &mut impl FnMut(u64, String),
) -> Vec<Greenlet> {
    let Some(mut raws) = read_raws(snap, m, objs, scanned, err) else {
        return Vec::new();
    };
    let mut lost = AddrSet::default();
    let Some(size) = calibrate(snap, m, &mut raws, &mut lost, err) else {
        return Vec::new();
    };
    m.lay.size = size;
    let tree = Tree::read(snap, &m.lay, &mut raws, lost, err);
    greenlets(snap, interp, m, raws, &tree, threads, stacks, err)
}

/// The greenlet module of `interp` and what it says, where greenlet is imported and its
/// version and type are the ones we know (else an error entry says which is not).
fn greenlet_module(
    snap: &Snapshot,
    interp: u64,
    view: &mut GreenletView,
) -> Result<Option<Module>, ReadError> {
    let Some(modules) = snap.sys_modules(interp)? else {
        return Ok(None);
    };
    let Some(cmod) = snap.module_dict(modules, "greenlet._greenlet")? else {
        return Ok(None);
    };
    let mut err = |addr: u64, what: String| {
        view.errors
            .push(ErrorReport::new(addr, format!("greenlets: {what}")))
    };
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
        return Ok(None);
    };
    let version = version.unwrap_or_default();
    view.version = Some(version.clone());
    let mut err = |addr: u64, what: String| {
        view.errors
            .push(ErrorReport::new(addr, format!("greenlets: {what}")))
    };
    if v.0 != 3 || v.1 > 5 {
        err(
            cmod,
            format!("greenlet {version} is not supported (3.0 to 3.5 are)"),
        );
        return Ok(None);
    }
    let Some(ty) = snap.dict_get(cmod, "greenlet")? else {
        err(cmod, "greenlet._greenlet has no `greenlet` type".into());
        return Ok(None);
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
        return Ok(None);
    }
    let py310 = matches!(snap.layout.frame, FrameModel::FrameObject { .. });
    // gevent's waits are only worth reading for where gevent is imported (a program of
    // 100,000 plain greenlets would read every innermost value stack for nothing).
    let gevent = match snap.dict_get(modules, "gevent") {
        Ok(g) => g.is_some(),
        Err(e) => {
            err(e.addr, format!("sys.modules: {e} (gevent waits not read)"));
            false
        }
    };
    Ok(Some(Module {
        ty,
        version,
        lay: GreenletLayout::prefix(pimpl, v >= (3, 1, 1), py310),
        gevent,
    }))
}

/// The `Greenlet`s of `objs`: the fixed prefix, checked by the round trip. One that cannot be
/// read is an error entry (unless a heap scan found it: then it was a word that only looks
/// like a greenlet's type pointer). None when no object matches the layout at all.
fn read_raws(
    snap: &Snapshot,
    m: &Module,
    objs: Vec<(u64, u64)>,
    scanned: bool,
    err: &mut impl FnMut(u64, String),
) -> Option<Vec<Raw>> {
    let mut raws = Vec::with_capacity(objs.len());
    let mut bad = 0usize;
    let read = crate::parallel::map(&objs, PARALLEL_BATCH, snap.mem.any_thread(), |(obj, tp)| {
        read_raw(snap, &m.lay, *obj, *tp)
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
            m.ty,
            format!(
                "greenlet {}: no greenlet matches its layout (not listed)",
                m.version
            ),
        );
        return None;
    }
    Some(raws)
}

/// `sizeof(Greenlet)`, from the first main greenlet that shows it. A main greenlet whose
/// words cannot be read is an error entry and leaves `raws` for `lost`. None when no main
/// greenlet shows it.
fn calibrate(
    snap: &Snapshot,
    m: &Module,
    raws: &mut Vec<Raw>,
    lost: &mut AddrSet,
    err: &mut impl FnMut(u64, String),
) -> Option<u64> {
    let mut size = None;
    let bad = lost;
    for r in raws.iter().filter(|r| r.is_main()) {
        match m.lay.calibrate(snap, r.obj, r.imp) {
            Ok(Some(s)) => {
                size = Some(s);
                break;
            }
            Ok(None) => {}
            Err(e) => {
                err(r.obj, format!("greenlet {:#x}: {e}", r.obj));
                bad.insert(r.obj);
            }
        }
    }
    raws.retain(|r| !bad.contains(&r.obj));
    if size.is_none() && !raws.is_empty() {
        err(
            m.ty,
            format!(
                "greenlet {}: no main greenlet to calibrate its layout with (not listed)",
                m.version
            ),
        );
    }
    size
}

/// Every greenlet of `raws`, with its state, thread and frames (`m.lay` calibrated).
#[allow(clippy::too_many_arguments)]
fn greenlets(
    snap: &Snapshot,
    interp: u64,
    m: &Module,
    raws: Vec<Raw>,
    tree: &Tree,
    threads: &[GThread],
    stacks: &Stacks,
    err: &mut impl FnMut(u64, String),
) -> Vec<Greenlet> {
    let thread_of_main = tree.threads_of_mains(&raws, interp, threads, stacks, err);
    let parents: HashSet<u64> = tree.links.values().map(|l| l.1).collect();
    let b = Build {
        snap,
        interp,
        m,
        tree,
        thread_of_main: &thread_of_main,
        threads,
        idents: gevent_idents(snap, &raws, m.ty, &parents),
    };
    // Each greenlet on its own (their saved frames are most of the work), its errors kept
    // in order.
    let built = crate::parallel::map(&raws, PARALLEL_BATCH, snap.mem.any_thread(), |r| {
        b.greenlet(r)
    });
    let mut found: Vec<Greenlet> = Vec::with_capacity(built.len());
    for (g, errors) in built {
        for e in errors {
            err(e.address, e.what);
        }
        found.push(g);
    }
    found
}

/// By thread (in the threads' order; ended threads last), the main greenlet first, then the
/// running one. The keys are sorted, not the greenlets (each a few hundred bytes, 100,000s of
/// them).
fn in_thread_order(found: Vec<Greenlet>) -> impl Iterator<Item = Greenlet> {
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
    order
        .into_iter()
        .filter_map(move |k| slots.get_mut(k.4)?.take())
}

/// What one greenlet is made with besides its own words.
struct Build<'a> {
    snap: &'a Snapshot,
    interp: u64,
    m: &'a Module,
    tree: &'a Tree,
    thread_of_main: &'a AddrMap<Option<usize>>,
    threads: &'a [GThread<'a>],
    /// gevent's `Greenlet-N` numbers, by greenlet.
    idents: HashMap<u64, u64>,
}

impl Build<'_> {
    /// The greenlet of `r`, and the errors reading it met.
    fn greenlet(&self, r: &Raw) -> (Greenlet, Vec<ErrorReport>) {
        let snap = self.snap;
        let main = r.is_main();
        let m = self.tree.main_of(r.obj);
        let (ts, current) = m
            .and_then(|m| self.tree.mains.get(&m).copied())
            .unwrap_or((0, 0));
        let state = state_of(r, ts, current);
        let thread = m.and_then(|m| self.thread_of_main.get(&m).copied().flatten());
        let (frames, truncated, mut errors) = self.frames(r, state, thread);
        if let Some(lost) = self.tree.lost_main_of(r.obj) {
            errors.push(ErrorReport::new(
                r.obj,
                format!(
                    "greenlet {:#x}: its main greenlet {lost:#x} cannot be read: its thread, and whether it runs, are not known",
                    r.obj
                ),
            ));
        }
        let parent = if main {
            None
        } else {
            self.tree.links.get(&r.obj).map(|l| l.1).filter(|p| *p != 0)
        };
        // Only gevent's classes (subclasses) have names and spawned functions.
        let (mut name, function) = if r.tp == self.m.ty {
            (None, None)
        } else {
            gevent_names(snap, r.obj)
        };
        if name.is_none() {
            name = self.idents.get(&r.obj).map(|i| format!("Greenlet-{i}"));
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
            waiting: (self.m.gevent && state == State::Suspended)
                .then(|| waits::gevent_wait(snap, &frames))
                .flatten(),
            frames,
            interp: self.interp,
            truncated,
            name,
            function,
        };
        (g, errors)
    }

    /// Its stack (the saved one of a suspended greenlet, its thread's of a running one),
    /// whether it is cut, and the errors met.
    fn frames(
        &self,
        r: &Raw,
        state: State,
        thread: Option<usize>,
    ) -> (Vec<FrameItem>, bool, Vec<ErrorReport>) {
        let mut errors = Vec::new();
        let (frames, truncated) = match state {
            State::Running => match thread {
                Some(i) => (
                    self.threads[i].walk.items.clone(),
                    self.threads[i].walk.truncated,
                ),
                None => (Vec::new(), false),
            },
            State::Suspended if r.top_frame != 0 => {
                let walk = suspended_frames(self.snap, r.top_frame);
                if let Some(cut) = walk.cut {
                    errors.push(ErrorReport::new(
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
                errors.push(ErrorReport::new(
                    *addr,
                    format!("greenlet {:#x}: frame: {error}", r.obj),
                ));
            }
        }
        (frames, truncated, errors)
    }
}

/// The state of `r`, whose main greenlet's thread state is `ts` (0: ended or not known) and
/// runs `current`.
fn state_of(r: &Raw, ts: u64, current: u64) -> State {
    if r.is_main() {
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
    }
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
fn suspended_frames(snap: &Snapshot, top: u64) -> FrameWalk {
    // 3.10: the frame object is the frame.
    let Some(f_frame) = snap.layout.frame_object_f_frame() else {
        return snap.walk_frames(top);
    };
    let first = field(top, f_frame).and_then(|a| snap.mem.read_ptr(a));
    match first {
        Ok(f) => snap.walk_frames(f),
        Err(e) => {
            let mut w = FrameWalk::default();
            w.stop(top, e);
            w
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpython::layout::Layout;
    use crate::memory::FakeMemory;

    /// `greenlet.greenlet` (never read: every greenlet below is of exactly this type).
    const TY: u64 = 0x50_000;
    /// greenlet 3.1.1+ on 3.11+: `_stack_start`, `stack_stop`, `_top_frame` (layout.rs), and
    /// the `sizeof(Greenlet)` the main greenlet below shows.
    const STACK_START: u64 = 56;
    const STACK_STOP: u64 = 64;
    const SIZE: u64 = 120;
    const STACK: (u64, u64) = (0x7000_0000, 0x7001_0000);

    /// A `PyGreenlet` at `obj` whose `Greenlet` at `imp` holds `words` (offset, value) after
    /// its `_self`, in a block of `len` bytes: nothing past it can be read.
    fn put_greenlet(m: &mut FakeMemory, obj: u64, imp: u64, len: usize, words: &[(u64, u64)]) {
        m.put_u64(obj + 8, TY).put_u64(obj + 32, imp);
        m.put(imp, &vec![0u8; len]).put_u64(imp + 8, obj);
        for (at, v) in words {
            m.put_u64(imp + at, *v);
        }
    }

    #[test]
    fn one_unreadable_greenlet_is_an_error_and_the_others_are_listed() {
        let (bad_main, main, a, bad, pending) = (0x1000, 0x2000, 0x3000, 0x4000, 0x5000);
        let orphan = 0x6000;
        let ts = 0x30_000;
        let mut mem = FakeMemory::new();
        // A main greenlet whose `Greenlet` ends right after `_top_frame`: its calibration
        // cannot read the words after it. It comes first.
        put_greenlet(&mut mem, bad_main, 0x11_000, 112, &[(STACK_STOP, u64::MAX)]);
        // The main greenlet running on the thread: `_self` at SIZE, its thread state after.
        put_greenlet(
            &mut mem,
            main,
            0x12_000,
            512,
            &[
                (STACK_START, 1),
                (STACK_STOP, u64::MAX),
                (SIZE, main),
                (SIZE + 8, ts),
            ],
        );
        mem.put_u64(ts, main).put_u64(ts + 8, main);
        // `a`, suspended (its main greenlet and parent at SIZE and SIZE + 16).
        let started = [
            (STACK_START, STACK.0 + 0x100),
            (STACK_STOP, STACK.0 + 0x200),
        ];
        let link = [(SIZE, main), (SIZE + 16, main)];
        put_greenlet(&mut mem, a, 0x13_000, 512, &[started, link].concat());
        // `bad`: started, but its `Greenlet` ends before its main greenlet and parent.
        put_greenlet(&mut mem, bad, 0x14_000, 112, &started);
        // `pending`, not started: no main greenlet yet, its parent `a` says whose it is.
        put_greenlet(&mut mem, pending, 0x15_000, 512, &[(SIZE + 16, a)]);
        // `orphan`, whose main greenlet is `bad_main`: listed, its thread not known (said).
        let lost = [(SIZE, bad_main), (SIZE + 16, bad_main)];
        put_greenlet(&mut mem, orphan, 0x16_000, 512, &[started, lost].concat());

        let layout = Layout::builtin(crate::cpython::Version::new(3, 12, 0)).expect("a layout");
        let snap = Snapshot::for_test(mem, layout);
        let mut m = Module {
            ty: TY,
            version: "3.5.6".into(),
            lay: GreenletLayout::prefix(32, true, false),
            gevent: false,
        };
        let walk = FrameWalk::default();
        let threads = [GThread {
            interps: vec![1],
            native_id: Some(7),
            pthread: STACK.1 - 0x1000,
            walk: &walk,
        }];
        let stacks = Stacks {
            regions: &[STACK],
            ..Default::default()
        };
        let objs = [bad_main, main, a, bad, pending, orphan]
            .map(|o| (o, TY))
            .to_vec();
        let mut errors = Vec::new();
        let found = from_objects(
            &snap,
            1,
            &mut m,
            objs,
            false,
            &threads,
            &stacks,
            &mut |a, w| errors.push((a, w)),
        );
        let got: Vec<_> = in_thread_order(found)
            .map(|g| (g.addr, g.state, g.main, g.parent, g.thread))
            .collect();
        assert_eq!(
            got,
            vec![
                (main, State::Running, true, None, Some(0)),
                (a, State::Suspended, false, Some(main), Some(0)),
                (pending, State::NotStarted, false, Some(a), Some(0)),
                (orphan, State::Suspended, false, Some(bad_main), None),
            ]
        );
        assert_eq!(m.lay.size, SIZE);
        let at: Vec<u64> = errors.iter().map(|e| e.0).collect();
        assert_eq!(at, vec![bad_main, bad, orphan], "{errors:?}");
        assert!(errors[0].1.starts_with("greenlet 0x1000: "), "{errors:?}");
        assert!(errors[1].1.starts_with("greenlet 0x4000: "), "{errors:?}");
        assert!(
            errors[2]
                .1
                .starts_with("greenlet 0x6000: its main greenlet 0x1000 cannot be read"),
            "{errors:?}"
        );
    }

    #[test]
    fn versions() {
        assert_eq!(parse_version("3.5.6"), Some((3, 5, 6)));
        assert_eq!(parse_version("3.1.0a1"), Some((3, 1, 0)));
        assert_eq!(parse_version("3.2"), Some((3, 2, 0)));
        assert_eq!(parse_version("x"), None);
    }
}

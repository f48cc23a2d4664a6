//! Walking a thread's Python frames, innermost first.

use crate::memory::addr_map::AddrSet;

use super::layout::{coflags, localkind, EntryMarker, FrameModel, InterpreterFrame};
use super::snapshot::Snapshot;
use super::values::{field, PyFrame};
use crate::error::{ReadError, ReadErrorKind};

/// Frame headers up to this size (every version's: 3.14's is 80 bytes) are read on the stack.
const HEADER_BUF_BYTES: usize = 256;

/// Deepest stack we walk; past it the walk stops with `truncated`.
pub const MAX_FRAMES: usize = 250_000;

#[derive(Clone, Debug)]
pub enum FrameItem {
    Python(PyFrame),
    Unreadable { addr: u64, error: ReadError },
}

#[derive(Clone, Debug, Default)]
pub struct FrameWalk {
    pub items: Vec<FrameItem>,
    /// The walk stopped before the thread's first frame: at a cap ([`MAX_FRAMES`] or the
    /// stop's budget; `cut` says which, and where), a cycle, an unreadable link or a frame that
    /// cannot be one (memory a core lost reads as zeros). The last item then says why, unless
    /// a cap cut it.
    pub truncated: bool,
    /// Which cap stopped it, at the first frame not walked.
    pub cut: Option<ReadError>,
}

/// A local variable, already rendered.
#[derive(Clone, Debug)]
pub struct Local {
    pub name: String,
    pub repr: String,
    pub is_arg: bool,
}

/// What a slot of a frame's `localsplus` holds: from 3.14 a `_PyStackRef`, whose low
/// `tag_bits` are tags (Include/internal/pycore_stackref.h); before, `tag_bits` is 0 and
/// every slot is a plain pointer.
pub enum StackRef {
    /// A tagged int (`Py_INT_TAG`: all tag bits set), its value shifted left by
    /// `Py_TAGGED_SHIFT` (2), not a pointer.
    Int(i64),
    /// An object's address, tags cleared; 0 for an unset slot.
    Object(u64),
}

impl StackRef {
    pub fn decode(bits: u64, tag_bits: u64) -> StackRef {
        if tag_bits != 0 && bits & tag_bits == tag_bits {
            StackRef::Int((bits as i64) >> 2)
        } else {
            StackRef::Object(bits & !tag_bits)
        }
    }
}

impl Snapshot {
    /// Every Python frame from `first` outwards. Never fails as a whole: an unreadable frame
    /// becomes an item, and the walk continues past it when its link is still readable.
    pub fn walk_frames(&self, first: u64) -> FrameWalk {
        self.walk_frames_up_to(first, MAX_FRAMES)
    }

    /// The frames of the thread whose state is at `tstate`, from `first`, its current frame
    /// as read before. A live thread runs on while it is read: where the walk met a frame that
    /// changed under it (a generator's that yielded, one freed or reused), the thread's
    /// current frame and the frames it leads to are read again past the cache, up to `tries`
    /// reads in all. The first walk that did not tear is kept; where all tore, the one with
    /// the most frames read (a retry may tear nearer the top): each says where it tore.
    pub fn walk_thread(&self, tstate: u64, first: u64, tries: u32) -> FrameWalk {
        let mut walk = self.walk_frames(first);
        for _ in 1..tries {
            if !walk.tore() {
                break;
            }
            for item in &walk.items {
                let addr = match item {
                    FrameItem::Python(f) => f.addr,
                    FrameItem::Unreadable { addr, .. } => *addr,
                };
                self.mem.forget(addr, HEADER_BUF_BYTES as u64);
            }
            let Ok(first) = self.current_frame(tstate, true) else {
                break;
            };
            let again = self.walk_frames(first);
            if !again.tore() || again.python_frames() > walk.python_frames() {
                walk = again;
            }
        }
        walk
    }

    fn walk_frames_up_to(&self, first: u64, max_frames: usize) -> FrameWalk {
        let mut walk = FrameWalk::default();
        let mut seen = AddrSet::default();
        // A frame's header is read into this buffer when it fits: no allocation per frame.
        let mut buf = [0u8; HEADER_BUF_BYTES];
        let mut cur = first;
        while cur != 0 {
            if walk.items.len() >= max_frames {
                walk.truncated = true;
                walk.cut = Some(ReadError::new(
                    cur,
                    0,
                    ReadErrorKind::Limit {
                        what: "frames in one thread",
                        max: max_frames as u64,
                    },
                ));
                break;
            }
            if !seen.insert(cur) {
                walk.stop(cur, ReadError::new(cur, 0, ReadErrorKind::Cycle));
                break;
            }
            let next = match self.layout.frame {
                FrameModel::FrameObject {
                    f_back,
                    f_code,
                    f_lasti,
                    ..
                } => self.frame_object_step(&mut walk, cur, f_back, f_code, f_lasti),
                FrameModel::Interpreter(f) => {
                    self.interpreter_frame_step(&mut walk, cur, &f, &mut buf)
                }
            };
            match next {
                Some(n) => cur = n,
                None => break,
            }
        }
        walk
    }

    /// A 3.10 `PyFrameObject` at `cur` onto `walk`; the next frame's address, `None` where
    /// the walk ends.
    fn frame_object_step(
        &self,
        walk: &mut FrameWalk,
        cur: u64,
        f_back: u64,
        f_code: u64,
        f_lasti: u64,
    ) -> Option<u64> {
        let next = field(cur, f_back).and_then(|a| self.mem.read_ptr(a));
        let frame = field(cur, f_code)
            .and_then(|a| self.mem.read_ptr(a))
            .and_then(|c| self.code(c))
            .and_then(|code| {
                let lasti = self.mem.read_i32(field(cur, f_lasti)?)? as i64;
                Ok(PyFrame {
                    addr: cur,
                    line: code.line_at(lasti),
                    lasti: u32::try_from(lasti).ok(),
                    code,
                    entry: true,
                    shim: None,
                })
            });
        if !self.charge(walk, cur) {
            return None;
        }
        let generator = frame
            .as_ref()
            .is_ok_and(|p| p.code.flags & coflags::GENERATOR_LIKE != 0);
        push(walk, cur, frame);
        match next {
            // 3.10's generators link their frame to the caller's only while they run too.
            Ok(0) if generator => {
                yielded_while_read(walk, cur);
                None
            }
            Ok(n) => Some(n),
            Err(e) => {
                walk.stop(cur, e);
                None
            }
        }
    }

    /// A 3.11+ `_PyInterpreterFrame` at `cur` onto `walk` (or skipped, when it runs no code of
    /// the program); the next frame's address, `None` where the walk ends.
    fn interpreter_frame_step(
        &self,
        walk: &mut FrameWalk,
        cur: u64,
        f: &InterpreterFrame,
        buf: &mut [u8; HEADER_BUF_BYTES],
    ) -> Option<u64> {
        // One read per frame: every field we use lies before `localsplus`.
        let heap: Vec<u8>;
        let read = match buf.get_mut(..f.localsplus as usize) {
            // Read with its block: the frames it links to are read from the same copy.
            Some(h) => self.mem.read_together_into(cur, h).map(|_| &*h),
            None => match self.mem.read_vec(cur, f.localsplus, f.localsplus) {
                Ok(v) => {
                    heap = v;
                    Ok(&heap[..])
                }
                Err(e) => Err(e),
            },
        };
        let header = match read {
            Ok(h) => h,
            Err(e) => {
                walk.stop(cur, e);
                return None;
            }
        };
        let byte = |off: u64| header.get(off as usize).copied().unwrap_or(0);
        let word = |off: u64| header_word(header, off);
        let (owner, previous) = (byte(f.owner), word(f.previous));
        if let EntryMarker::ShimOwner(v) = f.entry {
            if skipped_by_owner(walk, cur, owner, v) {
                return Some(previous);
            }
        }
        let executable = word(f.executable) & !f.tag_bits;
        if executable == 0 {
            // Only entry and base frames (owner 3 and up, skipped above) run no code. A
            // frame of zeros is memory the core lost: gdb's gcore writes zeros for a stack
            // chunk that starts on a guard page (glibc 2.41+ installs them with
            // MADV_GUARD_INSTALL), where 3.12+ keep each eval loop's entry frame.
            let what = if header.iter().all(|b| *b == 0) {
                "frame: all zeros (memory the core did not save?)"
            } else {
                "frame (no code object)"
            };
            walk.stop(cur, ReadError::corrupt(cur, what));
            return None;
        }
        let frame = self.code(executable).map(|code| {
            let entry = match f.entry {
                EntryMarker::IsEntry(off) => byte(off) != 0,
                EntryMarker::ShimOwner(_) => previous == 0,
            };
            PyFrame {
                addr: cur,
                line: code.line_at_ptr(word(f.instr_ptr)),
                lasti: code.lasti_at_ptr(word(f.instr_ptr)),
                code,
                entry,
                shim: None,
            }
        });
        if frame.as_ref().is_ok_and(|p| is_init_shim(&p.code)) {
            // 3.13's `CALL_ALLOC_AND_ENTER_INIT` runs a class's `__init__` above a shim frame
            // of `_Py_InitCleanup` (Python/specialize.c), which tracebacks and
            // `sys._getframe` skip (it ends before its `_co_firsttraceable`): no frame of the
            // program.
            return Some(previous);
        }
        if !self.charge(walk, cur) {
            return None;
        }
        push(walk, cur, frame);
        if owner == FRAME_OWNED_BY_GENERATOR && previous == 0 {
            yielded_while_read(walk, cur);
            return None;
        }
        Some(previous)
    }

    /// Charges the frame at `cur` to the stop's budget; false (the walk cut there) when the
    /// budget is spent.
    fn charge(&self, walk: &mut FrameWalk, cur: u64) -> bool {
        match self.budget.frame(cur) {
            Ok(()) => true,
            Err(e) => {
                walk.truncated = true;
                walk.cut = Some(e);
                false
            }
        }
    }

    /// One `_PyInterpreterFrame` (3.11+) on its own, such as the frame a coroutine embeds, and
    /// its header bytes (everything before `localsplus`) for callers that need more fields.
    pub fn interp_frame(&self, addr: u64) -> Result<(PyFrame, Vec<u8>), ReadError> {
        let FrameModel::Interpreter(f) = self.layout.frame else {
            return Err(ReadError::corrupt(addr, "frame model (3.10)"));
        };
        self.budget.frame(addr)?;
        let header = self.mem.read_vec(addr, f.localsplus, f.localsplus)?;
        let word = |off: u64| header_word(&header, off);
        let code = self.code(word(f.executable) & !f.tag_bits)?;
        let frame = PyFrame {
            addr,
            line: code.line_at_ptr(word(f.instr_ptr)),
            lasti: code.lasti_at_ptr(word(f.instr_ptr)),
            code,
            entry: false,
            shim: None,
        };
        Ok((frame, header))
    }

    /// Where a frame's `localsplus` array starts, and the stack-ref tag bits of its slots.
    pub(crate) fn localsplus(&self, frame: &PyFrame) -> Result<(u64, u64), ReadError> {
        Ok(match self.layout.frame {
            FrameModel::FrameObject { f_localsplus, .. } => (field(frame.addr, f_localsplus)?, 0),
            FrameModel::Interpreter(f) => (field(frame.addr, f.localsplus)?, f.tag_bits),
        })
    }

    /// The locals of a frame (arguments first), with bounded reprs. Unset locals are skipped.
    pub fn frame_locals(&self, frame: &PyFrame) -> Result<Vec<Local>, ReadError> {
        let (base, tag_bits) = self.localsplus(frame)?;
        let n = frame.code.locals.len() as u64;
        let raw = self.mem.read_vec(base, n * 8, 1 << 20)?;
        let nargs = frame.code.total_args();
        let mut out = Vec::new();
        for (i, (name, kind)) in frame.code.locals.iter().enumerate() {
            let bits = u64::from_le_bytes(raw[i * 8..i * 8 + 8].try_into().unwrap());
            if kind & localkind::HIDDEN != 0 {
                continue;
            }
            let mut v = match StackRef::decode(bits, tag_bits) {
                StackRef::Int(n) => {
                    out.push(Local {
                        name: name.clone(),
                        repr: n.to_string(),
                        is_arg: i < nargs,
                    });
                    continue;
                }
                StackRef::Object(v) => v,
            };
            if v == 0 {
                continue;
            }
            if kind & (localkind::CELL | localkind::FREE) != 0 {
                // A cell variable holds a cell once the frame has started (MAKE_CELL).
                if self.type_of(v).map(|t| t.name == "cell").unwrap_or(false) {
                    v = self.mem.read_ptr(field(v, self.layout.cell_ob_ref)?)?;
                    if v == 0 {
                        continue;
                    }
                }
            }
            out.push(Local {
                name: name.clone(),
                repr: self.repr(v),
                is_arg: i < nargs,
            });
        }
        Ok(out)
    }

    /// The object a frame's local `name` holds (a cell's content for a cell variable), None
    /// when the frame has no such local, it is unset, or it holds a tagged int (3.14+).
    pub fn local_object(&self, frame: &PyFrame, name: &str) -> Result<Option<u64>, ReadError> {
        let Some(i) = frame.code.locals.iter().position(|(n, _)| n == name) else {
            return Ok(None);
        };
        let (base, tag_bits) = self.localsplus(frame)?;
        let bits = self.mem.read_u64(field(base, i as u64 * 8)?)?;
        let StackRef::Object(mut v) = StackRef::decode(bits, tag_bits) else {
            return Ok(None);
        };
        let kind = frame.code.locals[i].1;
        if v != 0
            && kind & (localkind::CELL | localkind::FREE) != 0
            && self.type_of(v).map(|t| t.name == "cell").unwrap_or(false)
        {
            v = self.mem.read_ptr(field(v, self.layout.cell_ob_ref)?)?;
        }
        Ok((v != 0).then_some(v))
    }

    /// Looks `name` up as libpython's `py-print` does: locals, then globals, then builtins.
    /// Returns the scope and the repr.
    pub fn lookup_name(
        &self,
        frame: &PyFrame,
        name: &str,
    ) -> Result<Option<(&'static str, String)>, ReadError> {
        if let Some(l) = self
            .frame_locals(frame)?
            .into_iter()
            .find(|l| l.name == name)
        {
            return Ok(Some(("local", l.repr)));
        }
        let (g, b) = match self.layout.frame {
            FrameModel::FrameObject {
                f_globals,
                f_builtins,
                ..
            } => (f_globals, f_builtins),
            FrameModel::Interpreter(f) => (f.f_globals, f.f_builtins),
        };
        for (scope, off) in [("global", g), ("builtin", b)] {
            let d = self.mem.read_ptr(field(frame.addr, off)?)?;
            if d == 0 {
                continue;
            }
            if let Some(v) = self.dict_get(d, name)? {
                return Ok(Some((scope, self.repr(v))));
            }
        }
        Ok(None)
    }
}

impl Snapshot {
    /// The opcode of `frame`'s current instruction (see [`PyFrame::lasti`]), None when it
    /// cannot be known.
    pub fn current_opcode(&self, frame: &PyFrame) -> Option<u8> {
        self.opcode_at(&frame.code, frame.lasti?)
    }
}

impl FrameWalk {
    /// How many of its frames were read.
    fn python_frames(&self) -> usize {
        self.items
            .iter()
            .filter(|i| matches!(i, FrameItem::Python(_)))
            .count()
    }

    /// Whether a frame could not be read for a reason a live thread's running on may cause
    /// (not a cap, not the debugger's refusal): a walk worth making again.
    pub fn tore(&self) -> bool {
        self.cut.is_none()
            && self.items.iter().any(|item| {
                matches!(item, FrameItem::Unreadable { error, .. }
                    if !matches!(error.kind, ReadErrorKind::Limit { .. } | ReadErrorKind::Callback))
            })
    }

    /// The walk ends here, before the thread's first frame: say where and why.
    pub fn stop(&mut self, addr: u64, error: ReadError) {
        self.items.push(FrameItem::Unreadable { addr, error });
        self.truncated = true;
    }
}

/// `_PyInterpreterFrame.owner` of a generator's or coroutine's frame: 1 in 3.11 to 3.15
/// (Include/internal/pycore_frame.h `enum _frameowner`; 3.14+ pycore_interpframe_structs.h).
const FRAME_OWNED_BY_GENERATOR: u8 = 1;

/// A generator's (or coroutine's) frame links to its caller's while it runs, and the link is
/// cleared when it yields: reached from a thread's current frame with no link, it was running
/// when that pointer was read and has yielded since (a live thread in `sum(x for x in ...)`).
/// Its caller is unknown: the stack was torn, not ended.
fn yielded_while_read(walk: &mut FrameWalk, cur: u64) {
    walk.stop(
        cur,
        ReadError::new(
            cur,
            0,
            ReadErrorKind::Torn("a generator's frame that yielded while it was read"),
        ),
    );
}

fn push(walk: &mut FrameWalk, addr: u64, frame: Result<PyFrame, ReadError>) {
    walk.items.push(match frame {
        Ok(f) => FrameItem::Python(f),
        Err(error) => FrameItem::Unreadable { addr, error },
    });
}

/// Whether the 3.12+ frame at `cur`, of `owner`, is one the walk steps over (`shim_owner`: the
/// layout's entry-frame owner): the eval loop's entry frame marks the Python frame above it
/// as an entry; a frame of an owner no version has is noted as unreadable, since its link may
/// still lead on.
fn skipped_by_owner(walk: &mut FrameWalk, cur: u64, owner: u8, shim_owner: u8) -> bool {
    if owner > shim_owner.saturating_add(1) {
        walk.items.push(FrameItem::Unreadable {
            addr: cur,
            error: ReadError::corrupt(cur, "frame owner"),
        });
        return true;
    }
    if owner == shim_owner {
        // The eval loop's own entry frame: marks a C-level call boundary.
        if let Some(FrameItem::Python(p)) = walk.items.last_mut() {
            // The first below it: 3.15's thread base frame is another owner-3 frame, right
            // after the main thread's entry frame.
            p.entry = true;
            p.shim = p.shim.or(Some(cur));
        }
        return true;
    }
    // 3.14's FRAME_OWNED_BY_CSTACK (above the entry owner): interpreter-internal, no Python
    // code.
    owner > shim_owner
}

/// The little-endian word at `off` of a frame header read whole. The offsets come from the
/// target (`_Py_DebugOffsets`): a field past the header reads as 0 (no frame, no code), which
/// ends the walk or fails the decode instead of indexing out of the buffer.
fn header_word(header: &[u8], off: u64) -> u64 {
    let o = off as usize;
    o.checked_add(8)
        .and_then(|end| header.get(o..end))
        .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap()))
}

/// Whether `code` is 3.13's `_Py_InitCleanup` shim (Python/specialize.c 3.13: `co_flags`
/// `CO_OPTIMIZED | CO_NO_MONITORING_EVENTS`, named `__init__` in a file `__init__`, no lines).
fn is_init_shim(code: &super::values::Code) -> bool {
    code.flags & super::layout::coflags::NO_MONITORING_EVENTS != 0
        && code.name == "__init__"
        && &*code.filename == "__init__"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpython::layout::{tpflags, Layout};
    use crate::cpython::version::Version;
    use crate::memory::FakeMemory;

    const STR_TYPE: u64 = 0x1000;
    const CODE_TYPE: u64 = 0x2000;

    /// A 3.12 target with one code object `f` in `/m.py`, and frames placed by the test.
    fn target() -> (FakeMemory, Layout) {
        let l = Layout::builtin(Version::new(3, 12, 1)).unwrap();
        let mut m = FakeMemory::new();
        // Type objects: tp_name pointers and flags.
        for (tp, name, flags) in [
            (STR_TYPE, 0x1800u64, tpflags::UNICODE_SUBCLASS),
            (CODE_TYPE, 0x2800, 0),
        ] {
            m.put(tp, &[0u8; 400]);
            m.put_u64(tp + l.type_object.tp_name, name);
            m.put_u64(tp + l.type_object.tp_flags, flags);
        }
        m.put(0x1800, &[0u8; 64])
            .put(0x1800, b"str")
            .put(0x2800, &[0u8; 64])
            .put(0x2800, b"code");
        // Compact ASCII strs: ob_type, length, state (kind 1, compact, ascii), data.
        let mut s = |addr: u64, text: &str| {
            m.put(addr, &[0u8; 64]);
            m.put_u64(addr + 8, STR_TYPE);
            m.put_u64(addr + l.unicode_object.length, text.len() as u64);
            m.put(
                addr + l.unicode_object.state,
                &((1u32 << 2) | (1 << 5) | (1 << 6)).to_le_bytes(),
            );
            m.put(addr + l.unicode_object.asciiobject_size, text.as_bytes());
        };
        s(0x3000, "f");
        s(0x3100, "/m.py");
        // An empty tuple (names) and empty bytes (kinds, line table) are all the code needs.
        m.put(0x3200, &[0u8; 48]);
        let co = 0x4000;
        m.put(co, &[0u8; 256]);
        m.put_u64(co + 8, CODE_TYPE);
        let c = &l.code_object;
        for off in [c.name, c.qualname.unwrap()] {
            m.put_u64(co + off, 0x3000);
        }
        m.put_u64(co + c.filename, 0x3100);
        m.put_u64(co + c.linetable, 0x3200);
        m.put(co + c.firstlineno, &7i32.to_le_bytes());
        if let crate::cpython::layout::CodeLocals::LocalsPlus {
            localsplusnames,
            localspluskinds,
        } = c.locals
        {
            m.put_u64(co + localsplusnames, 0x3200);
            m.put_u64(co + localspluskinds, 0x3200);
        }
        (m, l)
    }

    fn frame(m: &mut FakeMemory, l: &Layout, at: u64, previous: u64, code: u64) {
        let FrameModel::Interpreter(f) = l.frame else {
            unreachable!()
        };
        m.put(at, &[0u8; 80]);
        m.put_u64(at + f.previous, previous);
        m.put_u64(at + f.executable, code);
    }

    fn snapshot(m: FakeMemory, l: Layout) -> Snapshot {
        Snapshot::for_test(m, l)
    }

    #[test]
    fn a_code_object_decoded_before_is_used_again_while_its_fields_read_the_same() {
        let (mut m, l) = target();
        // Four code units of bytecode: a decode with every part read, which is kept.
        m.put_u64(0x4000 + l.tuple_object.ob_size, 4);
        let known = crate::cpython::KnownCodes::default();
        let decode = |m: &FakeMemory| {
            let mut s = snapshot(m.clone(), l.clone());
            s.known_codes = known.clone();
            let code = s.code(0x4000).unwrap();
            (code.name.clone(), code.firstlineno)
        };
        assert_eq!(decode(&m), ("f".to_string(), 7));
        // Its name's string rewritten in place (the same pointer): the earlier decode, not a
        // read of the string, shows it is used again.
        let mut renamed = m.clone();
        renamed.put(0x3000 + l.unicode_object.asciiobject_size, b"g");
        assert_eq!(decode(&renamed), ("f".to_string(), 7));
        // A field of the code object itself changed (another code object at its address):
        // decoded anew.
        let mut other = renamed.clone();
        other.put(0x4000 + l.code_object.firstlineno, &9i32.to_le_bytes());
        assert_eq!(decode(&other), ("g".to_string(), 9));
        // Its bytecode changed (another code object whose name and file were made at the
        // freed ones' addresses): decoded anew.
        let mut recompiled = other.clone();
        recompiled.put(0x3000 + l.unicode_object.asciiobject_size, b"h");
        let code = 0x4000 + l.code_object.co_code_adaptive.unwrap();
        recompiled.put(code, &[0x97, 0]);
        assert_eq!(decode(&recompiled), ("h".to_string(), 9));
        // Its bytecode unreadable: decoded, not kept (read again next time).
        let mut no_code = recompiled.clone();
        no_code.put_u64(0x4000 + l.tuple_object.ob_size, 0);
        no_code.put(0x3000 + l.unicode_object.asciiobject_size, b"i");
        assert_eq!(decode(&no_code), ("i".to_string(), 9));
        no_code.put(0x3000 + l.unicode_object.asciiobject_size, b"j");
        assert_eq!(decode(&no_code), ("j".to_string(), 9));
    }

    #[test]
    fn a_frame_pointing_to_itself_ends_the_walk_with_a_cycle() {
        let (mut m, l) = target();
        frame(&mut m, &l, 0x9000, 0x9100, 0x4000);
        frame(&mut m, &l, 0x9100, 0x9100, 0x4000);
        let walk = snapshot(m, l).walk_frames(0x9000);
        assert_eq!(walk.items.len(), 3);
        assert!(
            matches!(&walk.items[0], FrameItem::Python(p) if &*p.code.qualname == "f" && &*p.code.filename == "/m.py")
        );
        assert!(
            matches!(&walk.items[2], FrameItem::Unreadable { error, .. } if error.kind == ReadErrorKind::Cycle)
        );
        assert!(walk.truncated);
    }

    #[test]
    fn a_frame_of_zeros_is_a_truncation_not_the_end_of_the_stack() {
        let (mut m, l) = target();
        frame(&mut m, &l, 0x9000, 0x9100, 0x4000);
        frame(&mut m, &l, 0x9100, 0, 0);
        let walk = snapshot(m, l).walk_frames(0x9000);
        assert_eq!(walk.items.len(), 2);
        assert!(matches!(
            &walk.items[1],
            FrameItem::Unreadable { addr: 0x9100, error }
                if error.kind == ReadErrorKind::Corrupt("frame: all zeros (memory the core did not save?)")
        ));
        assert!(walk.truncated);
    }

    #[test]
    fn a_stack_deeper_than_the_cap_stops_there_and_says_so() {
        let (mut m, l) = target();
        frame(&mut m, &l, 0x9000, 0x9100, 0x4000);
        frame(&mut m, &l, 0x9100, 0x9200, 0x4000);
        frame(&mut m, &l, 0x9200, 0, 0x4000);
        let walk = snapshot(m, l).walk_frames_up_to(0x9000, 2);
        // The cap adds no item: `cut` names it and the first frame not walked.
        assert_eq!(walk.items.len(), 2);
        assert!(matches!(
            walk.cut,
            Some(ReadError {
                addr: 0x9200,
                kind: ReadErrorKind::Limit { max: 2, .. },
                ..
            })
        ));
        assert!(walk.truncated);
    }

    #[test]
    fn a_complete_stack_is_not_truncated() {
        let (mut m, l) = target();
        frame(&mut m, &l, 0x9000, 0x9100, 0x4000);
        frame(&mut m, &l, 0x9100, 0, 0x4000);
        let walk = snapshot(m, l).walk_frames(0x9000);
        assert_eq!(walk.items.len(), 2);
        assert!(!walk.truncated);
    }

    #[test]
    fn a_bad_code_pointer_costs_one_frame() {
        let (mut m, l) = target();
        frame(&mut m, &l, 0x9000, 0x9100, 0x4000);
        frame(&mut m, &l, 0x9100, 0x9200, 0x3000); // a str, not a code object
        frame(&mut m, &l, 0x9200, 0, 0x4000);
        let walk = snapshot(m, l).walk_frames(0x9000);
        assert_eq!(walk.items.len(), 3);
        assert!(matches!(
            &walk.items[1],
            FrameItem::Unreadable { addr: 0x9100, .. }
        ));
        assert!(matches!(&walk.items[2], FrameItem::Python(p) if p.entry));
    }

    #[test]
    fn an_unmapped_link_is_reported_not_followed() {
        let (mut m, l) = target();
        frame(&mut m, &l, 0x9000, 0xdead_0000, 0x4000);
        let walk = snapshot(m, l).walk_frames(0x9000);
        assert_eq!(walk.items.len(), 2);
        assert!(matches!(
            &walk.items[1],
            FrameItem::Unreadable {
                addr: 0xdead_0000,
                ..
            }
        ));
        assert!(walk.truncated);
    }

    /// Values of all ones, as a corrupt core holds them: the address arithmetic on them is a
    /// read error (an unreadable frame), never an overflow panic.
    #[test]
    fn all_ones_pointers_are_read_errors() {
        let (mut m, l) = target();
        frame(&mut m, &l, 0x9000, 0x9100, u64::MAX);
        frame(&mut m, &l, 0x9100, u64::MAX - 8, 0x4000);
        let walk = snapshot(m, l).walk_frames(0x9000);
        assert_eq!(walk.items.len(), 3, "{:?}", walk.items);
        assert!(matches!(
            &walk.items[0],
            FrameItem::Unreadable { addr: 0x9000, .. }
        ));
        assert!(matches!(&walk.items[1], FrameItem::Python(p) if &*p.code.qualname == "f"));
        assert!(matches!(
            &walk.items[2],
            FrameItem::Unreadable { addr, .. } if *addr == u64::MAX - 8
        ));
    }

    /// A field offset past the frame header (a corrupt `_Py_DebugOffsets` that got past its
    /// checks) reads as 0 from the header, never out of the buffer.
    #[test]
    fn header_fields_past_the_header_read_as_zero() {
        assert_eq!(header_word(&[1; 16], 8), 0x0101_0101_0101_0101);
        assert_eq!(header_word(&[1; 16], 9), 0);
        assert_eq!(header_word(&[1; 16], u64::MAX), 0);
    }
}

//! A task's coroutine await chain, from its coroutine down to the object it waits on.

use super::layout::{StackTop, YieldFrom};
use super::objects::{Class, Objects};
use crate::cpython::layout::FrameModel;
use crate::cpython::values::field;
use crate::cpython::FrameItem;
use crate::error::{ReadError, ReadErrorKind};
use crate::memory::addr_map::AddrSet;

/// Longest await chain we follow (CPython's remote debugger: `MAX_FRAME_CHAIN_DEPTH`).
pub const MAX_CHAIN: usize = 1536;
/// Deepest value stack we believe in.
const MAX_STACKTOP: i32 = 1 << 16;

/// What the innermost coroutine of a chain waits on.
#[derive(Clone, Debug)]
pub enum Leaf {
    /// The chain's coroutine is running: it waits on nothing.
    Running,
    /// A Future or a Task (through `FutureIter`, or the pure-Python `Future.__await__`).
    Awaits(u64),
    /// A plain generator that yielded to the loop (`asyncio.sleep(0)`'s `__sleep0`).
    Yield {
        gen: u64,
        function: String,
    },
    /// Anything else, by type name.
    Other {
        addr: u64,
        type_name: String,
    },
    NotStarted,
    /// The coroutine has finished (a task stopped mid-transition).
    Done,
    Error(ReadError),
}

#[derive(Clone, Debug)]
pub struct Chain {
    /// Innermost first.
    pub frames: Vec<FrameItem>,
    pub leaf: Leaf,
}

impl Objects<'_> {
    /// Follows `coro` through `await`s, async generators and `yield from` to its leaf.
    pub fn chain(&self, coro: u64) -> Chain {
        let mut frames = Vec::new();
        let mut seen = Seen::default();
        let mut obj = coro;
        let leaf = loop {
            if frames.len() >= MAX_CHAIN || !seen.insert(obj) {
                break Leaf::Error(ReadError::new(obj, 0, ReadErrorKind::Cycle));
            }
            let class = match self.class(obj) {
                Ok(c) => c,
                Err(e) => break Leaf::Error(e),
            };
            match class {
                Class::Coroutine | Class::AsyncGen | Class::Generator => {
                    match self.step(obj, class, &mut frames) {
                        Ok(next) => obj = next,
                        Err(Stop::Leaf(l)) => break l,
                        Err(Stop::Read(e)) => break Leaf::Error(e),
                    }
                }
                Class::AsyncGenAwait => {
                    match field(obj, self.lay.asend_gen).and_then(|a| self.ptr(a)) {
                        Ok(g) => obj = g,
                        Err(e) => break Leaf::Error(e),
                    }
                }
                Class::FutureIter => {
                    match field(obj, self.lay.future_iter_future).and_then(|a| self.ptr(a)) {
                        Ok(f) => break Leaf::Awaits(f),
                        Err(e) => break Leaf::Error(e),
                    }
                }
                Class::Future { .. } | Class::Task { .. } => break Leaf::Awaits(obj),
                _ => {
                    break Leaf::Other {
                        addr: obj,
                        type_name: self.type_name(obj),
                    }
                }
            }
        };
        // Innermost first, in a vector of their number: 100,000 chains kept in vectors grown
        // to twice their frames cost megabytes of memory touched for the first time.
        let frames = frames.drain(..).rev().collect();
        Chain { frames, leaf }
    }

    /// One generator-like object: records its frame and returns what it awaits, or why the
    /// chain ends here.
    fn step(&self, obj: u64, class: Class, frames: &mut Vec<FrameItem>) -> Result<u64, Stop> {
        let (g, st) = (&self.lay.gen, &self.lay.states);
        let state = self.snap.mem.read_u8(field(obj, g.frame_state)?)? as i8;
        if state >= st.first_done {
            return Err(Stop::Leaf(Leaf::Done));
        }
        let faddr = field(obj, g.iframe)?;
        let (frame, header) = match self.snap.interp_frame(faddr) {
            Ok(f) => f,
            Err(e) => {
                frames.push(FrameItem::Unreadable {
                    addr: faddr,
                    error: e,
                });
                return Err(Stop::Read(e));
            }
        };
        // Borrowed, not counted: threads decoding tasks together share the code's names.
        let is_future_await =
            frame.code.name == "__await__" && frame.code.qualname.ends_with("Future.__await__");
        frames.push(FrameItem::Python(frame));
        if state == st.executing {
            return Err(Stop::Leaf(Leaf::Running));
        }
        if state == st.created {
            return Err(Stop::Leaf(Leaf::NotStarted));
        }
        if let Some(yf) = self.yield_from(faddr, &header, state)? {
            return Ok(yf);
        }
        // Suspended at a plain `yield`.
        if class == Class::Generator {
            if is_future_await {
                // Lib/asyncio/futures.py `Future.__await__`: `yield self`; `self` is local 0.
                return Err(Stop::Leaf(Leaf::Awaits(self.local0(faddr)?)));
            }
            let function = match frames.last() {
                Some(FrameItem::Python(p)) => p.code.qualname.to_string(),
                _ => String::new(),
            };
            return Err(Stop::Leaf(Leaf::Yield { gen: obj, function }));
        }
        Err(Stop::Leaf(Leaf::Other {
            addr: obj,
            type_name: self.type_name(obj),
        }))
    }

    /// `_PyGen_yf`: the object a suspended generator frame delegates to, if any.
    fn yield_from(&self, faddr: u64, header: &[u8], state: i8) -> Result<Option<u64>, ReadError> {
        let FrameModel::Interpreter(f) = self.snap.layout.frame else {
            return Ok(None);
        };
        let field = |off: u64, len: usize| -> Result<&[u8], ReadError> {
            header
                .get(off as usize..(off as usize).saturating_add(len))
                .ok_or(ReadError::corrupt(faddr, "frame field outside the frame"))
        };
        let word = |off: u64| -> Result<u64, ReadError> {
            Ok(u64::from_le_bytes(
                field(off, 8)?.try_into().unwrap_or_default(),
            ))
        };
        let delegating = match self.lay.yield_from {
            YieldFrom::NextResume { opcodes } => {
                let next = self.snap.mem.read_u16(word(f.instr_ptr)?.wrapping_add(2))?;
                let (op, arg) = ((next & 0xff) as u8, next >> 8);
                opcodes.contains(&op) && arg >= 2
            }
            YieldFrom::State => self.lay.states.suspended_yield_from.contains(&Some(state)),
        };
        if !delegating {
            return Ok(None);
        }
        let base = faddr
            .checked_add(f.localsplus)
            .ok_or(ReadError::corrupt(faddr, "address overflow"))?;
        let slot = match self.lay.stack_top {
            StackTop::Depth { stacktop } => {
                let top = i32::from_le_bytes(field(stacktop, 4)?.try_into().unwrap_or_default());
                if !(1..=MAX_STACKTOP).contains(&top) {
                    return Err(ReadError::corrupt(faddr, "frame stack depth"));
                }
                base.wrapping_add((top as u64 - 1) * 8)
            }
            StackTop::Pointer {
                stackpointer,
                below,
            } => {
                let sp = word(stackpointer)?;
                let depth = sp.wrapping_sub(base) / 8;
                if sp < base || sp % 8 != 0 || depth < below || depth > MAX_STACKTOP as u64 {
                    return Err(ReadError::corrupt(faddr, "frame stack pointer"));
                }
                sp - below * 8
            }
        };
        let yf = self.ptr(slot)? & !f.tag_bits;
        Ok((yf != 0).then_some(yf))
    }

    /// `localsplus[0]` of an interpreter frame (`self` of a method).
    pub fn local0(&self, faddr: u64) -> Result<u64, ReadError> {
        match self.snap.layout.frame {
            // 3.14+: a `_PyStackRef`, whose low bits are tags.
            FrameModel::Interpreter(f) => Ok(self.ptr(field(faddr, f.localsplus)?)? & !f.tag_bits),
            FrameModel::FrameObject { f_localsplus, .. } => self.ptr(field(faddr, f_localsplus)?),
        }
    }
}

/// Objects a chain went through so far: in an array while it is short (most chains are a few
/// objects; a set per chain of 100,000 tasks was an allocation and hashing each), then a set.
#[derive(Default)]
struct Seen {
    short: [u64; SHORT_CHAIN],
    len: usize,
    more: AddrSet,
}

/// Objects of a chain kept in [`Seen`]'s array.
const SHORT_CHAIN: usize = 16;

impl Seen {
    /// False when `obj` was seen before.
    fn insert(&mut self, obj: u64) -> bool {
        if self.short[..self.len].contains(&obj) {
            return false;
        }
        if self.len < SHORT_CHAIN {
            self.short[self.len] = obj;
            self.len += 1;
            return true;
        }
        self.more.insert(obj)
    }
}

enum Stop {
    Leaf(Leaf),
    Read(ReadError),
}

impl From<ReadError> for Stop {
    fn from(e: ReadError) -> Self {
        Stop::Read(e)
    }
}

/// The frame a task's coroutine runs in, when the coroutine is a real coroutine.
pub fn top_frame(objects: &Objects, coro: u64) -> Option<u64> {
    matches!(
        objects.class(coro),
        Ok(Class::Coroutine | Class::AsyncGen | Class::Generator)
    )
    .then(|| coro.checked_add(objects.lay.gen.iframe))
    .flatten()
}

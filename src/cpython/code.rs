//! Code objects: names, file, and the line table that maps an instruction to its line.

use super::layout::WithEntry;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::known_codes::Fingerprint;
use super::layout::{CodeLocals, LineTable};
use super::snapshot::Snapshot;
use super::values::{field, Code, PyFrame};
use crate::error::ReadError;
use crate::memory::addr_map::AddrMap;

/// Cap on a line table (bytes) and on the number of local names.
const MAX_LINETABLE_BYTES: u64 = 1 << 20;
const MAX_LOCALS: u64 = 1 << 16;
/// Most lines remembered per code object (each suspended coroutine of 100,000 tasks asks the
/// line of the same few instructions).
const MAX_LINE_MEMO: usize = 4096;
/// A code object longer than this (in 2-byte code units) is not one.
const MAX_CODE_UNITS: u64 = 1 << 24;
/// A value stack larger than this (slots) is not one.
const MAX_STACK_SLOTS: u64 = 1 << 20;
/// Cap on an exception table (bytes).
const MAX_EXCEPTION_TABLE_BYTES: u64 = 1 << 20;

impl Snapshot {
    pub fn code(&self, addr: u64) -> Result<Arc<Code>, ReadError> {
        if let Some(c) = self.code_table.get(addr) {
            return Ok(c.clone());
        }
        if let Some(c) = self
            .codes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&addr)
        {
            return Ok(c.clone());
        }
        let known = self.known_code(addr);
        let c = match known {
            Some((_, Some(c))) => c,
            Some((fingerprint, None)) => {
                let c = Arc::new(self.read_code(addr)?);
                // A part that could not be read this time is not kept for the next.
                if c.stacksize.is_some() && c.bytecode.is_some() {
                    self.keep_code(addr, fingerprint, c.clone());
                }
                c
            }
            None => Arc::new(self.read_code(addr)?),
        };
        if let Some(kept) = self.code_table.insert(addr, c.clone()) {
            return Ok(kept.clone());
        }
        self.codes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(addr, c.clone());
        Ok(c)
    }

    fn read_code(&self, addr: u64) -> Result<Code, ReadError> {
        let co = &self.layout.code_object;
        if addr == 0 {
            return Err(ReadError::corrupt(addr, "NULL code object"));
        }
        let t = self.type_of(addr)?;
        if t.name != "code" {
            return Err(ReadError::corrupt(addr, "code object (wrong type)"));
        }
        let ptr = |off: u64| self.mem.read_ptr(field(addr, off)?);
        let name = self.read_name(ptr(co.name)?)?;
        let qualname = match co.qualname {
            Some(off) => self.read_name(ptr(off)?)?,
            None => name.clone(),
        };
        let filename = self.read_name(ptr(co.filename)?)?;
        let firstlineno = self.mem.read_i32(field(addr, co.firstlineno)?)?.max(0) as u32;
        let (linetable, _) = self.read_bytes(ptr(co.linetable)?, MAX_LINETABLE_BYTES)?;
        let argcount = self.mem.read_i32(field(addr, co.argcount)?)?.max(0) as u32
            + match co.kwonlyargcount {
                Some(off) => self.mem.read_i32(field(addr, off)?)?.max(0) as u32,
                None => 0,
            };
        let flags = self.mem.read_u32(field(addr, co.flags)?)?;
        let stacksize = field(addr, co.stacksize)
            .and_then(|a| self.mem.read_i32(a))
            .ok()
            .and_then(|n| u32::try_from(n).ok())
            .filter(|n| u64::from(*n) <= MAX_STACK_SLOTS);
        let mut locals = Vec::new();
        match co.locals {
            CodeLocals::LocalsPlus {
                localsplusnames,
                localspluskinds,
            } => {
                let (names, _) = self.read_seq(ptr(localsplusnames)?, false, MAX_LOCALS)?;
                let (kinds, _) = self.read_bytes(ptr(localspluskinds)?, MAX_LOCALS)?;
                for (i, n) in names.iter().enumerate() {
                    locals.push((self.read_name(*n)?, kinds.get(i).copied().unwrap_or(0)));
                }
            }
            CodeLocals::Tuples310 {
                varnames,
                cellvars,
                freevars,
                ..
            } => {
                use super::layout::localkind::{CELL, FREE, LOCAL};
                for (off, kind) in [(varnames, LOCAL), (cellvars, CELL), (freevars, FREE)] {
                    let (names, _) = self.read_seq(ptr(off)?, false, MAX_LOCALS)?;
                    for n in names {
                        locals.push((self.read_name(n)?, kind));
                    }
                }
            }
        }
        let bytecode = self.bytecode_of(addr).ok();
        Ok(Code {
            addr,
            name,
            qualname: qualname.into(),
            filename: filename.into(),
            firstlineno,
            linetable,
            line_table: co.line_table,
            code_start: co
                .co_code_adaptive
                .map(|o| field(addr, o))
                .transpose()?
                .unwrap_or(0),
            bytecode,
            argcount,
            flags,
            stacksize,
            locals,
            line_memo: Arc::default(),
        })
    }
}

impl Snapshot {
    /// Where the code object at `addr` keeps its bytecode, and its length in code units.
    fn bytecode_of(&self, addr: u64) -> Result<(u64, u64), ReadError> {
        let co = &self.layout.code_object;
        let (start, units) = match (co.co_code_adaptive, co.co_code) {
            // Inline: the code object's own `ob_size` counts its code units
            // (Objects/codeobject.c `_PyCode_NBYTES` = Py_SIZE(co) * 2).
            (Some(off), _) => (
                field(addr, off)?,
                self.mem
                    .read_u64(field(addr, self.layout.tuple_object.ob_size)?)?,
            ),
            (None, Some(off)) => {
                let b = self.mem.read_ptr(field(addr, off)?)?;
                let n = self
                    .mem
                    .read_u64(field(b, self.layout.bytes_object.ob_size)?)?;
                (field(b, self.layout.bytes_object.ob_sval)?, n / 2)
            }
            (None, None) => return Err(ReadError::corrupt(addr, "code object: no bytecode")),
        };
        if units == 0 || units > MAX_CODE_UNITS {
            return Err(ReadError::corrupt(addr, "code object: bytecode size"));
        }
        Ok((start, units))
    }

    /// The opcode of the instruction at `lasti` (code units) of `code`; None when it is
    /// outside the bytecode or cannot be read. 3.11+ reads the adaptive bytecode: a
    /// specialized or instrumented instruction shows its own opcode there.
    pub fn opcode_at(&self, code: &Code, lasti: u32) -> Option<u8> {
        let (start, units) = code.bytecode?;
        if u64::from(lasti) >= units {
            return None;
        }
        let mut b = [0u8; 1];
        self.mem
            .read_into(start.checked_add(u64::from(lasti) * 2)?, &mut b)
            .ok()?;
        Some(b[0])
    }
}

impl Snapshot {
    /// The stack depth of the exception-table entry (3.11+ `co_exceptiontable`) that covers
    /// the instruction at `lasti` (code units): the number of value-stack items its handler
    /// keeps. None when no entry covers it or the table cannot be read.
    pub fn handler_depth(&self, code: &Code, lasti: u32) -> Option<u64> {
        let off = self.layout.code_object.exceptiontable?;
        let table = self.mem.read_ptr(field(code.addr, off).ok()?).ok()?;
        let (t, _) = self.read_bytes(table, MAX_EXCEPTION_TABLE_BYTES).ok()?;
        exception_depth(&t, u64::from(lasti))
    }
}

/// An exception-table entry: the code units `start..end` jump to `target` with `depth` items
/// kept on the value stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ExceptionEntry {
    start: u64,
    end: u64,
    target: u64,
    depth: u64,
}

/// Objects/exception_handling_notes.txt (3.11 to 3.15): entries of four varints (start,
/// length, target, depth << 1 | lasti), each varint big-endian in 6-bit groups with 0x40 as
/// "more", the first byte of an entry marked with 0x80; offsets in code units. Entries do not
/// overlap. None for a corrupt table.
fn exception_entries(t: &[u8]) -> Option<Vec<ExceptionEntry>> {
    let mut i = 0usize;
    let varint = |i: &mut usize| -> Option<u64> {
        let mut b = *t.get(*i)?;
        *i += 1;
        let mut v = u64::from(b & 63);
        while b & 64 != 0 {
            b = *t.get(*i)?;
            *i += 1;
            v = v.checked_shl(6)? | u64::from(b & 63);
            if v >> 58 != 0 {
                return None;
            }
        }
        Some(v)
    };
    let mut out = Vec::new();
    while i < t.len() {
        if t[i] & 0x80 == 0 {
            return None; // not at an entry start: corrupt table
        }
        let start = varint(&mut i)?;
        let length = varint(&mut i)?;
        let target = varint(&mut i)?;
        let depth_lasti = varint(&mut i)?;
        out.push(ExceptionEntry {
            start,
            end: start.checked_add(length)?,
            target,
            depth: depth_lasti >> 1,
        });
    }
    Some(out)
}

/// The depth of the entry covering `at`.
fn exception_depth(t: &[u8], at: u64) -> Option<u64> {
    exception_entries(t)?
        .into_iter()
        .find(|e| e.start <= at && at < e.end)
        .map(|e| e.depth)
}

/// Code units of 3.10 bytecode read to find a `SETUP_WITH`.
const MAX_WITH_SCAN_UNITS: u64 = 1 << 16;

impl Snapshot {
    fn exception_table(&self, code: &Code) -> Option<Vec<ExceptionEntry>> {
        let off = self.layout.code_object.exceptiontable?;
        let table = self.mem.read_ptr(field(code.addr, off).ok()?).ok()?;
        let (t, _) = self.read_bytes(table, MAX_EXCEPTION_TABLE_BYTES).ok()?;
        exception_entries(&t)
    }

    /// The line of the `with` statement whose block keeps its `__exit__` in value-stack slot
    /// `slot` of `frame` (a block the frame is inside): where the lock it holds was taken.
    /// None where the code does not show it.
    ///
    /// - 3.11+: the block's body is covered by exception-table entries of depth `slot` +
    ///   `exit_depth` whose handler is the with's cleanup (`PUSH_EXC_INFO`,
    ///   `WITH_EXCEPT_START`; a `try` at the same depth has another handler). Of those blocks
    ///   whose entries span the current instruction, the one whose first entry starts last is
    ///   the innermost open one at that depth (None: no `with` block keeps a `__exit__` there
    ///   now, so the slot is stale); its first entry starts right after the instruction
    ///   that entered it (`BEFORE_WITH`, 3.14+'s `CALL 0` and its caches), whose line is the
    ///   statement's.
    /// - 3.10: the frame's block stack holds the block `SETUP_WITH` set up at level `slot` +
    ///   1; its handler is `SETUP_WITH`'s jump target, which finds the instruction.
    pub fn with_line(&self, frame: &PyFrame, slot: usize) -> Option<u32> {
        if let WithEntry::BlockStack { .. } = self.layout.with_entry {
            return self.with_line_310(frame, slot);
        }
        let cleanup = self.layout.with_cleanup?;
        let lasti = u64::from(frame.lasti?);
        let depth = (slot as u64).checked_add(cleanup.exit_depth)?;
        let entries = self.exception_table(&frame.code)?;
        // (target, first start, last end) of each handler's entries at that depth.
        let mut targets: Vec<(u64, u64, u64)> = Vec::new();
        for e in entries.iter().filter(|e| e.depth == depth) {
            match targets.iter_mut().find(|t| t.0 == e.target) {
                Some(t) => {
                    t.1 = t.1.min(e.start);
                    t.2 = t.2.max(e.end);
                }
                None => targets.push((e.target, e.start, e.end)),
            }
        }
        let is_cleanup = |target: u64| {
            let op = |k: u64| {
                let at = u32::try_from(target.checked_add(k)?).ok()?;
                self.opcode_at(&frame.code, at)
            };
            op(0) == Some(cleanup.push_exc_info) && op(1) == Some(cleanup.with_except_start)
        };
        // The block must still be open at the current instruction: a `__exit__` left above
        // the live top by a block that has ended (or never existed at that depth) has none.
        let first = targets
            .into_iter()
            .filter(|&(t, first, end)| first <= lasti && lasti < end && first > 0 && is_cleanup(t))
            .map(|(_, first, _)| first)
            .max()?;
        frame.code.line_at(first as i64 - 1)
    }

    /// How many of `frame`'s value-stack slots, from the bottom, belong to the blocks its
    /// current instruction is inside (a `with` block's `__exit__`, a `try`'s saved items):
    /// the callable of a call that instruction makes lies above them. 3.11+: the depth of
    /// the exception-table entry that covers the instruction (0 where none does); 3.10: the
    /// top block's `b_level` (Python/ceval.c `PyFrame_BlockSetup(..., STACK_LEVEL())`; 0
    /// with no block). None where it cannot be read.
    pub fn block_depth(&self, frame: &PyFrame) -> Option<u64> {
        let WithEntry::BlockStack {
            f_iblock,
            f_blockstack,
            tryblock_size,
            b_level,
            ..
        } = self.layout.with_entry
        else {
            let table = self.layout.code_object.exceptiontable?;
            let t = self
                .mem
                .read_ptr(field(frame.code.addr, table).ok()?)
                .ok()?;
            let (t, _) = self.read_bytes(t, MAX_EXCEPTION_TABLE_BYTES).ok()?;
            return Some(exception_depth(&t, u64::from(frame.lasti?)).unwrap_or(0));
        };
        let iblock = self.mem.read_i32(frame.addr.checked_add(f_iblock)?).ok()?;
        match iblock {
            0 => Some(0),
            // CO_MAXBLOCKS (Include/cpython/code.h 3.10).
            1..=20 => {
                let at = frame
                    .addr
                    .checked_add(f_blockstack)?
                    .checked_add((iblock as u64 - 1).checked_mul(tryblock_size)?)?
                    .checked_add(b_level)?;
                u64::try_from(self.mem.read_i32(at).ok()?).ok()
            }
            _ => None,
        }
    }

    fn with_line_310(&self, frame: &PyFrame, slot: usize) -> Option<u32> {
        let WithEntry::BlockStack {
            opcode,
            extended_arg,
            f_iblock,
            f_blockstack,
            tryblock_size,
            b_level,
            b_handler,
        } = self.layout.with_entry
        else {
            return None;
        };
        let level = i32::try_from(slot.checked_add(1)?).ok()?;
        let iblock = self.mem.read_i32(frame.addr.checked_add(f_iblock)?).ok()?;
        // CO_MAXBLOCKS (Include/cpython/code.h 3.10).
        if !(0..=20).contains(&iblock) {
            return None;
        }
        let (start, units) = frame.code.bytecode?;
        for b in (0..iblock as u64).rev() {
            let block = frame
                .addr
                .checked_add(f_blockstack)?
                .checked_add(b.checked_mul(tryblock_size)?)?;
            if self.mem.read_i32(block.checked_add(b_level)?).ok()? != level {
                continue;
            }
            let handler =
                u64::try_from(self.mem.read_i32(block.checked_add(b_handler)?).ok()?).ok()?;
            let n = handler.min(units).min(MAX_WITH_SCAN_UNITS);
            let code = self.mem.read_vec(start, n * 2, n * 2).ok()?;
            let mut arg: u64 = 0;
            for (i, unit) in code.chunks_exact(2).enumerate() {
                let full = arg << 8 | u64::from(unit[1]);
                if unit[0] == extended_arg {
                    arg = full;
                    continue;
                }
                arg = 0;
                if unit[0] == opcode && (i as u64 + 1).checked_add(full) == Some(handler) {
                    return frame.code.line_at(i as i64);
                }
            }
        }
        None
    }
}

impl Code {
    /// The line of the instruction at `lasti` (in code units; negative before the first).
    pub fn line_at(&self, lasti: i64) -> Option<u32> {
        if lasti < 0 {
            return Some(self.firstlineno);
        }
        let at = lasti as u64;
        // The last line asked, when it is this instruction's.
        let packed = |line: Option<u32>| {
            let line = match line {
                Some(l) => u64::from(l.checked_add(1)?),
                None => 0,
            };
            Some((at.checked_add(1).filter(|&a| a <= u32::MAX as u64)? << 32) | line)
        };
        let last = self.line_memo.last.load(Ordering::Relaxed);
        if last >> 32 == at + 1 && at < u32::MAX as u64 {
            return (last as u32).checked_sub(1);
        }
        let memo = |m: &mut AddrMap<Option<u32>>| m.get(&at).copied();
        let known = memo(
            &mut self
                .line_memo
                .lines
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        );
        let line = known.unwrap_or_else(|| {
            let line = match self.line_table {
                LineTable::Pairs310 => line_310(&self.linetable, self.firstlineno, at * 2),
                LineTable::Locations311 => line_311(&self.linetable, self.firstlineno, at),
            };
            let mut m = self
                .line_memo
                .lines
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if m.len() < MAX_LINE_MEMO {
                m.insert(at, line);
            }
            line
        });
        if let Some(p) = packed(line) {
            self.line_memo.last.store(p, Ordering::Relaxed);
        }
        line
    }

    /// The line of the instruction `instr_ptr` points at (3.11+ `prev_instr`/`instr_ptr`):
    /// `_PyInterpreterFrame_LASTI` counts code units from the start of the bytecode.
    pub fn line_at_ptr(&self, instr_ptr: u64) -> Option<u32> {
        self.line_at((instr_ptr as i64).wrapping_sub(self.code_start as i64) / 2)
    }

    /// The index in code units of the instruction `instr_ptr` points at (3.11+), None when
    /// it points before the first one (3.11, 3.12's `prev_instr` of a frame not yet started),
    /// between two code units or past the bytecode.
    pub fn lasti_at_ptr(&self, instr_ptr: u64) -> Option<u32> {
        let off = instr_ptr.checked_sub(self.code_start)?;
        if off % 2 != 0 {
            return None;
        }
        let units = self.bytecode.map_or(MAX_CODE_UNITS, |b| b.1);
        (off / 2 < units).then(|| u32::try_from(off / 2).ok())?
    }

    /// Number of arguments (positional and keyword-only, plus *args and **kwargs).
    pub fn total_args(&self) -> usize {
        use super::layout::coflags::{VARARGS, VARKEYWORDS};
        self.argcount as usize
            + (self.flags & VARARGS != 0) as usize
            + (self.flags & VARKEYWORDS != 0) as usize
    }
}

/// 3.10 `co_linetable` (Objects/lnotab_notes.txt): pairs (byte delta, signed line delta); a line
/// delta of -128 means "no line"; `addr` is in bytes.
fn line_310(t: &[u8], first: u32, addr: u64) -> Option<u32> {
    let mut line = first as i64;
    let mut end: u64 = 0;
    for pair in t.chunks_exact(2) {
        let start = end;
        end += pair[0] as u64;
        let ldelta = pair[1] as i8;
        let this = if ldelta == -128 {
            None
        } else {
            line += ldelta as i64;
            Some(line)
        };
        if start <= addr && addr < end {
            return this.and_then(|l| u32::try_from(l).ok());
        }
    }
    None
}

/// 3.11+ location table (Objects/locations.md); `addr` is in code units.
fn line_311(t: &[u8], first: u32, addr: u64) -> Option<u32> {
    let mut i = 0usize;
    let mut line = first as i64;
    let mut start: u64 = 0;
    let varint = |i: &mut usize| -> Option<u64> {
        let mut v: u64 = 0;
        let mut shift = 0;
        loop {
            let b = *t.get(*i)?;
            *i += 1;
            v |= ((b & 63) as u64) << shift;
            shift += 6;
            if b & 64 == 0 || shift > 60 {
                return Some(v);
            }
        }
    };
    let svarint = |i: &mut usize| -> Option<i64> {
        let v = varint(i)?;
        Some(if v & 1 == 1 {
            -((v >> 1) as i64)
        } else {
            (v >> 1) as i64
        })
    };
    while i < t.len() {
        let b = t[i];
        if b & 0x80 == 0 {
            return None; // not at an entry start: corrupt table
        }
        i += 1;
        let code = (b >> 3) & 15;
        let len = (b & 7) as u64 + 1;
        let this = match code {
            15 => None,
            // Deltas come from the target: saturate rather than overflow.
            14 => {
                line = line.saturating_add(svarint(&mut i)?);
                varint(&mut i)?;
                varint(&mut i)?;
                varint(&mut i)?;
                Some(line)
            }
            13 => {
                line = line.saturating_add(svarint(&mut i)?);
                Some(line)
            }
            10..=12 => {
                line += (code - 10) as i64;
                i += 2;
                Some(line)
            }
            _ => {
                i += 1;
                Some(line)
            }
        };
        if start <= addr && addr < start + len {
            return this.and_then(|l| u32::try_from(l).ok());
        }
        start += len;
    }
    None
}

/// The most bytes of a code object [`Snapshot::fingerprint`] reads (3.10 to 3.15: its fields
/// end before about 250 bytes in).
const MAX_FINGERPRINT_BYTES: u64 = 1024;

/// Code objects decoded at earlier stops ([`super::KnownCodes`]).
impl Snapshot {
    /// The code object at `addr` as decoded at an earlier read, where its fields read the same.
    fn known_code(&self, addr: u64) -> Option<(Fingerprint, Option<Arc<Code>>)> {
        let now = self.fingerprint(addr).ok()?;
        let code = self.known_codes.get(addr, &now);
        Some((now, code))
    }

    fn keep_code(&self, addr: u64, fingerprint: Fingerprint, code: Arc<Code>) {
        self.known_codes.put(addr, fingerprint, code);
    }

    /// The fields of the code object at `addr` that its decode reads (`read_code`).
    fn fingerprint(&self, addr: u64) -> Result<Fingerprint, ReadError> {
        let co = &self.layout.code_object;
        // One read of the code object up to its last field used (every one lies in its first
        // few hundred bytes); each field taken from it.
        let last = [
            Some(self.layout.pyobject.ob_type),
            Some(co.name),
            Some(co.filename),
            Some(co.linetable),
            co.qualname,
            co.co_code,
            co.co_code_adaptive,
            Some(self.layout.tuple_object.ob_size),
            Some(co.firstlineno),
            Some(co.argcount),
            Some(co.flags),
            Some(co.stacksize),
            co.kwonlyargcount,
        ]
        .into_iter()
        .flatten()
        .chain(match co.locals {
            CodeLocals::LocalsPlus {
                localsplusnames,
                localspluskinds,
            } => vec![localsplusnames, localspluskinds],
            CodeLocals::Tuples310 {
                varnames,
                cellvars,
                freevars,
                ..
            } => vec![varnames, cellvars, freevars],
        })
        .max()
        .unwrap_or(0);
        let head = self.mem.read_vec(addr, last + 8, MAX_FINGERPRINT_BYTES)?;
        // Little-endian, `n` bytes at `off` of the head (all of them were read).
        let field_at = |off: u64, n: usize| -> Result<u64, ReadError> {
            let at = off as usize;
            let b = head
                .get(at..at + n)
                .ok_or(ReadError::corrupt(addr, "code object: field past its head"))?;
            Ok(b.iter()
                .rev()
                .fold(0, |v, byte| (v << 8) | u64::from(*byte)))
        };
        let word = |off: u64| field_at(off, 8);
        let int = |off: u64| field_at(off, 4);
        let mut out = vec![
            word(self.layout.pyobject.ob_type)?,
            word(co.name)?,
            word(co.filename)?,
            word(co.linetable)?,
            int(co.firstlineno)?,
            int(co.argcount)?,
            int(co.flags)?,
            int(co.stacksize)?,
        ];
        for off in [co.qualname, co.co_code].into_iter().flatten() {
            out.push(word(off)?);
        }
        if let Some(off) = co.kwonlyargcount {
            out.push(int(off)?);
        }
        if let Some(off) = co.co_code_adaptive {
            // The inline bytecode's length (`bytecode_of`), and its first code units: a code
            // object made at a freed one's address may point at new objects made at the
            // freed ones' addresses too (a program that compiles in a loop), but its code
            // differs. Specializing the first instruction costs one decode more.
            out.push(word(self.layout.tuple_object.ob_size)?);
            out.push(word(off)?);
        }
        match co.locals {
            CodeLocals::LocalsPlus {
                localsplusnames,
                localspluskinds,
            } => out.extend([word(localsplusnames)?, word(localspluskinds)?]),
            CodeLocals::Tuples310 {
                varnames,
                cellvars,
                freevars,
                ..
            } => out.extend([word(varnames)?, word(cellvars)?, word(freevars)?]),
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn location_table_forms() {
        // 2 units one-line form (code 11: +1 line), 1 unit no-column (code 13, +3),
        // 1 unit "no location" (15), 1 unit long form (14, -2).
        let t = [
            0x80 | (11 << 3) | 1,
            5,
            9,
            0x80 | (13 << 3),
            6,
            0x80 | (15 << 3),
            0x80 | (14 << 3),
            5,
            0,
            1,
            1,
        ];
        assert_eq!(line_311(&t, 10, 0), Some(11));
        assert_eq!(line_311(&t, 10, 1), Some(11));
        assert_eq!(line_311(&t, 10, 2), Some(14));
        assert_eq!(line_311(&t, 10, 3), None);
        assert_eq!(line_311(&t, 10, 4), Some(12));
        assert_eq!(line_311(&t, 10, 5), None);
    }
    #[test]
    fn bad_instruction_pointers_have_no_instruction() {
        let code = Code {
            addr: 0x1000,
            name: "f".into(),
            qualname: "f".into(),
            filename: "/m.py".into(),
            firstlineno: 1,
            linetable: Vec::new(),
            line_table: LineTable::Locations311,
            code_start: 0x10c0,
            bytecode: Some((0x10c0, 4)),
            argcount: 0,
            flags: 0,
            stacksize: Some(2),
            locals: Vec::new(),
            line_memo: Arc::default(),
        };
        assert_eq!(code.lasti_at_ptr(0x10c0), Some(0));
        assert_eq!(code.lasti_at_ptr(0x10c6), Some(3));
        // Before the first unit (a frame not started), odd, past the end, all ones.
        for bad in [0x10be, 0x10c1, 0x10c8, 0, u64::MAX] {
            assert_eq!(code.lasti_at_ptr(bad), None, "{bad:#x}");
        }
    }

    #[test]
    fn exception_table_entries() {
        // (start 2, length 3, target 20, depth 1 with lasti); (start 70 (two bytes: 1, 6),
        // length 1, target 9, depth 4).
        let t = [0x80 | 2, 3, 20, 3, 0x80 | 0x40 | 1, 6, 1, 9, 8];
        assert_eq!(exception_depth(&t, 1), None);
        assert_eq!(exception_depth(&t, 2), Some(1));
        assert_eq!(exception_depth(&t, 4), Some(1));
        assert_eq!(exception_depth(&t, 5), None);
        assert_eq!(exception_depth(&t, 70), Some(4));
        // Truncated, unmarked or endless varints are no answer, never a panic.
        assert_eq!(exception_depth(&t[..6], 70), None);
        assert_eq!(exception_depth(&[2, 3, 20, 3], 2), None);
        assert_eq!(exception_depth(&[0x80 | 0x40; 64], 2), None);
    }

    #[test]
    fn pairs_310() {
        // 4 bytes at +1, 0 bytes +2 (empty), 6 bytes +0, 2 bytes no line
        let t = [4, 1, 0, 2, 6, 0, 2, 0x80];
        assert_eq!(line_310(&t, 1, 0), Some(2));
        assert_eq!(line_310(&t, 1, 3), Some(2));
        assert_eq!(line_310(&t, 1, 4), Some(4));
        assert_eq!(line_310(&t, 1, 9), Some(4));
        assert_eq!(line_310(&t, 1, 10), None);
    }
}

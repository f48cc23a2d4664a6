//! Code objects decoded at earlier reads of a live process, kept for the next: decoding one
//! reads its type, names, file name, line table and local names, each on its own page, and a
//! sampler meets the same few code objects at every sample (a sixth of `record`'s time).
//!
//! A code object is immutable in every field the decode uses, but it may be freed and another
//! made at its address. A kept decode is used again only where the code object's own fields
//! that the decode used (its type, and the pointers and counts of [`CodeObject`]) read the
//! same now: a new code object at that address would have to point at the same name, file
//! name and line table objects, which the old one held references to until it was freed.

use std::sync::{Arc, Mutex};

use super::layout::{CodeLocals, CodeObject};
use super::snapshot::Snapshot;
use super::values::{field, Code};
use crate::error::ReadError;
use crate::memory::addr_map::AddrMap;

/// Code objects kept at most: a program's running code, not every one a heap walk meets.
const MAX_KNOWN: usize = 4096;

/// What a code object's own fields read: the decode is good while they read the same.
type Fingerprint = Vec<u64>;

/// A decode and the fields it was made from.
type Known = (Fingerprint, Arc<Code>);

/// Decoded code objects by address.
#[derive(Clone, Default)]
pub struct KnownCodes(Arc<Mutex<AddrMap<Known>>>);

impl KnownCodes {
    fn get(&self, addr: u64, now: &Fingerprint) -> Option<Arc<Code>> {
        let map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.get(&addr)
            .filter(|(was, _)| was == now)
            .map(|(_, code)| code.clone())
    }

    fn put(&self, addr: u64, fingerprint: Fingerprint, code: Arc<Code>) {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() < MAX_KNOWN || map.contains_key(&addr) {
            map.insert(addr, (fingerprint, code));
        }
    }
}

/// Kept codes never tell two stops apart (as [`super::KeyHints`]).
impl PartialEq for KnownCodes {
    fn eq(&self, _: &KnownCodes) -> bool {
        true
    }
}

impl Eq for KnownCodes {}

impl std::fmt::Debug for KnownCodes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.0.lock().map_or(0, |m| m.len());
        write!(f, "KnownCodes({n})")
    }
}

impl Snapshot {
    /// The code object at `addr` as decoded at an earlier read, where its fields read the same.
    pub(super) fn known_code(&self, addr: u64) -> Option<(Fingerprint, Option<Arc<Code>>)> {
        let now = self.fingerprint(addr).ok()?;
        let code = self.known_codes.get(addr, &now);
        Some((now, code))
    }

    pub(super) fn keep_code(&self, addr: u64, fingerprint: Fingerprint, code: Arc<Code>) {
        self.known_codes.put(addr, fingerprint, code);
    }

    /// The fields of the code object at `addr` that its decode reads (`read_code`).
    fn fingerprint(&self, addr: u64) -> Result<Fingerprint, ReadError> {
        let co: &CodeObject = &self.layout.code_object;
        let word = |off: u64| self.mem.read_u64(field(addr, off)?);
        let int = |off: u64| Ok::<_, ReadError>(u64::from(self.mem.read_u32(field(addr, off)?)?));
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
        if co.co_code_adaptive.is_some() {
            // The inline bytecode's length (`bytecode_of`).
            out.push(word(self.layout.tuple_object.ob_size)?);
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

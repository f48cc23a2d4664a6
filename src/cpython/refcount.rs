//! An object's reference count, as `Py_REFCNT` reads it (Include/object.h, 3.10 to 3.15):
//!
//! - default builds: `ob_refcnt`, the header's first word (3.12+ immortal objects carry a
//!   count of 2^32 or more, which no caller compares with a count it made);
//! - free-threaded builds (3.13+): `ob_ref_local` (a `uint32_t` at offset 12) plus
//!   `ob_ref_shared` (a `Py_ssize_t` at 16) shifted right by `_Py_REF_SHARED_SHIFT` (2); a
//!   negative shared count is a merged or queued object, whose count is not settled.

use super::values::field;
use super::Snapshot;
use crate::error::ReadError;

const OB_REF_LOCAL: u64 = 12;
const OB_REF_SHARED: u64 = 16;
const REF_SHARED_SHIFT: u32 = 2;

impl Snapshot {
    /// `Py_REFCNT(obj)`; an error where the count is negative or not settled.
    pub fn refcount(&self, obj: u64) -> Result<u64, ReadError> {
        if !self.layout.free_threaded {
            let n = self.mem.read_i64(obj)?;
            return u64::try_from(n).map_err(|_| ReadError::corrupt(obj, "ob_refcnt"));
        }
        let local = self.mem.read_u32(field(obj, OB_REF_LOCAL)?)?;
        let shared = self.mem.read_i64(field(obj, OB_REF_SHARED)?)?;
        if shared < 0 {
            return Err(ReadError::corrupt(obj, "ob_ref_shared: merged or queued"));
        }
        Ok(u64::from(local) + (shared as u64 >> REF_SHARED_SHIFT))
    }
}

//! A thread's LWP from its `pthread_t` (CPython's `PyThreadState.thread_id`), read from
//! memory: glibc describes `struct pthread`'s `tid` field for libthread_db in the exported
//! `_thread_db_pthread_tid` (nptl/structs.def, `DB_STRUCT_FIELD (pthread, tid)`: three
//! `uint32_t`s, the field's size in bits, its count and its offset; exported from libc.so.6
//! since glibc 2.34). 3.10 records no LWP in its thread states; this names its threads.

use crate::binary::ElfInfo;
use crate::cpython::values::field;
use crate::memory::Memory;
use crate::target::Target;

const SYMBOL: &str = "_thread_db_pthread_tid";
/// `struct pthread` is a few KiB; an offset past this is not glibc's.
const MAX_TID_OFFSET: u64 = 1 << 16;

/// The offset of `tid` in glibc's `struct pthread`, from the target's libc.
pub fn tid_offset(target: &Target) -> Option<u64> {
    let libc = target
        .modules()
        .into_iter()
        .find(|m| m.file_name().starts_with("libc.so") || m.file_name().starts_with("libc-"))?;
    let info = ElfInfo::load(&target.real_path(&libc.path).ok()?, &[SYMBOL]).ok()?;
    let addr = libc
        .base
        .wrapping_sub(info.first_vaddr)
        .wrapping_add(*info.symbols.get(SYMBOL)?);
    let mut desc = [0u8; 12];
    target.mem.read_into(addr, &mut desc).ok()?;
    let word = |i: usize| u32::from_le_bytes([desc[i], desc[i + 1], desc[i + 2], desc[i + 3]]);
    let (bits, count, offset) = (word(0), word(4), word(8) as u64);
    (bits == 32 && count == 1 && offset < MAX_TID_OFFSET).then_some(offset)
}

/// The LWP of the thread whose `pthread_t` is `thread`, if it reads as one.
pub fn lwp(mem: &dyn Memory, thread: u64, offset: u64) -> Option<u64> {
    let tid = mem.read_u32(field(thread, offset).ok()?).ok()?;
    (tid > 0 && tid < 1 << 22).then_some(tid as u64)
}

//! A live local process, read with `process_vm_readv(2)`: no ptrace of our own, so it also works
//! while a debugger holds the process.

use super::Memory;
use crate::error::{ReadError, ReadErrorKind};

#[repr(C)]
struct IoVec {
    base: *mut u8,
    len: usize,
}

extern "C" {
    // glibc, <sys/uio.h>; pid_t is i32 on Linux.
    fn process_vm_readv(
        pid: i32,
        local: *const IoVec,
        liovcnt: u64,
        remote: *const IoVec,
        riovcnt: u64,
        flags: u64,
    ) -> isize;
}

pub struct LiveMemory {
    pid: i32,
}

impl LiveMemory {
    pub fn new(pid: i32) -> Self {
        LiveMemory { pid }
    }
    pub fn pid(&self) -> i32 {
        self.pid
    }
}

impl Memory for LiveMemory {
    fn read_into(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        if buf.is_empty() {
            return Ok(());
        }
        let local = IoVec {
            base: buf.as_mut_ptr(),
            len: buf.len(),
        };
        let remote = IoVec {
            base: addr as *mut u8,
            len: buf.len(),
        };
        // SAFETY: `local` describes exactly `buf`, which we borrow mutably for the call; the
        // remote iovec is only an address in another process and is never dereferenced here.
        let n = unsafe { process_vm_readv(self.pid, &local, 1, &remote, 1, 0) };
        if n < 0 {
            let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
            // EFAULT: address not mapped in the target.
            let kind = if errno == 14 {
                ReadErrorKind::Unmapped
            } else {
                ReadErrorKind::Os(errno)
            };
            return Err(ReadError::new(addr, buf.len() as u64, kind));
        }
        if (n as usize) < buf.len() {
            return Err(ReadError::new(
                addr + n as u64,
                (buf.len() - n as usize) as u64,
                ReadErrorKind::Unmapped,
            ));
        }
        Ok(())
    }
}

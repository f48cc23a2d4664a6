//! Memory read through the debugger (remote targets, or whenever the frontend prefers it).

use super::Memory;
use crate::error::{ReadError, ReadErrorKind};

/// Wraps a function that returns the bytes at an address, or `None`.
pub struct CallbackMemory<F> {
    read: F,
}

impl<F> CallbackMemory<F>
where
    F: Fn(u64, usize) -> Option<Vec<u8>> + Send + Sync,
{
    pub fn new(read: F) -> Self {
        CallbackMemory { read }
    }
}

impl<F> Memory for CallbackMemory<F>
where
    F: Fn(u64, usize) -> Option<Vec<u8>> + Send + Sync,
{
    fn read_into(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        match (self.read)(addr, buf.len()) {
            Some(v) if v.len() == buf.len() => {
                buf.copy_from_slice(&v);
                Ok(())
            }
            _ => Err(ReadError::new(
                addr,
                buf.len() as u64,
                ReadErrorKind::Callback,
            )),
        }
    }

    fn any_thread(&self) -> bool {
        false
    }
}

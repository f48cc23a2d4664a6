//! A page cache in front of any [`Memory`]. Lives as long as one stop of the target.

use std::sync::{Arc, Mutex};

use super::addr_map::AddrMap;
use super::Memory;
use crate::error::ReadError;

const PAGE: u64 = 4096;
/// Past this many cached pages (64 MiB) the cache starts over rather than grow.
const MAX_CACHED_PAGES: usize = 16 * 1024;

pub struct PageCache<M> {
    inner: M,
    pages: Mutex<AddrMap<Arc<[u8]>>>,
}

impl<M: Memory> PageCache<M> {
    pub fn new(inner: M) -> Self {
        PageCache {
            inner,
            pages: Mutex::new(AddrMap::default()),
        }
    }
    pub fn inner(&self) -> &M {
        &self.inner
    }
    /// Forget everything (the target ran).
    pub fn clear(&self) {
        self.pages.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    fn page(&self, base: u64) -> Option<Arc<[u8]>> {
        if let Some(p) = self
            .pages
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&base)
        {
            return Some(p.clone());
        }
        let mut buf = vec![0u8; PAGE as usize];
        self.inner.read_into(base, &mut buf).ok()?;
        let page: Arc<[u8]> = buf.into();
        let mut pages = self.pages.lock().unwrap_or_else(|e| e.into_inner());
        if pages.len() >= MAX_CACHED_PAGES {
            pages.clear();
        }
        pages.insert(base, page.clone());
        Some(page)
    }
}

impl<M: Memory> Memory for PageCache<M> {
    fn read_into(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        let mut done = 0usize;
        while done < buf.len() {
            let a = addr.wrapping_add(done as u64);
            let base = a & !(PAGE - 1);
            let off = (a - base) as usize;
            let n = (PAGE as usize - off).min(buf.len() - done);
            match self.page(base) {
                Some(p) => buf[done..done + n].copy_from_slice(&p[off..off + n]),
                // A page that cannot be read whole may still be readable in part (a mapping that
                // ends mid-page in a core): ask the source for just these bytes, uncached.
                None => self.inner.read_into(a, &mut buf[done..done + n])?,
            }
            done += n;
        }
        Ok(())
    }
}

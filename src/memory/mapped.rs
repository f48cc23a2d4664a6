//! A read-only memory map of a whole file (a core), so that reading it is a copy out of the
//! kernel's page cache with no system call: a sparse walk through a large core (one object
//! per 16 KiB chunk of 100,000 greenlets) otherwise reads 64 KiB per object.

use std::fs::File;
use std::os::fd::AsRawFd;

pub struct MappedFile {
    ptr: *const u8,
    len: usize,
}

// The mapping is read-only and lives as long as the value: sharing it between threads is
// sharing immutable bytes.
unsafe impl Send for MappedFile {}
unsafe impl Sync for MappedFile {}

impl MappedFile {
    /// The whole of `file` as its length is now, or None (an empty file, a failed mmap: the
    /// caller reads with pread instead).
    pub fn map(file: &File) -> Option<MappedFile> {
        Self::map_with(file, libc::MADV_RANDOM)
    }

    fn map_with(file: &File, advice: libc::c_int) -> Option<MappedFile> {
        let len = usize::try_from(file.metadata().ok()?.len()).ok()?;
        if len == 0 {
            return None;
        }
        // SAFETY: a private read-only mapping of a file we hold open; failure is checked.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return None;
        }
        // A core's reads jump around it: no readahead and no mapping of neighbouring pages,
        // so that what is mapped is what was read (advice only: its failure changes nothing).
        // SAFETY: the range mmap just returned.
        unsafe {
            libc::madvise(ptr, len, advice);
        }
        Some(MappedFile {
            ptr: ptr as *const u8,
            len,
        })
    }

    /// `buf.len()` bytes from file offset `off`, or None when they are not all inside the file
    /// as it was mapped (a file truncated since would raise SIGBUS: cores are not written to
    /// while they are read).
    pub fn read(&self, off: u64, buf: &mut [u8]) -> Option<()> {
        let start = usize::try_from(off).ok()?;
        let end = start.checked_add(buf.len())?;
        buf.copy_from_slice(self.bytes().get(start..end)?);
        Some(())
    }

    /// The whole mapping.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: the mapping mmap returned, which lives as long as `self`.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

/// A whole file's bytes, for `object`'s parsers: mapped, or read into memory where it cannot be
/// mapped. Reading an ELF file through `object::ReadCache` instead costs a system call per
/// symbol name (a 256-byte read each): 22,000 calls, 0.15 s, for python3.11's debug file.
pub enum FileBytes {
    Mapped(MappedFile),
    Read(Vec<u8>),
}

impl std::fmt::Debug for FileBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FileBytes({} bytes)", self.bytes().len())
    }
}

impl FileBytes {
    pub fn open(path: &str) -> std::io::Result<FileBytes> {
        let file = File::open(path)?;
        match MappedFile::map_with(&file, libc::MADV_NORMAL) {
            Some(m) => Ok(FileBytes::Mapped(m)),
            None => {
                let mut v = Vec::new();
                std::io::Read::read_to_end(&mut &file, &mut v)?;
                Ok(FileBytes::Read(v))
            }
        }
    }

    pub fn bytes(&self) -> &[u8] {
        match self {
            FileBytes::Mapped(m) => m.bytes(),
            FileBytes::Read(v) => v,
        }
    }
}

impl Drop for MappedFile {
    fn drop(&mut self) {
        // SAFETY: the pointer and length mmap returned.
        unsafe {
            libc::munmap(self.ptr as *mut libc::c_void, self.len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn reads_inside_the_file_only() {
        let path = std::env::temp_dir().join(format!("pyunwind-map-{}", std::process::id()));
        std::fs::File::create(&path)
            .unwrap()
            .write_all(b"0123456789")
            .unwrap();
        let m = MappedFile::map(&File::open(&path).unwrap()).unwrap();
        let mut b = [0u8; 4];
        assert_eq!(m.read(3, &mut b), Some(()));
        assert_eq!(&b, b"3456");
        assert_eq!(m.read(7, &mut b), None);
        assert_eq!(m.read(u64::MAX, &mut b), None);
        let whole = FileBytes::open(path.to_str().unwrap()).unwrap();
        assert_eq!(whole.bytes(), b"0123456789");
        std::fs::remove_file(path).unwrap();
    }
}

//! Compressed core files: recognised by their magic bytes (never by their names) and unpacked,
//! streaming, into an unlinked temporary file, so that a core of any size is never held in
//! memory and the unpacked copy disappears with the last handle.
//!
//! | format | magic | who writes it |
//! | --- | --- | --- |
//! | zstd | `28 b5 2f fd` | systemd-coredump (default), `zstd` |
//! | lz4 (frame) | `04 22 4d 18` | systemd-coredump on older systems, `lz4` |
//! | xz | `fd 37 7a 58 5a 00` | `xz` |
//! | gzip | `1f 8b` | `gzip` |
//!
//! A cut compressed core unpacks to a cut core: what decompressed before the damage is kept
//! and read like a truncated plain core (partial results, unreadable pages as errors). For zstd
//! that is all but the frame's last window (512 KiB at `zstd -1`, 8 MiB at most by default):
//! ruzstd 0.9's decoder holds the window back until the frame ends and has no way to hand it
//! over when the frame is cut, so a cut zstd core ends that much earlier than `zstd -d` says.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};

/// A core's unpacked size may not exceed this (a compressed "bomb" could fill the disk).
const MAX_UNPACKED_BYTES: u64 = 256 << 30;
/// Fewer unpacked bytes than an ELF header: nothing worth reading came out.
const MIN_UNPACKED_BYTES: u64 = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    Zstd,
    Lz4,
    Xz,
    Gzip,
}

impl Compression {
    /// The format whose magic bytes `head` starts with.
    pub fn sniff(head: &[u8]) -> Option<Compression> {
        const MAGICS: [(&[u8], Compression); 4] = [
            (&[0x28, 0xb5, 0x2f, 0xfd], Compression::Zstd),
            (&[0x04, 0x22, 0x4d, 0x18], Compression::Lz4),
            (&[0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00], Compression::Xz),
            (&[0x1f, 0x8b], Compression::Gzip),
        ];
        MAGICS
            .iter()
            .find(|(m, _)| head.starts_with(m))
            .map(|(_, c)| *c)
    }

    fn name(self) -> &'static str {
        match self {
            Compression::Zstd => "zstd",
            Compression::Lz4 => "lz4",
            Compression::Xz => "xz",
            Compression::Gzip => "gzip",
        }
    }
}

/// Opens a core file: the file itself when it is not compressed, else an unlinked temporary
/// file holding its unpacked bytes.
pub fn open_core(path: &str) -> Result<File> {
    let mut file = File::open(path).map_err(|e| Error::io(path, e))?;
    let mut head = [0u8; 6];
    let n = read_up_to(&mut file, &mut head).map_err(|e| Error::io(path, e))?;
    let Some(kind) = Compression::sniff(&head[..n]) else {
        return Ok(file);
    };
    file.rewind().map_err(|e| Error::io(path, e))?;
    let mut out =
        temp_file().map_err(|e| Error::io(std::env::temp_dir().display().to_string(), e))?;
    let written = unpack(kind, BufReader::new(file), &mut out);
    let (len, damage) = match written {
        Ok(n) => (n, None),
        Err(Unpack::Damaged { written, err }) => (written, Some(err)),
        Err(Unpack::Write(e)) => {
            return Err(Error::bad_file(
                path,
                format!("cannot unpack the {} core: {e}", kind.name()),
            ))
        }
        Err(Unpack::TooLarge) => {
            return Err(Error::bad_file(
                path,
                format!(
                    "the {} core unpacks to more than {} GiB",
                    kind.name(),
                    MAX_UNPACKED_BYTES >> 30
                ),
            ))
        }
    };
    if len < MIN_UNPACKED_BYTES {
        let why = damage.map_or("it is empty".to_string(), |e| e.to_string());
        return Err(Error::bad_file(
            path,
            format!("not a readable {} core: {why}", kind.name()),
        ));
    }
    out.flush().map_err(|e| Error::io(path, e))?;
    Ok(out)
}

fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

enum Unpack {
    /// The compressed data ended early or is corrupt after `written` good bytes.
    Damaged {
        written: u64,
        err: io::Error,
    },
    Write(io::Error),
    TooLarge,
}

fn unpack(kind: Compression, mut input: BufReader<File>, out: &mut File) -> Result<u64, Unpack> {
    let mut written = 0u64;
    match kind {
        Compression::Zstd => {
            // One StreamingDecoder per frame; `zstd` may write several frames one after another.
            loop {
                let more = input
                    .fill_buf()
                    .map_err(|err| Unpack::Damaged { written, err })?;
                if more.is_empty() {
                    break;
                }
                let dec = ruzstd::decoding::StreamingDecoder::new(&mut input).map_err(|e| {
                    Unpack::Damaged {
                        written,
                        err: io::Error::new(io::ErrorKind::InvalidData, e.to_string()),
                    }
                })?;
                written = copy(dec, out, written)?;
            }
        }
        Compression::Lz4 => written = copy(lz4_flex::frame::FrameDecoder::new(input), out, 0)?,
        Compression::Xz => {
            written = copy(liblzma::read::XzDecoder::new_multi_decoder(input), out, 0)?
        }
        Compression::Gzip => written = copy(flate2::read::MultiGzDecoder::new(input), out, 0)?,
    }
    Ok(written)
}

/// Copies the decoder's output into `out` in fixed-size chunks, counting from `written`.
fn copy(mut dec: impl Read, out: &mut File, mut written: u64) -> Result<u64, Unpack> {
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = match dec.read(&mut buf) {
            Ok(0) => return Ok(written),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(Unpack::Damaged { written, err }),
        };
        if written + n as u64 > MAX_UNPACKED_BYTES {
            return Err(Unpack::TooLarge);
        }
        out.write_all(&buf[..n]).map_err(Unpack::Write)?;
        written += n as u64;
    }
}

/// A new file in the temporary directory ($TMPDIR), already unlinked: it lives as long as the
/// returned handle.
fn temp_file() -> io::Result<File> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir();
    for _ in 0..100 {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let name: PathBuf = dir.join(format!(
            "pyunwind-core-{}-{}-{nanos}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&name)
        {
            Ok(f) => {
                std::fs::remove_file(&name)?;
                return Ok(f);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        "no free temporary file name",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffs_magic_bytes_only() {
        assert_eq!(
            Compression::sniff(&[0x28, 0xb5, 0x2f, 0xfd, 0]),
            Some(Compression::Zstd)
        );
        assert_eq!(
            Compression::sniff(&[0x04, 0x22, 0x4d, 0x18]),
            Some(Compression::Lz4)
        );
        assert_eq!(
            Compression::sniff(&[0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00]),
            Some(Compression::Xz)
        );
        assert_eq!(
            Compression::sniff(&[0x1f, 0x8b, 8]),
            Some(Compression::Gzip)
        );
        assert_eq!(Compression::sniff(b"\x7fELF\x02\x01"), None);
        assert_eq!(Compression::sniff(&[0xfd, 0x37]), None);
    }
}

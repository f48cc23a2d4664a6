//! Memory images for fuzzing pyunwind's decoders without a process or a core.
//!
//! An image is what one real stop read: the interpreter's version, `_PyRuntime`'s address and
//! every range of target memory the decoders read (recorded by [`Recorder`] while a session
//! reads a real core, written by the `image-from-core` binary). libFuzzer mutates such files;
//! [`run_decoders`] reads one as the target's whole memory and runs the decoders over it:
//! interpreters, threads, frame walks, code objects and line tables, locals and their reprs,
//! and the asyncio task graph.
//!
//! Format (little-endian): `PYUIMG1\0`, major, minor, micro, free-threaded (one byte each),
//! four bytes of padding, the runtime address (u64), then ranges until the end:
//! address (u64), length (u32), that many bytes. A short or odd tail is ignored, so every
//! input is an image.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use pyunwind::asyncio::{analyze, ThreadFrames};
use pyunwind::binary::Module;
use pyunwind::cpython::{Found, FrameItem, FrameWalk, Layout, Snapshot, Version};
use pyunwind::error::{ReadError, ReadErrorKind};
use pyunwind::memory::Memory;

pub const MAGIC: &[u8; 8] = b"PYUIMG1\0";
const PAGE: u64 = 4096;
/// Threads and interpreters looked at per input: enough to reach every decoder.
const MAX_INTERPRETERS: usize = 4;

/// Target memory made of the bytes an image holds; everything else is unmapped.
#[derive(Default)]
pub struct ImageMemory {
    pages: HashMap<u64, (Box<[u8]>, Box<[bool]>)>,
}

impl ImageMemory {
    pub fn put(&mut self, addr: u64, bytes: &[u8]) {
        for (i, b) in bytes.iter().enumerate() {
            let Some(a) = addr.checked_add(i as u64) else {
                return;
            };
            let (data, valid) = self.pages.entry(a / PAGE).or_insert_with(|| {
                (
                    vec![0u8; PAGE as usize].into_boxed_slice(),
                    vec![false; PAGE as usize].into_boxed_slice(),
                )
            });
            data[(a % PAGE) as usize] = *b;
            valid[(a % PAGE) as usize] = true;
        }
    }
}

impl Memory for ImageMemory {
    fn read_into(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        let len = buf.len() as u64;
        for (i, out) in buf.iter_mut().enumerate() {
            let a = addr.checked_add(i as u64).ok_or(ReadError::new(
                addr,
                len,
                ReadErrorKind::Unmapped,
            ))?;
            let byte = self
                .pages
                .get(&(a / PAGE))
                .filter(|(_, valid)| valid[(a % PAGE) as usize])
                .map(|(data, _)| data[(a % PAGE) as usize]);
            *out = byte.ok_or(ReadError::new(a, 1, ReadErrorKind::Unmapped))?;
        }
        Ok(())
    }
}

/// A parsed image: the layout to decode with, `_PyRuntime` and the memory.
pub struct Image {
    pub version: Version,
    pub free_threaded: bool,
    pub runtime: u64,
    pub memory: ImageMemory,
}

impl Image {
    pub fn parse(data: &[u8]) -> Option<Image> {
        let rest = data.strip_prefix(MAGIC.as_slice())?;
        let head = rest.get(..16)?;
        // Any byte is some supported version, so that mutations of it still decode.
        let version = Version::new(3, 10 + head[1].wrapping_sub(10) % 6, head[2]);
        let free_threaded = head[3] & 1 == 1 && version.minor == 13;
        let runtime = u64::from_le_bytes(head[8..16].try_into().ok()?);
        let mut memory = ImageMemory::default();
        let mut at = &rest[16..];
        while let (Some(a), Some(n)) = (at.get(..8), at.get(8..12)) {
            let addr = u64::from_le_bytes(a.try_into().ok()?);
            let len = u32::from_le_bytes(n.try_into().ok()?) as usize;
            let bytes = at.get(12..12usize.checked_add(len)?)?;
            memory.put(addr, bytes);
            at = &at[12 + len..];
        }
        Some(Image {
            version,
            free_threaded,
            runtime,
            memory,
        })
    }

    /// The image's bytes, for ranges recorded by a [`Recorder`].
    pub fn write(
        version: Version,
        free_threaded: bool,
        runtime: u64,
        ranges: &[(u64, Vec<u8>)],
    ) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend([
            version.major,
            version.minor,
            version.micro,
            free_threaded as u8,
        ]);
        out.extend([0u8; 4]);
        out.extend(runtime.to_le_bytes());
        for (addr, bytes) in ranges {
            out.extend(addr.to_le_bytes());
            out.extend((bytes.len() as u32).to_le_bytes());
            out.extend(bytes);
        }
        out
    }
}

/// Run every decoder over an image; returns how many Python frames it decoded. Never panics
/// on any input: that is what is fuzzed.
pub fn run_decoders(data: &[u8]) -> usize {
    let mut decoded = 0;
    let Some(img) = Image::parse(data) else {
        return decoded;
    };
    let layout = if img.free_threaded {
        Layout::builtin_free_threaded(img.version)
    } else {
        Layout::builtin(img.version)
    };
    let Some(layout) = layout else {
        return decoded;
    };
    let found = Found {
        module: Module {
            path: String::new(),
            start: 0,
            end: 0,
            base: 0,
        },
        runtime: img.runtime,
        layout,
        found_by: "image".into(),
        // Images are taken from x86-64 cores (image-from-core).
        arch: pyunwind::arch::Arch::X86_64,
        jit_entry: None,
        keys: Default::default(),
        codes: Default::default(),
    };
    let snap = Snapshot::new(Arc::new(img.memory), &found);
    let Ok(interps) = snap.interpreters() else {
        return decoded;
    };
    let mut errors = Vec::new();
    for interp in interps.iter().take(MAX_INTERPRETERS) {
        let threads = snap.threads(*interp, &mut errors);
        let walks: Vec<FrameWalk> = threads.iter().map(|t| snap.walk_frames(t.frame)).collect();
        for walk in &walks {
            for item in &walk.items {
                if let FrameItem::Python(p) = item {
                    decoded += 1;
                    let _ = snap.frame_locals(p);
                    why_readers(&snap, p);
                }
            }
        }
        let frames: Vec<ThreadFrames> = threads
            .iter()
            .zip(&walks)
            .map(|(t, walk)| ThreadFrames {
                tstates: vec![(t.addr, t.interp)],
                native_id: t.native_id,
                walk,
            })
            .collect();
        if let Ok(view) = analyze(&snap, &frames, Ok(None)) {
            // A clock, so that the sleeps' deadlines are read too.
            let native_ids: Vec<Option<u64>> = threads.iter().map(|t| t.native_id).collect();
            let _ = pyunwind::why::tasks::task_whys(&snap, &view, Some(0.0), &native_ids);
            for l in &view.loops {
                let _ = pyunwind::asyncio::loops::queues(&snap, l.addr);
            }
        }
    }
    decoded
}

/// --why's readers of one frame: the locks its value stack calls, their states, and the
/// `with` statements that took them. (Not counted: the count is of frames, compared between
/// an image and its core.)
fn why_readers(snap: &Snapshot, p: &pyunwind::cpython::PyFrame) {
    let slots = snap.value_stack_slots(p, None);
    for c in pyunwind::why::locks::lock_calls(snap, &slots) {
        let _ = pyunwind::why::locks::lock_state(snap, c.lock, c.kind);
        let _ = snap.with_line(p, c.slot);
    }
}

/// A memory that keeps a copy of every successful read of the memory it wraps.
pub struct Recorder {
    inner: Arc<dyn Memory>,
    reads: Mutex<Vec<(u64, Vec<u8>)>>,
}

impl Recorder {
    pub fn new(inner: Arc<dyn Memory>) -> Recorder {
        Recorder {
            inner,
            reads: Mutex::new(Vec::new()),
        }
    }

    /// Every range read, each once, in address order.
    pub fn ranges(&self) -> Vec<(u64, Vec<u8>)> {
        let mut r = self.reads.lock().unwrap_or_else(|e| e.into_inner()).clone();
        r.sort();
        r.dedup();
        r
    }
}

impl Memory for Recorder {
    fn read_into(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        self.inner.read_into(addr, buf)?;
        self.reads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((addr, buf.to_vec()));
        Ok(())
    }
}

/// Runs the native unwinder's reading of one module's ELF file over `data` as that file:
/// `.eh_frame_hdr`'s table and the FDEs it points to, `.debug_frame` where `.eh_frame` has
/// none, and the symbol tables, at addresses spread over the file's image (and, from the
/// input's last bytes, some chosen by it). Returns how many addresses had a name.
pub fn run_elf(data: &[u8]) -> usize {
    use pyunwind::arch::{Arch, Regs};
    use pyunwind::unwind::cfi::ElfUnwind;
    // ElfUnwind reads a file: one per fuzzing process, rewritten for each input.
    let path = std::env::temp_dir().join(format!("pyunwind-fuzz-elf-{}", std::process::id()));
    if std::fs::write(&path, data).is_err() {
        return 0;
    }
    let Ok(elf) = ElfUnwind::load(&path.display().to_string(), &Default::default()) else {
        return 0;
    };
    let mut addrs: Vec<u64> = (0..64u64)
        .map(|i| {
            elf.first_vaddr
                .wrapping_add(i * (data.len() as u64 / 64 + 1))
        })
        .collect();
    addrs.extend(data.rchunks(8).take(8).map(|c| {
        let mut b = [0u8; 8];
        b[..c.len()].copy_from_slice(c);
        u64::from_le_bytes(b)
    }));
    elf.symbols.prepare(&addrs);
    let mut memory = ImageMemory::default();
    memory.put(0x7000_0000, &[0x5a; 512]);
    let mut ctx = pyunwind::unwind::cfi::Context::new();
    let mut named = 0;
    for &a in &addrs {
        named += usize::from(elf.symbols.lookup(a).is_some());
        let mut regs = Regs::new(Arch::X86_64);
        regs.set_pc(a);
        regs.set_sp(0x7000_0100);
        regs.set_fp(0x7000_0180);
        let _ = elf.step(&memory, &mut ctx, &regs, a);
    }
    named + elf.symbols.ranges_where(|_| true).len()
}

//! File, line and inlined functions of a native PC, from a module's DWARF (its own, or its
//! separate debug file's), with the `addr2line` crate over gimli.

use crate::memory::mapped::FileBytes;
use std::collections::HashMap;
use std::sync::Arc;

use gimli::{EndianArcSlice, LittleEndian, Reader as _, SectionId};
use object::{Object, ObjectSection};

use super::gdb_lines::{self, RawRow, Sequence};

type Reader = EndianArcSlice<LittleEndian>;

/// A `.debug_*` section larger than this is not read (memory stays bounded).
const MAX_DWARF_SECTION_BYTES: u64 = 512 << 20;
/// The sections lines and inlined calls need. Location lists, macros and name indexes are
/// not: they are large, and a debug file compresses them.
const DWARF_SECTIONS: &[SectionId] = &[
    SectionId::DebugAbbrev,
    SectionId::DebugAddr,
    SectionId::DebugAranges,
    SectionId::DebugInfo,
    SectionId::DebugLine,
    SectionId::DebugLineStr,
    SectionId::DebugRanges,
    SectionId::DebugRngLists,
    SectionId::DebugStr,
    SectionId::DebugStrOffsets,
    SectionId::DebugTypes,
];
/// Inlined calls reported per PC.
const MAX_INLINED: usize = 64;

/// One function at a PC: the innermost inlined call first, the real function last.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SourceFrame {
    /// The DWARF name (None when DWARF has none).
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
}

pub struct Lines {
    ctx: addr2line::Context<Reader>,
    /// Each unit's line table as gdb records it (see `gdb_lines`).
    gdb_rows: gdb_lines::Cache,
}

impl Lines {
    /// The DWARF of the ELF file at `path`, None when it has no `.debug_info`.
    pub fn load(path: &str) -> Option<Lines> {
        Lines::load_many(&[path]).pop().flatten()
    }

    /// [`Lines::load`] of each path, their sections inflated on all cores at once: a debug
    /// file compresses its DWARF (python3.11-dbg: 11 MiB of `.debug_info` in 5 MiB), and
    /// inflating it is most of the time `--native` takes.
    pub fn load_many(paths: &[&str]) -> Vec<Option<Lines>> {
        let files: Vec<Option<FileBytes>> = paths.iter().map(|p| FileBytes::open(p).ok()).collect();
        let objects: Vec<Option<object::File<'_, &[u8]>>> = files
            .iter()
            .map(|f| {
                let obj = object::File::parse(f.as_ref()?.bytes()).ok()?;
                obj.section_by_name(".debug_info")?;
                Some(obj)
            })
            .collect();
        // (file, section, its bytes as stored), the largest first so that the cores finish
        // together.
        let mut jobs: Vec<(usize, SectionId, object::CompressedData<'_>)> = Vec::new();
        for (i, obj) in objects.iter().enumerate() {
            let Some(obj) = obj else { continue };
            for &id in DWARF_SECTIONS {
                if let Some(data) = obj
                    .section_by_name(id.name())
                    .and_then(|s| s.compressed_data().ok())
                    .filter(|d| d.uncompressed_size <= MAX_DWARF_SECTION_BYTES)
                {
                    jobs.push((i, id, data));
                }
            }
        }
        jobs.sort_by_key(|j| std::cmp::Reverse(j.2.data.len()));
        let inflated = crate::parallel::map(&jobs, 1, true, |(_, _, data)| inflate(data));
        let mut sections: Vec<HashMap<SectionId, Arc<[u8]>>> = vec![HashMap::new(); paths.len()];
        for ((i, id, _), bytes) in jobs.iter().zip(inflated) {
            if let Some(b) = bytes {
                sections[*i].insert(*id, b);
            }
        }
        let empty: Arc<[u8]> = Arc::from(&[][..]);
        let built = crate::parallel::map(&sections, 1, true, |secs| {
            let load = |id: SectionId| -> Result<Reader, gimli::Error> {
                let bytes = secs.get(&id).cloned().unwrap_or_else(|| empty.clone());
                Ok(EndianArcSlice::new(bytes, LittleEndian))
            };
            let dwarf = gimli::Dwarf::load(load).ok()?;
            let ctx = addr2line::Context::from_dwarf(dwarf).ok()?;
            Some(Lines {
                ctx,
                gdb_rows: gdb_lines::Cache::default(),
            })
        });
        built
            .into_iter()
            .zip(&objects)
            .map(|(l, obj)| l.filter(|_| obj.is_some()))
            .collect()
    }

    /// The functions at ELF address `addr`, innermost inlined call first; empty when DWARF
    /// does not cover it.
    pub fn frames(&self, addr: u64) -> Vec<SourceFrame> {
        let mut out = Vec::new();
        let Ok(mut it) = self.ctx.find_frames(addr).skip_all_loads() else {
            return out;
        };
        while let Ok(Some(f)) = it.next() {
            if out.len() >= MAX_INLINED {
                break;
            }
            out.push(SourceFrame {
                function: f
                    .function
                    .as_ref()
                    .and_then(|n| n.raw_name().ok().map(|s| s.into_owned())),
                file: f.location.as_ref().and_then(|l| l.file.map(str::to_string)),
                line: f.location.as_ref().and_then(|l| l.line),
            });
        }
        // The innermost location from the line table as gdb reads it, so that file and line
        // are the ones gdb shows; inlined callers' locations are their call sites in both.
        if let Some(first) = out.first_mut() {
            if let Some((file, line)) = self.gdb_location(addr) {
                first.file = Some(file);
                first.line = Some(line);
            }
        }
        out
    }

    /// The file and line gdb gives `addr`, when a unit's line table covers it.
    fn gdb_location(&self, addr: u64) -> Option<(String, u32)> {
        let unit = self.ctx.find_dwarf_and_unit(addr).skip_all_loads()?;
        let key = unit.header.offset().0;
        let program = unit.line_program.as_ref()?;
        let seqs = self.gdb_rows.get(key, || recorded_rows(program.clone()));
        let row = gdb_lines::lookup(&seqs, addr)?;
        let header = program.header();
        let file = header.file(row.file_index)?;
        Some((render_file(unit, file, header)?, row.line))
    }
}

/// Whether the ELF file at `path` has DWARF of its own (`.debug_info`).
pub fn has_dwarf(path: &str) -> bool {
    FileBytes::open(path).ok().is_some_and(|f| {
        object::File::parse(f.bytes()).is_ok_and(|o| o.section_by_name(".debug_info").is_some())
    })
}

/// A section's bytes, inflated straight into the buffer the reader keeps (a `Vec` turned into
/// an `Arc<[u8]>` is one more copy of 16 MiB); None when they do not inflate.
fn inflate(data: &object::CompressedData<'_>) -> Option<Arc<[u8]>> {
    if data.format != object::CompressionFormat::Zlib {
        return Some(Arc::from(&data.decompress().ok()?[..]));
    }
    let size = usize::try_from(data.uncompressed_size).ok()?;
    let mut out = Arc::<[u8]>::new_uninit_slice(size);
    let mut z = flate2::Decompress::new(true);
    let status = z
        .decompress_uninit(
            data.data,
            Arc::get_mut(&mut out)?,
            flate2::FlushDecompress::Finish,
        )
        .ok()?;
    if status != flate2::Status::StreamEnd || z.total_out() != size as u64 {
        return None;
    }
    // SAFETY: the stream ended having written exactly `size` bytes from the start.
    Some(unsafe { out.assume_init() })
}

/// gdb's recorded rows of one line program; a program that fails to decode keeps the rows
/// read before the error.
fn recorded_rows(program: gimli::IncompleteLineProgram<Reader>) -> Vec<Sequence> {
    let mut rows = program.rows();
    let raw = std::iter::from_fn(move || {
        let (_, r) = rows.next_row().ok()??;
        Some(RawRow {
            address: r.address(),
            file_index: r.file_index(),
            line: r
                .line()
                .map_or(0, |l| u32::try_from(l.get()).unwrap_or(u32::MAX)),
            is_stmt: r.is_stmt(),
            discriminator: r.discriminator(),
            end_sequence: r.end_sequence(),
        })
    });
    gdb_lines::record(raw)
}

/// A file entry's path as `addr2line` renders it (comp_dir, then the entry's directory, then its
/// name, an absolute part replacing what is before it), so both sources give the same text.
fn render_file(
    unit: gimli::UnitRef<Reader>,
    file: &gimli::FileEntry<Reader>,
    header: &gimli::LineProgramHeader<Reader>,
) -> Option<String> {
    let text = |v| -> Option<String> {
        Some(
            unit.attr_string(v)
                .ok()?
                .to_string_lossy()
                .ok()?
                .into_owned(),
        )
    };
    let mut path = match &unit.comp_dir {
        Some(d) => d.to_string_lossy().ok()?.into_owned(),
        None => String::new(),
    };
    // Directory index 0 is the compilation directory itself.
    if file.directory_index() != 0 {
        if let Some(dir) = file.directory(header) {
            push_path(&mut path, &text(dir)?);
        }
    }
    push_path(&mut path, &text(file.path_name())?);
    Some(path)
}

fn push_path(path: &mut String, part: &str) {
    if part.starts_with('/') {
        *path = part.to_string();
    } else {
        if !path.is_empty() && !path.ends_with('/') {
            path.push('/');
        }
        path.push_str(part);
    }
}

//! File, line and inlined functions of a native PC, from a module's DWARF (its own, or its
//! separate debug file's), with the `addr2line` crate over gimli.

use crate::memory::mapped::FileBytes;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, OnceLock};

use gimli::{EndianReader, LittleEndian, Reader as _, SectionId};
use object::{Object, ObjectSection};

use super::gdb_lines::{self, RawRow, Sequence};

type Reader = EndianReader<LittleEndian, Bytes>;
/// A file's DWARF sections.
type Sections = HashMap<SectionId, Bytes>;
/// Address ranges, [begin, end).
type Ranges = Vec<(u64, u64)>;

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

/// A DWARF section's bytes: inflated, or where the file's mapping has them (a `-g` build's
/// uncompressed DWARF, pyenv's libpython: 19 MiB, is read in place, not copied).
#[derive(Clone)]
struct Bytes(BytesOf);

#[derive(Clone)]
enum BytesOf {
    Owned(Arc<[u8]>),
    Vec(Arc<Vec<u8>>),
    Mapped(Arc<FileBytes>, std::ops::Range<usize>),
}

impl Bytes {
    fn owned(b: impl Into<Arc<[u8]>>) -> Bytes {
        Bytes(BytesOf::Owned(b.into()))
    }

    /// `range` of `file`, None when it is not inside it.
    fn mapped(file: &Arc<FileBytes>, range: std::ops::Range<usize>) -> Option<Bytes> {
        file.bytes().get(range.clone())?;
        Some(Bytes(BytesOf::Mapped(file.clone(), range)))
    }
}

impl std::ops::Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.0 {
            BytesOf::Owned(b) => b,
            BytesOf::Vec(v) => v,
            BytesOf::Mapped(f, r) => f.bytes().get(r.clone()).unwrap_or_default(),
        }
    }
}

impl std::fmt::Debug for Bytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Bytes({} bytes)", self.len())
    }
}

// SAFETY: the bytes are an `Arc`'s allocation, a `Vec`'s buffer behind an `Arc` (never
// modified, so never moved) or a file's mapping held by an `Arc`; none moves while a clone
// holds it, so the slice a deref gives stays where it is.
unsafe impl gimli::StableDeref for Bytes {}
// SAFETY: as above: a clone shares the same allocation or mapping.
unsafe impl gimli::CloneStableDeref for Bytes {}

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
    /// Set when `ctx` holds only the units that cover some addresses (see [`kept_units`]):
    /// what they cover, and the file, whose whole DWARF answers any other address.
    part: Option<Part>,
    /// [`Lines::frames`] of the addresses it was loaded for, found on the core that loaded
    /// it (decoding a unit's line program and functions is most of what naming costs).
    answered: HashMap<u64, Vec<SourceFrame>>,
}

struct Part {
    covered: Ranges,
    path: String,
    whole: OnceLock<Option<Box<Lines>>>,
}

impl Lines {
    /// The DWARF of the ELF file at `path`, None when it has no `.debug_info`.
    pub fn load(path: &str) -> Option<Lines> {
        Lines::load_many(&[(path, None)]).pop().flatten()
    }

    /// [`Lines::load`] of each path, their sections inflated on all cores at once: a debug
    /// file compresses its DWARF (python3.11-dbg: 11 MiB of `.debug_info` in 5 MiB), and
    /// inflating it is most of the time `--native` takes. With the addresses that will be
    /// asked, a file keeps only the units that cover them where it can ([`kept_units`]).
    pub fn load_many(wanted: &[(&str, Option<&[u64]>)]) -> Vec<Option<Lines>> {
        let paths: Vec<&str> = wanted.iter().map(|w| w.0).collect();
        let files: Vec<Option<Arc<FileBytes>>> = paths
            .iter()
            .map(|p| FileBytes::open(p).ok().map(Arc::new))
            .collect();
        let objects: Vec<Option<object::File<'_, &[u8]>>> = files
            .iter()
            .map(|f| {
                let obj = object::File::parse(f.as_ref()?.bytes()).ok()?;
                obj.section_by_name(".debug_info")?;
                Some(obj)
            })
            .collect();
        // Sections stored as they are used are read in place; compressed ones are inflated.
        let mut sections: Vec<Sections> = vec![HashMap::new(); paths.len()];
        let mut stored: Vec<Vec<(SectionId, object::CompressedData<'_>)>> =
            vec![Vec::new(); paths.len()];
        for (i, obj) in objects.iter().enumerate() {
            let (Some(obj), Some(file)) = (obj, &files[i]) else {
                continue;
            };
            for &id in DWARF_SECTIONS {
                let Some(s) = obj.section_by_name(id.name()) else {
                    continue;
                };
                let Some(data) = s
                    .compressed_data()
                    .ok()
                    .filter(|d| d.uncompressed_size <= MAX_DWARF_SECTION_BYTES)
                else {
                    continue;
                };
                if data.format != object::CompressionFormat::None {
                    stored[i].push((id, data));
                    continue;
                }
                let in_place = s.compressed_file_range().ok().and_then(|r| {
                    let start = usize::try_from(r.offset).ok()?;
                    let end = start.checked_add(usize::try_from(r.uncompressed_size).ok()?)?;
                    Bytes::mapped(file, start..end)
                });
                if let Some(b) = in_place {
                    sections[i].insert(id, b);
                }
            }
        }
        // The compressed sections are inflated on every core, the largest jobs first so that
        // the cores finish together. A zlib `.debug_info` of a file asked for some addresses
        // is one job with the sections that choose its units, and is inflated only as far as
        // the units kept ([`Info`]).
        let mut jobs: Vec<Job<'_>> = Vec::new();
        for (i, secs) in stored.into_iter().enumerate() {
            let cut = secs.iter().any(|(id, d)| {
                *id == SectionId::DebugInfo
                    && d.format == object::CompressionFormat::Zlib
                    && wanted[i].1.is_some()
            });
            if !cut {
                jobs.extend(secs.into_iter().map(|(id, d)| Job::Section(i, id, d)));
                continue;
            }
            let (with, alone): (Vec<_>, Vec<_>) = secs.into_iter().partition(|(id, _)| {
                matches!(
                    id,
                    SectionId::DebugInfo | SectionId::DebugAranges | SectionId::DebugAbbrev
                )
            });
            jobs.extend(alone.into_iter().map(|(id, d)| Job::Section(i, id, d)));
            jobs.push(Job::Info(i, with, sections[i].clone()));
        }
        jobs.sort_by_key(|j| std::cmp::Reverse(j.stored_bytes()));
        let done = crate::parallel::map(&jobs, 1, true, |job| match job {
            Job::Section(_, _, data) => Done::Section(inflate(data)),
            Job::Info(i, with, mapped) => {
                let (secs, covered) = cut_info(with, mapped, wanted[*i].1.unwrap_or_default());
                Done::Info(secs, covered)
            }
        });
        let mut covered: Vec<Option<Ranges>> = vec![None; paths.len()];
        let mut cut: Vec<bool> = vec![false; paths.len()];
        for (job, d) in jobs.iter().zip(done) {
            match (job, d) {
                (Job::Section(i, id, _), Done::Section(Some(b))) => {
                    sections[*i].insert(*id, b);
                }
                (Job::Info(i, ..), Done::Info(secs, c)) => {
                    sections[*i].extend(secs);
                    covered[*i] = c;
                    cut[*i] = true;
                }
                _ => {}
            }
        }
        let empty = Bytes::owned(&[][..]);
        let jobs: Vec<(usize, Sections)> = sections.into_iter().enumerate().collect();
        let built = crate::parallel::map(&jobs, 1, true, |(i, secs)| {
            let mut secs = secs.clone();
            let part = if cut[*i] {
                covered[*i].clone().map(|c| (None, c))
            } else {
                let mut info = Info::Whole(secs.get(&SectionId::DebugInfo).cloned());
                wanted[*i]
                    .1
                    .and_then(|addrs| kept_units(&secs, &mut info, addrs))
                    .map(|(kept, c)| (Some(kept), c))
            };
            let part = part.map(|(kept, covered)| {
                if let Some(k) = kept {
                    secs.insert(SectionId::DebugInfo, k);
                }
                // Its offsets into .debug_info are the whole section's.
                secs.remove(&SectionId::DebugAranges);
                Part {
                    covered,
                    path: paths[*i].to_string(),
                    whole: OnceLock::new(),
                }
            });
            let load = |id: SectionId| -> Result<Reader, gimli::Error> {
                let bytes = secs.get(&id).cloned().unwrap_or_else(|| empty.clone());
                Ok(EndianReader::new(bytes, LittleEndian))
            };
            let dwarf = gimli::Dwarf::load(load).ok()?;
            let ctx = addr2line::Context::from_dwarf(dwarf).ok()?;
            let mut lines = Lines {
                ctx,
                gdb_rows: gdb_lines::Cache::default(),
                part,
                answered: HashMap::new(),
            };
            let answered = wanted[*i]
                .1
                .unwrap_or_default()
                .iter()
                .map(|&a| (a, lines.frames(a)))
                .collect();
            lines.answered = answered;
            Some(lines)
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
        if let Some(f) = self.answered.get(&addr) {
            return f.clone();
        }
        if let Some(p) = &self.part {
            if !p.covered.iter().any(|&(lo, hi)| lo <= addr && addr < hi) {
                return p
                    .whole
                    .get_or_init(|| Lines::load(&p.path).map(Box::new))
                    .as_ref()
                    .map(|l| l.frames(addr))
                    .unwrap_or_default();
            }
        }
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

/// Inflated bytes asked for beyond what is needed, so that inflating is not a call per unit.
const INFLATE_STEP_BYTES: usize = 256 << 10;

/// `.debug_info` as far as it is read: whole, or a zlib-compressed one inflated only as far
/// as asked (libc6-dbg's libc: 5.5 MiB inflated from 2.2 MiB, of which a stack's units are
/// usually in the first half or two thirds).
enum Info<'a> {
    Whole(Option<Bytes>),
    Inflating {
        data: &'a [u8],
        z: flate2::Decompress,
        out: Vec<u8>,
        size: usize,
    },
}

impl<'a> Info<'a> {
    fn inflating(data: &object::CompressedData<'a>) -> Option<Info<'a>> {
        let size = usize::try_from(data.uncompressed_size).ok()?;
        Some(Info::Inflating {
            data: data.data,
            z: flate2::Decompress::new(true),
            out: Vec::with_capacity(size),
            size,
        })
    }

    /// The section from its start, at least `end` bytes of it; None when it is shorter or
    /// does not inflate that far.
    fn upto(&mut self, end: usize) -> Option<&[u8]> {
        match self {
            Info::Whole(b) => b.as_deref().filter(|b| b.len() >= end),
            Info::Inflating { data, z, out, size } => {
                if end > *size {
                    return None;
                }
                let goal = end
                    .max(out.len().saturating_add(INFLATE_STEP_BYTES))
                    .min(*size);
                while out.len() < goal {
                    let (read, wrote) = (z.total_in(), z.total_out());
                    let input = data.get(usize::try_from(read).ok()?..)?;
                    let room = goal - out.len();
                    let status = z
                        .decompress_uninit(
                            input,
                            &mut out.spare_capacity_mut()[..room],
                            flate2::FlushDecompress::None,
                        )
                        .ok()?;
                    let n = usize::try_from(z.total_out() - wrote).ok()?.min(room);
                    // SAFETY: inflating wrote `n` bytes at the start of the spare capacity.
                    unsafe { out.set_len(out.len() + n) };
                    let stuck = n == 0 && z.total_in() == read;
                    if status == flate2::Status::StreamEnd || stuck {
                        break;
                    }
                }
                (out.len() >= end).then_some(&out[..])
            }
        }
    }

    /// The whole section; None when it does not inflate to its size.
    fn whole(mut self) -> Option<Bytes> {
        if let Info::Inflating { size, .. } = self {
            self.upto(size)?;
        }
        match self {
            Info::Whole(b) => b,
            Info::Inflating { out, size, .. } => {
                (out.len() == size).then(|| Bytes(BytesOf::Vec(Arc::new(out))))
            }
        }
    }
}

/// Work of [`Lines::load_many`]'s inflating, on any core.
enum Job<'d> {
    /// One section of file `.0`.
    Section(usize, SectionId, object::CompressedData<'d>),
    /// File `.0`'s `.debug_info` (zlib) and what chooses its units (`.debug_aranges`,
    /// `.debug_abbrev`), compressed, and its sections read in place.
    Info(
        usize,
        Vec<(SectionId, object::CompressedData<'d>)>,
        Sections,
    ),
}

impl Job<'_> {
    fn stored_bytes(&self) -> usize {
        match self {
            Job::Section(_, _, d) => d.data.len(),
            Job::Info(_, with, _) => with.iter().map(|(_, d)| d.data.len()).sum(),
        }
    }
}

enum Done {
    Section(Option<Bytes>),
    /// The sections inflated, `.debug_info` cut down to the units kept where it could be (with
    /// what they cover), else whole.
    Info(Sections, Option<Ranges>),
}

/// [`Job::Info`]: `.debug_aranges` and `.debug_abbrev` inflated, then `.debug_info` only as far
/// as the units that cover `addrs` ([`kept_units`]), or whole where it cannot be cut down.
fn cut_info(
    with: &[(SectionId, object::CompressedData<'_>)],
    mapped: &Sections,
    addrs: &[u64],
) -> (Sections, Option<Ranges>) {
    let mut secs = Sections::new();
    let mut info = None;
    for (id, data) in with {
        if *id == SectionId::DebugInfo {
            info = Info::inflating(data);
        } else if let Some(b) = inflate(data) {
            secs.insert(*id, b);
        }
    }
    let Some(mut info) = info else {
        return (secs, None);
    };
    let mut all = mapped.clone();
    all.extend(secs.iter().map(|(k, v)| (*k, v.clone())));
    if let Some((kept, covered)) = kept_units(&all, &mut info, addrs) {
        secs.insert(SectionId::DebugInfo, kept);
        return (secs, Some(covered));
    }
    if let Some(whole) = info.whole() {
        secs.insert(SectionId::DebugInfo, whole);
    }
    (secs, None)
}

/// A `.debug_info` of only the compilation units `.debug_aranges` names for `addrs`, and the
/// address ranges those units cover; None where that cannot be done exactly (an address no
/// unit covers, an unreadable unit, or a unit that refers into another one).
///
/// libc6-dbg's libc has 4,126 units: building addr2line's context parses every unit's
/// abbreviations and line-program header, 30 ms and 30 MiB for the one or two units a stack's
/// libc frames are in. A unit moved to another offset reads the same, as long as nothing in it
/// names a `.debug_info` offset: its own references are relative to its start, its other
/// offsets are into other sections.
fn kept_units(secs: &Sections, info: &mut Info<'_>, addrs: &[u64]) -> Option<(Bytes, Ranges)> {
    let abbrev = secs.get(&SectionId::DebugAbbrev)?;
    let aranges = gimli::DebugAranges::new(secs.get(&SectionId::DebugAranges)?, LittleEndian);
    // (unit offset, [begin, end)) of every address range .debug_aranges lists.
    let mut ranges: Vec<(usize, u64, u64)> = Vec::new();
    let mut headers = aranges.headers();
    while let Some(h) = headers.next().ok()? {
        let unit = h.debug_info_offset().0;
        let mut entries = h.entries();
        while let Some(e) = entries.next().ok()? {
            let r = e.range();
            if r.end > r.begin {
                ranges.push((unit, r.begin, r.end));
            }
        }
    }
    // By start: each address is looked up in the range starting last at or before it; where
    // that one does not hold it (overlapping ranges, which compilers do not emit), the whole
    // DWARF is read.
    ranges.sort_unstable_by_key(|r| (r.1, r.2));
    let mut units = BTreeSet::new();
    for &a in addrs {
        let i = ranges.partition_point(|r| r.1 <= a).checked_sub(1)?;
        let (unit, _, hi) = ranges[i];
        if a >= hi {
            return None;
        }
        units.insert(unit);
    }
    let mut out = Vec::new();
    for &u in &units {
        // The unit's length first (DWARF's initial length), then the unit.
        let head = info.upto(u.checked_add(12)?)?.get(u..)?;
        let len = match u32::from_le_bytes(*head.first_chunk::<4>()?) {
            0xffff_ffff => usize::try_from(u64::from_le_bytes(*head[4..].first_chunk::<8>()?))
                .ok()?
                .checked_add(12)?,
            n if n < 0xffff_fff0 => usize::try_from(n).ok()?.checked_add(4)?,
            _ => return None,
        };
        let info = info.upto(u.checked_add(len)?)?;
        let header = gimli::DebugInfo::new(info, LittleEndian)
            .header_from_offset(gimli::DebugInfoOffset(u))
            .ok()?;
        if !matches!(header.type_(), gimli::UnitType::Compilation) {
            return None;
        }
        if refers_across_units(abbrev, header.debug_abbrev_offset().0)? {
            return None;
        }
        let end = u.checked_add(header.length_including_self())?;
        out.extend_from_slice(info.get(u..end)?);
    }
    let covered = ranges
        .iter()
        .filter(|r| units.contains(&r.0))
        .map(|&(_, lo, hi)| (lo, hi))
        .collect();
    Some((Bytes::owned(out), covered))
}

/// Whether the abbreviation table at `offset` has a form that names a `.debug_info` offset or
/// another file's entry (`DW_FORM_ref_addr`, as LTO builds use between units; signatures;
/// supplementary and alternate files; `DW_FORM_indirect`, whose form is only in the entry).
/// None when the table does not read.
fn refers_across_units(abbrev: &[u8], offset: usize) -> Option<bool> {
    let mut r = gimli::EndianSlice::new(abbrev.get(offset..)?, LittleEndian);
    loop {
        if r.read_uleb128().ok()? == 0 {
            return Some(false);
        }
        r.read_uleb128().ok()?; // tag
        r.read_u8().ok()?; // children
        loop {
            let name = r.read_uleb128().ok()?;
            let form = gimli::DwForm(u16::try_from(r.read_uleb128().ok()?).ok()?);
            if name == 0 && form.0 == 0 {
                break;
            }
            if matches!(
                form,
                gimli::DW_FORM_ref_addr
                    | gimli::DW_FORM_ref_sig8
                    | gimli::DW_FORM_ref_sup4
                    | gimli::DW_FORM_ref_sup8
                    | gimli::DW_FORM_GNU_ref_alt
                    | gimli::DW_FORM_indirect
            ) {
                return Some(true);
            }
            if form == gimli::DW_FORM_implicit_const {
                r.read_sleb128().ok()?;
            }
        }
    }
}

/// A section's bytes, inflated straight into the buffer the reader keeps (a `Vec` turned into
/// an `Arc<[u8]>` is one more copy of 16 MiB); None when they do not inflate.
fn inflate(data: &object::CompressedData<'_>) -> Option<Bytes> {
    if data.format != object::CompressionFormat::Zlib {
        return Some(Bytes::owned(&data.decompress().ok()?[..]));
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
    Some(Bytes::owned(unsafe { out.assume_init() }))
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

#[cfg(test)]
mod tests;

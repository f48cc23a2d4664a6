//! File, line and inlined functions of a native PC, from a module's DWARF (its own, or its
//! separate debug file's), with the `addr2line` crate over gimli.

use crate::memory::mapped::FileBytes;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, OnceLock};

use gimli::{EndianArcSlice, LittleEndian, Reader as _, SectionId};
use object::{Object, ObjectSection};

use super::gdb_lines::{self, RawRow, Sequence};

type Reader = EndianArcSlice<LittleEndian>;
/// A file's DWARF sections, inflated.
type Sections = HashMap<SectionId, Arc<[u8]>>;
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
        let mut sections: Vec<Sections> = vec![HashMap::new(); paths.len()];
        for ((i, id, _), bytes) in jobs.iter().zip(inflated) {
            if let Some(b) = bytes {
                sections[*i].insert(*id, b);
            }
        }
        let empty: Arc<[u8]> = Arc::from(&[][..]);
        let jobs: Vec<(usize, Sections)> = sections.into_iter().enumerate().collect();
        let built = crate::parallel::map(&jobs, 1, true, |(i, secs)| {
            let mut secs = secs.clone();
            let part = wanted[*i].1.and_then(|addrs| {
                let (info, covered) = kept_units(&secs, addrs)?;
                secs.insert(SectionId::DebugInfo, info);
                // Its offsets into .debug_info are the whole section's.
                secs.remove(&SectionId::DebugAranges);
                Some(Part {
                    covered,
                    path: paths[*i].to_string(),
                    whole: OnceLock::new(),
                })
            });
            let load = |id: SectionId| -> Result<Reader, gimli::Error> {
                let bytes = secs.get(&id).cloned().unwrap_or_else(|| empty.clone());
                Ok(EndianArcSlice::new(bytes, LittleEndian))
            };
            let dwarf = gimli::Dwarf::load(load).ok()?;
            let ctx = addr2line::Context::from_dwarf(dwarf).ok()?;
            Some(Lines {
                ctx,
                gdb_rows: gdb_lines::Cache::default(),
                part,
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

/// A `.debug_info` of only the compilation units `.debug_aranges` names for `addrs`, and the
/// address ranges those units cover; None where that cannot be done exactly (an address no
/// unit covers, an unreadable unit, or a unit that refers into another one).
///
/// libc6-dbg's libc has 4,126 units: building addr2line's context parses every unit's
/// abbreviations and line-program header, 30 ms and 30 MiB for the one or two units a stack's
/// libc frames are in. A unit moved to another offset reads the same, as long as nothing in it
/// names a `.debug_info` offset: its own references are relative to its start, its other
/// offsets are into other sections.
fn kept_units(secs: &Sections, addrs: &[u64]) -> Option<(Arc<[u8]>, Ranges)> {
    let info = secs.get(&SectionId::DebugInfo)?;
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
    let debug_info = gimli::DebugInfo::new(info, LittleEndian);
    let mut out = Vec::new();
    for &u in &units {
        let header = debug_info
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
    Some((Arc::from(out), covered))
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

#[cfg(test)]
mod tests {
    use super::{kept_units, refers_across_units, Sections};
    use gimli::SectionId;
    use std::sync::Arc;

    /// A DWARF 4 compilation unit whose root DIE (abbreviation 1) has one inline string.
    fn unit(name: &str) -> Vec<u8> {
        let mut body = vec![4, 0, 0, 0, 0, 0, 8, 1]; // version, abbrev offset 0, address size, code
        body.extend(name.as_bytes());
        body.push(0);
        let mut out = (body.len() as u32).to_le_bytes().to_vec();
        out.extend(body);
        out
    }

    /// One .debug_aranges set: unit offset, (start, length) pairs.
    fn aranges(unit: u32, ranges: &[(u64, u64)]) -> Vec<u8> {
        let mut body = vec![2, 0];
        body.extend(unit.to_le_bytes());
        body.extend([8, 0, 0, 0, 0, 0]); // address size, segment size, padding to 16
        for &(a, n) in ranges.iter().chain([(0, 0)].iter()) {
            body.extend(a.to_le_bytes());
            body.extend(n.to_le_bytes());
        }
        let mut out = (body.len() as u32).to_le_bytes().to_vec();
        out.extend(body);
        out
    }

    #[test]
    fn only_the_units_covering_the_addresses_are_kept() {
        let (a, b) = (unit("a.c"), unit("b.c"));
        let info = [a.clone(), b.clone()].concat();
        let mut ar = aranges(0, &[(0x1000, 0x1000)]);
        ar.extend(aranges(a.len() as u32, &[(0x3000, 0x100), (0x5000, 0x10)]));
        // DW_TAG_compile_unit, no children, DW_AT_name/DW_FORM_string.
        let abbrev = vec![1, 0x11, 0, 0x03, 0x08, 0, 0, 0];
        let mut secs = Sections::new();
        secs.insert(SectionId::DebugInfo, Arc::from(info));
        secs.insert(SectionId::DebugAranges, Arc::from(ar));
        secs.insert(SectionId::DebugAbbrev, Arc::from(abbrev.clone()));

        let (kept, covered) = kept_units(&secs, &[0x3010, 0x5008]).expect("cut down");
        assert_eq!(&kept[..], &b[..]);
        assert_eq!(covered, vec![(0x3000, 0x3100), (0x5000, 0x5010)]);
        let (kept, _) = kept_units(&secs, &[0x1fff, 0x3000]).expect("cut down");
        assert_eq!(&kept[..], &[a.clone(), b.clone()].concat()[..]);
        // An address no unit covers, or just past a range: the whole DWARF.
        assert!(kept_units(&secs, &[0x2000]).is_none());
        assert!(kept_units(&secs, &[0x3100]).is_none());
        // A unit whose table has DW_FORM_ref_addr (DW_AT_abstract_origin): the whole DWARF.
        secs.insert(
            SectionId::DebugAbbrev,
            Arc::from(vec![1, 0x11, 0, 0x31, 0x10, 0, 0, 0]),
        );
        assert!(kept_units(&secs, &[0x3010]).is_none());
        // A unit offset past the section: the whole DWARF.
        let mut bad = aranges(0, &[(0x1000, 0x10)]);
        bad.extend(aranges(1 << 20, &[(0x3000, 0x10)]));
        secs.insert(SectionId::DebugAbbrev, Arc::from(abbrev));
        secs.insert(SectionId::DebugAranges, Arc::from(bad));
        assert!(kept_units(&secs, &[0x3000]).is_none());
    }

    /// An abbreviation: code, tag, children, then (attribute, form) pairs and the (0, 0) end.
    fn abbrev(code: u8, pairs: &[(u8, u8)]) -> Vec<u8> {
        let mut out = vec![code, 0x11, 1];
        for &(a, f) in pairs {
            out.extend([a, f]);
        }
        out.extend([0, 0]);
        out
    }

    #[test]
    fn tables_with_references_into_other_units_are_told() {
        // DW_AT_name/DW_FORM_strp, DW_AT_abstract_origin/DW_FORM_ref4: unit-relative only.
        let mut local = abbrev(1, &[(0x03, 0x0e), (0x31, 0x13)]);
        local.push(0);
        assert_eq!(refers_across_units(&local, 0), Some(false));
        // DW_AT_abstract_origin/DW_FORM_ref_addr, in the second abbreviation.
        let mut across = abbrev(1, &[(0x03, 0x0e)]);
        across.extend(abbrev(2, &[(0x31, 0x10)]));
        across.push(0);
        assert_eq!(refers_across_units(&across, 0), Some(true));
        // A table cut before its end, and an offset past the section, do not read.
        assert_eq!(refers_across_units(&local[..4], 0), None);
        assert_eq!(refers_across_units(&local, local.len() + 1), None);
    }
}

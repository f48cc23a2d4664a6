//! File, line and inlined functions of a native PC, from a module's DWARF (its own, or its
//! separate debug file's), with the `addr2line` crate over gimli.

use std::fs::File;
use std::sync::Arc;

use gimli::{EndianArcSlice, LittleEndian, SectionId};
use object::{Object, ObjectSection, ReadCache};

type Reader = EndianArcSlice<LittleEndian>;

/// A `.debug_*` section larger than this is not read (memory stays bounded).
const MAX_DWARF_SECTION_BYTES: u64 = 512 << 20;
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
}

impl Lines {
    /// The DWARF of the ELF file at `path`, None when it has no `.debug_info`.
    pub fn load(path: &str) -> Option<Lines> {
        let f = File::open(path).ok()?;
        let data = ReadCache::new(f);
        let obj = object::File::parse(&data).ok()?;
        obj.section_by_name(".debug_info")?;
        let load = |id: SectionId| -> Result<Reader, gimli::Error> {
            // Location lists, macros and name indexes are not needed for lines and inlined
            // calls; they are large, and a debug file compresses them.
            let unused = matches!(
                id,
                SectionId::DebugLoc
                    | SectionId::DebugLocLists
                    | SectionId::DebugMacinfo
                    | SectionId::DebugMacro
                    | SectionId::DebugPubNames
                    | SectionId::DebugPubTypes
            );
            let bytes: Arc<[u8]> = match obj.section_by_name(id.name()).filter(|_| !unused) {
                Some(s) if s.size() <= MAX_DWARF_SECTION_BYTES => match s.uncompressed_data() {
                    Ok(d) => Arc::from(&d[..]),
                    Err(_) => Arc::from(&[][..]),
                },
                _ => Arc::from(&[][..]),
            };
            Ok(EndianArcSlice::new(bytes, LittleEndian))
        };
        let dwarf = gimli::Dwarf::load(load).ok()?;
        let ctx = addr2line::Context::from_dwarf(dwarf).ok()?;
        Some(Lines { ctx })
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
        out
    }
}

//! The target's loaded modules and what their ELF files say (symbols, sections, segments).

mod elf;
mod maps;

pub use self::elf::{first_vaddr, ElfInfo};
pub use self::maps::{
    parse_proc_maps, parse_proc_regions, proc_maps_named, read_proc_maps, read_proc_maps_text,
};
pub use crate::memory::FileMapping;

/// One loaded file: all its mappings, and the bias that turns its ELF addresses into target
/// addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Module {
    pub path: String,
    pub start: u64,
    pub end: u64,
    /// Target address of the mapping at file offset 0.
    pub base: u64,
}

impl Module {
    /// Groups file mappings by path, in address order.
    pub fn from_mappings(maps: &[FileMapping]) -> Vec<Module> {
        let mut out: Vec<Module> = Vec::new();
        // Whether each module's base comes from a mapping at file offset 0: that one wins
        // over a base derived from another mapping's offset (libffi maps a page of its own
        // code again, below its image, for its closure trampolines).
        let mut from_zero: Vec<bool> = Vec::new();
        for m in maps {
            if let Some((x, z)) = out
                .iter_mut()
                .zip(from_zero.iter_mut())
                .find(|(x, _)| x.path == m.path)
            {
                x.start = x.start.min(m.start);
                x.end = x.end.max(m.end);
                if m.offset == 0 {
                    x.base = if *z { x.base.min(m.start) } else { m.start };
                    *z = true;
                }
            } else {
                from_zero.push(m.offset == 0);
                let base = if m.offset == 0 {
                    m.start
                } else {
                    m.start.saturating_sub(m.offset)
                };
                out.push(Module {
                    path: m.path.clone(),
                    start: m.start,
                    end: m.end,
                    base,
                });
            }
        }
        out.sort_by_key(|m| m.start);
        out
    }

    pub fn file_name(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or(&self.path)
    }

    pub fn contains(&self, addr: u64) -> bool {
        addr >= self.start && addr < self.end
    }
}

//! What we need from a module's ELF file, read once with `object`.

use crate::memory::mapped::FileBytes;
use std::collections::HashMap;

use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol};

use crate::error::{Error, Result};

/// Cap on a section we copy whole (the version-string scan of `.rodata`).
const MAX_SECTION_BYTES: u64 = 64 << 20;

#[derive(Clone, Debug, Default)]
pub struct ElfInfo {
    pub path: String,
    /// Requested symbols that the file defines: name -> ELF address.
    pub symbols: HashMap<String, u64>,
    /// Section name -> (ELF address, size).
    pub sections: HashMap<String, (u64, u64)>,
    /// Address of the segment that starts at file offset 0 (page-aligned).
    pub first_vaddr: u64,
    pub build_id: Option<Vec<u8>>,
    pub is_core: bool,
}

impl ElfInfo {
    /// Reads the dynamic symbol table, then the full one, for `wanted` names.
    pub fn load(path: &str, wanted: &[&str]) -> Result<ElfInfo> {
        let data = FileBytes::open(path).map_err(|e| Error::io(path, e))?;
        let obj = object::File::parse(data.bytes())
            .map_err(|e| Error::bad_file(path, format!("not an ELF file ({e})")))?;
        let mut symbols = HashMap::new();
        for sym in obj.dynamic_symbols().chain(obj.symbols()) {
            if !sym.is_definition() {
                continue;
            }
            if let Ok(name) = sym.name() {
                if wanted.contains(&name) {
                    symbols.entry(name.to_string()).or_insert(sym.address());
                }
            }
        }
        let sections = obj
            .sections()
            .filter_map(|s| Some((s.name().ok()?.to_string(), (s.address(), s.size()))))
            .collect();
        let first_vaddr = first_vaddr(&obj);
        let build_id = obj.build_id().ok().flatten().map(|b| b.to_vec());
        let is_core = obj.kind() == object::ObjectKind::Core;
        Ok(ElfInfo {
            path: path.to_string(),
            symbols,
            sections,
            first_vaddr,
            build_id,
            is_core,
        })
    }

    /// The bytes of a section, from the file.
    pub fn section_data(path: &str, name: &str) -> Result<Option<Vec<u8>>> {
        let data = FileBytes::open(path).map_err(|e| Error::io(path, e))?;
        let obj = object::File::parse(data.bytes())
            .map_err(|e| Error::bad_file(path, format!("not an ELF file ({e})")))?;
        let Some(sec) = obj.section_by_name(name) else {
            return Ok(None);
        };
        if sec.size() > MAX_SECTION_BYTES {
            return Ok(None);
        }
        Ok(sec.data().ok().map(|d| d.to_vec()))
    }
}

/// The page-aligned address of the segment that maps the file's start (else the first
/// segment): what a module's load base is measured from.
pub fn first_vaddr<'d, R: object::ReadRef<'d>>(obj: &object::File<'d, R>) -> u64 {
    obj.segments()
        .find(|s| s.file_range().0 == 0)
        .or_else(|| obj.segments().next())
        .map(|s| s.address() & !0xfff)
        .unwrap_or(0)
}

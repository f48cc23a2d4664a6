//! Naming native code: the function symbols of a module's ELF file (`.symtab`, then
//! `.dynsym`), looked up by address.

use object::{Object, ObjectSymbol, SymbolKind};

/// A cap on the symbols kept per file, so a corrupt or huge symbol table cannot make us
/// allocate without bound (libpython has about 10,000 functions; a large C++ library a few
/// hundred thousand).
const MAX_SYMBOLS: usize = 4 << 20;

/// Function symbols of one file, sorted by ELF address.
#[derive(Debug, Default)]
pub struct SymbolTable {
    /// (start, end, name): `end` is the symbol's size, or the next symbol's start when the
    /// size is 0.
    syms: Vec<(u64, u64, String)>,
}

impl SymbolTable {
    /// The defined function symbols of `obj`: `.symtab` first, then `.dynsym` for addresses
    /// it does not name (a stripped file has only `.dynsym`).
    pub fn from_object<'d, O: Object<'d>>(obj: &O) -> SymbolTable {
        let mut syms: Vec<(u64, u64, String)> = Vec::new();
        for sym in obj.symbols().chain(obj.dynamic_symbols()) {
            if syms.len() >= MAX_SYMBOLS {
                break;
            }
            if sym.kind() != SymbolKind::Text || !sym.is_definition() || sym.address() == 0 {
                continue;
            }
            let Ok(name) = sym.name() else { continue };
            if name.is_empty() {
                continue;
            }
            let start = sym.address();
            syms.push((start, start.saturating_add(sym.size()), name.to_string()));
        }
        // Stable: for one address, the .symtab name (pushed first) wins.
        syms.sort_by_key(|s| s.0);
        syms.dedup_by_key(|s| s.0);
        for i in 0..syms.len() {
            if syms[i].1 == syms[i].0 {
                syms[i].1 = syms.get(i + 1).map_or(u64::MAX, |n| n.0);
            }
        }
        SymbolTable { syms }
    }

    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }

    /// The function holding ELF address `addr`, and `addr`'s offset in it.
    pub fn lookup(&self, addr: u64) -> Option<(&str, u64)> {
        let i = self.syms.partition_point(|s| s.0 <= addr);
        // Sized symbols may nest or overlap (aliases of different sizes): look back a little.
        self.syms[..i]
            .iter()
            .rev()
            .take(8)
            .find(|s| addr < s.1)
            .map(|s| (s.2.as_str(), addr - s.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn looks_up_sized_and_unsized_symbols() {
        let t = SymbolTable {
            syms: vec![
                (0x100, 0x180, "a".into()),
                (0x200, 0x300, "b".into()),
                (0x300, u64::MAX, "c".into()),
            ],
        };
        assert_eq!(t.lookup(0x100), Some(("a", 0)));
        assert_eq!(t.lookup(0x17f), Some(("a", 0x7f)));
        assert_eq!(t.lookup(0x180), None);
        assert_eq!(t.lookup(0x2ff), Some(("b", 0xff)));
        assert_eq!(t.lookup(0x5000), Some(("c", 0x4d00)));
        assert_eq!(t.lookup(0x10), None);
    }
}

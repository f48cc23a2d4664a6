//! Naming native code: the function symbols of a module's ELF file (`.symtab`, then
//! `.dynsym`, then MiniDebugInfo, then a separate debug file), looked up by address.

pub mod debugfile;
pub mod debuginfod;
pub mod demangle;
pub mod gdb_lines;
pub mod lines;

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
    /// While adding: which file each symbol came from (0 = the first added).
    sources: Vec<u32>,
    /// While adding: whether each symbol is global or weak (gdb's `mst_text`), not local.
    globals: Vec<bool>,
    added: u32,
}

impl SymbolTable {
    /// The defined function symbols of `obj`: `.symtab` first, then `.dynsym` for addresses
    /// it does not name (a stripped file has only `.dynsym`).
    pub fn from_object<'d, O: Object<'d>>(obj: &O) -> SymbolTable {
        let mut t = SymbolTable::default();
        t.add(obj);
        t.finish();
        t
    }

    /// Adds `obj`'s function symbols (a file added earlier names an address first).
    pub fn add<'d, O: Object<'d>>(&mut self, obj: &O) {
        let source = self.added;
        self.added += 1;
        for sym in obj.symbols().chain(obj.dynamic_symbols()) {
            if self.syms.len() >= MAX_SYMBOLS {
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
            self.sources.push(source);
            self.globals.push(sym.is_global());
            self.syms
                .push((start, start.saturating_add(sym.size()), name.to_string()));
        }
    }

    /// Sorts, keeps one symbol per address and gives unsized symbols an end. Of aliases at
    /// one address the name kept is gdb's: from the first file that has one (the file before
    /// its separate debug file), and there the greatest in byte order (`clone3` of
    /// `__GI___clone3`, `__clone3`, `clone3`: gdb sorts one objfile's minimal symbols at one
    /// address by name and takes the last, gdb/minsyms.c), unless that one is local and the
    /// one before it global and of the same size, which gdb prefers, and so on
    /// (`work::run(int)` over `work::run(int) [clone .localalias]`, gcc's local alias of a
    /// global function for calls from inside its library).
    pub fn finish(&mut self) {
        let sources = std::mem::take(&mut self.sources);
        let globals = std::mem::take(&mut self.globals);
        let mut all: Vec<_> = std::mem::take(&mut self.syms)
            .into_iter()
            .zip(sources)
            .zip(globals)
            .map(|((s, source), global)| (s, source, global))
            .collect();
        all.sort_by(|(a, sa, _), (b, sb, _)| {
            a.0.cmp(&b.0).then(sa.cmp(sb)).then_with(|| b.2.cmp(&a.2))
        });
        let mut kept = Vec::with_capacity(all.len());
        let mut i = 0;
        while i < all.len() {
            // The first file's aliases at this address, greatest name first.
            let (addr, source) = (all[i].0 .0, all[i].1);
            let same = all[i..]
                .iter()
                .take_while(|(s, src, _)| s.0 == addr && *src == source)
                .count();
            let run = &all[i..i + same];
            let size = |k: usize| run[k].0 .1 - run[k].0 .0;
            let mut k = 0;
            while k + 1 < run.len() && !run[k].2 && run[k + 1].2 && size(k) == size(k + 1) {
                k += 1;
            }
            kept.push(run[k].0.clone());
            i += all[i..].iter().take_while(|(s, _, _)| s.0 == addr).count();
        }
        self.syms = kept;
        let syms = &mut self.syms;
        for i in 0..syms.len() {
            if syms[i].1 == syms[i].0 {
                syms[i].1 = syms.get(i + 1).map_or(u64::MAX, |n| n.0);
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }

    /// The (start, end) ELF address ranges of the functions whose name `keep` accepts.
    pub fn ranges_where(&self, keep: impl Fn(&str) -> bool) -> Vec<(u64, u64)> {
        self.syms
            .iter()
            .filter(|s| s.1 != u64::MAX && keep(&s.2))
            .map(|s| (s.0, s.1))
            .collect()
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
            sources: Vec::new(),
            globals: Vec::new(),
            added: 0,
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
        // Unsized symbols (an end of u64::MAX) have no range to give.
        assert_eq!(t.ranges_where(|n| n != "a"), vec![(0x200, 0x300)]);
    }

    #[test]
    fn aliases_are_named_as_gdb_names_them() {
        let mut t = SymbolTable::default();
        let mut add = |start: u64, size: u64, name: &str, source: u32, global: bool| {
            t.syms.push((start, start + size, name.into()));
            t.sources.push(source);
            t.globals.push(global);
        };
        // gcc's local alias of a global function: the global one.
        add(0x100, 0x20, "_ZN4work3runEi.localalias", 0, false);
        add(0x100, 0x20, "_ZN4work3runEi", 0, true);
        // glibc's: the greatest name, global.
        add(0x200, 0x10, "__GI___clone3", 0, false);
        add(0x200, 0x10, "__clone3", 0, true);
        add(0x200, 0x10, "clone3", 0, true);
        // A local alias of another size stays the greatest name.
        add(0x300, 0x8, "b_local", 0, false);
        add(0x300, 0x10, "a_global", 0, true);
        // Two locals: the greatest.
        add(0x400, 0x10, "y", 0, false);
        add(0x400, 0x10, "x", 0, false);
        add(0x400, 0x10, "w", 0, true);
        // The first file's name, whatever the debug file has.
        add(0x500, 0x10, "z_debug", 1, true);
        add(0x500, 0x10, "a_file", 0, false);
        t.finish();
        let names: Vec<_> = [0x100, 0x200, 0x300, 0x400, 0x500]
            .iter()
            .map(|&a| t.lookup(a).map(|(n, _)| n))
            .collect();
        assert_eq!(
            names,
            [
                Some("_ZN4work3runEi"),
                Some("clone3"),
                Some("b_local"),
                Some("y"),
                Some("a_file")
            ]
        );
    }
}

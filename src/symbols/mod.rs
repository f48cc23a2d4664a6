//! Naming native code: the function symbols of a module's ELF file (`.symtab`, then
//! `.dynsym`, then MiniDebugInfo, then a separate debug file), looked up by address.
//!
//! A large C++ library has hundreds of thousands of symbols (PyPI's libtorch_cpu.so: 545,000
//! in a 13 MiB `.symtab`, their names in 78 MiB of strings), and a stack has a handful of
//! frames in it. So the table is not built when a file is added: the symbol entries stay in
//! the file's mapping, and
//!
//! - [`SymbolTable::prepare`] answers a stack's addresses in one pass over the entries, which
//!   reads the names of only the few symbols that are candidates for them;
//! - any other lookup sorts every symbol once (24 bytes each, names left in the file) and
//!   answers by binary search.
//!
//! Both give the same answer (tested against each other): the symbols are the defined
//! `STT_FUNC` entries at a non-zero address whose names read as non-empty UTF-8; of aliases at
//! one address the one kept is gdb's (see [`SymbolTable::lookup`]).
//!
//! ```text
//! let mut t = SymbolTable::default();
//! t.add_file(Arc::new(FileBytes::open("libfoo.so")?));   // then its debug file's
//! t.prepare(&[0x1234, 0x5678]);                          // a stack's addresses in it
//! let (name, offset) = t.lookup(0x1234)?;                 // raw (mangled) name
//! ```

pub mod debugfile;
pub mod demangle;
pub mod gdb_lines;
pub mod lines;

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex, OnceLock};

use object::read::elf::{ElfFile64, FileHeader, SectionHeader};
use object::Endianness;

use crate::memory::mapped::FileBytes;

/// A cap on the symbol entries read in all (counted before their names are read), so that
/// a corrupt or huge symbol table cannot make us allocate without bound (libpython has about
/// 10,000 functions; a large C++ library a few hundred thousand).
const MAX_SYMBOLS: usize = 4 << 20;
/// Distinct addresses [`SymbolTable::prepare`] answers in one pass; beyond, the sorted table
/// is built (a pass costs a binary search over them per symbol).
const MAX_PREPARED_ADDRESSES: usize = 4096;
/// Entries of a table one core reads at a time in [`SymbolTable::prepare`] (a few in unit
/// tests, so that their tables are read in several runs and merged).
#[cfg(not(test))]
const CHUNK_ENTRIES: usize = 1 << 16;
#[cfg(test)]
const CHUNK_ENTRIES: usize = 7;
/// Aliases of one address [`SymbolTable::prepare`] keeps before choosing among them.
const MAX_ALIASES: usize = 64;
/// Symbols before an address that a lookup tries (sized symbols may nest or overlap: aliases
/// of different sizes).
const LOOK_BACK: usize = 8;
/// Size of an ELF64 symbol entry.
const SYM64_BYTES: usize = 24;
const STT_FUNC: u8 = 2;
const STB_LOCAL: u8 = 0;
const SHN_UNDEF: u16 = 0;
const SHN_LORESERVE: u16 = 0xff00;
const SHN_XINDEX: u16 = 0xffff;

/// Function symbols of one or more files (a file and its debug files), by ELF address.
#[derive(Default)]
pub struct SymbolTable {
    /// The files added, first first: a file added earlier names an address first.
    files: Vec<Arc<FileBytes>>,
    tables: Vec<Table>,
    /// Every symbol sorted by address, one per address: built on the first lookup that
    /// [`SymbolTable::prepare`] did not answer.
    sorted: OnceLock<Vec<Sym>>,
    /// What [`SymbolTable::prepare`] found, by address.
    prepared: Mutex<HashMap<u64, Option<Hit>>>,
}

impl std::fmt::Debug for SymbolTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SymbolTable")
            .field("files", &self.files.len())
            .field("tables", &self.tables)
            .field("sorted", &self.sorted.get().map(Vec::len))
            .finish()
    }
}

/// One symbol table (`.symtab` or `.dynsym`) of an added file: where its entries and its
/// strings are in the file's bytes (both checked to lie inside them).
#[derive(Clone, Debug)]
struct Table {
    file: usize,
    entries: Range<usize>,
    strings: Range<usize>,
    big_endian: bool,
}

/// A symbol of the sorted table: `end` is `start` plus its size, or for a symbol of size 0
/// the next symbol's start; its name is at `name` in table `table`'s strings.
#[derive(Clone, Copy, Debug)]
struct Sym {
    start: u64,
    end: u64,
    table: u32,
    name: u32,
}

/// A run of one table's entries (by index).
#[derive(Clone, Debug)]
struct Chunk {
    table: u32,
    entries: Range<usize>,
}

/// A symbol entry that passed the checks that need no name.
#[derive(Clone, Copy, Debug)]
struct Entry {
    start: u64,
    size: u64,
    table: u32,
    name: u32,
    /// Bound global or weak (gdb's `mst_text`), not local (`mst_file_text`).
    global: bool,
}

/// A lookup's answer: the symbol's name and start.
#[derive(Clone, Copy, Debug)]
struct Hit {
    table: u32,
    name: u32,
    start: u64,
}

/// [`SymbolTable::prepare`]'s state for the entries between two wanted addresses.
#[derive(Clone, Debug, Default)]
struct Bucket {
    /// The greatest distinct starts in it, in no order.
    top: Vec<Slot>,
    /// Its least start.
    least: Option<Slot>,
}

/// The entries at one start, in the order read: which alias is kept is decided once the
/// pass is over, so that names are read for the few starts an answer needs.
#[derive(Clone, Debug)]
struct Slot {
    first: Entry,
    more: Vec<Entry>,
}

impl Slot {
    fn new(e: Entry) -> Slot {
        Slot {
            first: e,
            more: Vec::new(),
        }
    }
}

impl SymbolTable {
    /// Adds the symbol tables of the ELF file `bytes` (a file added earlier names an address
    /// first). A file that does not parse as a 64-bit ELF file adds nothing.
    pub fn add_file(&mut self, bytes: Arc<FileBytes>) {
        let file = self.files.len();
        let Ok(elf) = ElfFile64::<Endianness>::parse(bytes.bytes()) else {
            return;
        };
        let big_endian = elf.elf_header().is_big_endian();
        let endian = elf.endian();
        let sections = elf.elf_section_table();
        let data = bytes.bytes();
        let range = |index: object::SectionIndex| -> Option<Range<usize>> {
            let (off, size) = sections.section(index).ok()?.file_range(endian)?;
            let start = usize::try_from(off).ok()?;
            let end = start.checked_add(usize::try_from(size).ok()?)?;
            (end <= data.len()).then_some(start..end)
        };
        let mut added = false;
        for t in [elf.elf_symbol_table(), elf.elf_dynamic_symbol_table()] {
            if t.is_empty() {
                continue;
            }
            let (Some(entries), Some(strings)) = (range(t.section()), range(t.string_section()))
            else {
                continue;
            };
            self.tables.push(Table {
                file,
                entries,
                strings,
                big_endian,
            });
            added = true;
        }
        if added {
            self.files.push(bytes);
        }
    }

    /// Calls `f` with each entry that is a defined function at a non-zero address with a
    /// name, in the files' order, `.symtab` before `.dynsym`, of the first [`MAX_SYMBOLS`]
    /// entries.
    fn each(&self, mut f: impl FnMut(Entry)) {
        for c in self.chunks() {
            self.each_in(&c, &mut f);
        }
    }

    /// The entries [`SymbolTable::each`] reads, in that order, as runs of at most
    /// [`CHUNK_ENTRIES`] entries of one table.
    fn chunks(&self) -> Vec<Chunk> {
        let mut out = Vec::new();
        let mut left = MAX_SYMBOLS;
        for (t, table) in self.tables.iter().enumerate() {
            let n = (table.entries.len() / SYM64_BYTES).min(left);
            left -= n;
            for from in (0..n).step_by(CHUNK_ENTRIES) {
                out.push(Chunk {
                    table: t as u32,
                    entries: from..(from + CHUNK_ENTRIES).min(n),
                });
            }
        }
        out
    }

    fn each_in(&self, chunk: &Chunk, f: &mut impl FnMut(Entry)) {
        let Some(table) = self.tables.get(chunk.table as usize) else {
            return;
        };
        let Some(bytes) = self.files.get(table.file).and_then(|b| {
            let start = table.entries.start + chunk.entries.start * SYM64_BYTES;
            b.bytes()
                .get(start..table.entries.start + chunk.entries.end * SYM64_BYTES)
        }) else {
            return;
        };
        let big = table.big_endian;
        for e in bytes.chunks_exact(SYM64_BYTES) {
            let info = e[4];
            let shndx = read_u16(&e[6..8], big);
            let start = read_u64(&e[8..16], big);
            let name = read_u32(&e[0..4], big);
            // `object`'s rule for a defined function: not undefined, not a reserved section
            // index other than the escape to an extended one.
            let defined = shndx != SHN_UNDEF && (shndx < SHN_LORESERVE || shndx == SHN_XINDEX);
            if info & 0xf != STT_FUNC || !defined || start == 0 || name == 0 {
                continue;
            }
            f(Entry {
                start,
                size: read_u64(&e[16..24], big),
                table: chunk.table,
                name,
                global: info >> 4 != STB_LOCAL,
            });
        }
    }

    /// The name at offset `name` of table `table`'s strings, if it reads as non-empty UTF-8.
    fn name(&self, table: u32, name: u32) -> Option<&str> {
        let t = self.tables.get(table as usize)?;
        let strings = self.files.get(t.file)?.bytes().get(t.strings.clone())?;
        let tail = strings.get(name as usize..)?;
        let end = tail.iter().position(|&b| b == 0)?;
        std::str::from_utf8(&tail[..end])
            .ok()
            .filter(|s| !s.is_empty())
    }

    fn file_of(&self, table: u32) -> usize {
        self.tables
            .get(table as usize)
            .map_or(usize::MAX, |t| t.file)
    }

    /// Orders aliases at one address for [`SymbolTable::choose`]: names that read first, then
    /// the first file's, then the greatest name in byte order.
    fn alias_order(&self, a: &Entry, b: &Entry) -> std::cmp::Ordering {
        let (na, nb) = (self.name(a.table, a.name), self.name(b.table, b.name));
        na.is_none()
            .cmp(&nb.is_none())
            .then_with(|| self.file_of(a.table).cmp(&self.file_of(b.table)))
            .then_with(|| nb.cmp(&na))
    }

    /// The alias gdb names an address by, of `run`: aliases at one address in
    /// [`SymbolTable::alias_order`] (of equal ones the first read first). gdb sorts an
    /// objfile's minimal symbols at one address by name and takes the last, unless that one
    /// is local and the one before it global and of the same size (gdb/minsyms.c,
    /// `lookup_minimal_symbol_by_pc_section`):
    /// `clone3` of `__GI___clone3`, `__clone3`, `clone3`; `work::run(int)` over
    /// `work::run(int) [clone .localalias]`, gcc's local alias of a global function for calls
    /// from inside its library.
    fn choose(&self, run: &[Entry]) -> Entry {
        match run {
            [a, b, ..]
                if !a.global
                    && b.global
                    && a.size == b.size
                    && self.file_of(a.table) == self.file_of(b.table)
                    && self.name(b.table, b.name).is_some() =>
            {
                *b
            }
            [a, ..] => *a,
            [] => unreachable!("a slot has an entry"),
        }
    }

    /// Every symbol, sorted by address, one per address (the alias [`SymbolTable::choose`]
    /// keeps), each unsized one ending where the next begins.
    fn sorted(&self) -> &[Sym] {
        self.sorted.get_or_init(|| {
            let mut all: Vec<(Entry, usize)> = Vec::new();
            self.each(|e| {
                if self.name(e.table, e.name).is_some() {
                    all.push((e, all.len()));
                }
            });
            all.sort_unstable_by(|(a, ia), (b, ib)| {
                a.start
                    .cmp(&b.start)
                    .then_with(|| self.alias_order(a, b))
                    .then(ia.cmp(ib))
            });
            let all: Vec<Entry> = all.into_iter().map(|(e, _)| e).collect();
            let mut syms: Vec<Sym> = all
                .chunk_by(|a, b| a.start == b.start)
                .map(|run| self.choose(run))
                .map(|e| Sym {
                    start: e.start,
                    end: e.start.saturating_add(e.size),
                    table: e.table,
                    name: e.name,
                })
                .collect();
            for i in 0..syms.len() {
                if syms[i].end == syms[i].start {
                    syms[i].end = syms.get(i + 1).map_or(u64::MAX, |n| n.start);
                }
            }
            syms
        })
    }

    /// Finds the symbols of `addrs` in one pass over the entries, for [`SymbolTable::lookup`]
    /// to answer without sorting the whole table: a stack's frames in a large library are a
    /// few addresses among hundreds of thousands of symbols.
    pub fn prepare(&self, addrs: &[u64]) {
        if self.sorted.get().is_some() {
            return;
        }
        let mut want: Vec<u64> = {
            let done = lock(&self.prepared);
            addrs
                .iter()
                .copied()
                .filter(|a| !done.contains_key(a))
                .collect()
        };
        want.sort_unstable();
        want.dedup();
        if want.is_empty() {
            return;
        }
        if want.len() > MAX_PREPARED_ADDRESSES {
            self.sorted();
            return;
        }
        // Bucket j holds the entries starting in (want[j-1], want[j]]; the last, those after
        // every wanted address. Names are not read in the pass: an entry whose name does not
        // read is kept like the others, and an answer that depends on one is left to the
        // sorted table.
        // The table's runs on every core, their buckets then merged in the order read.
        let last = want.len();
        let parts = crate::parallel::map(&self.chunks(), 1, true, |c| {
            let mut buckets = vec![Bucket::default(); want.len() + 1];
            self.each_in(c, &mut |e| {
                let j = bucket_of(&want, e.start);
                self.add(&mut buckets[j], Slot::new(e), j > 0, j < last);
            });
            buckets
        });
        let mut parts = parts.into_iter();
        let mut buckets = parts
            .next()
            .unwrap_or_else(|| vec![Bucket::default(); want.len() + 1]);
        for part in parts {
            for (j, (into, from)) in buckets.iter_mut().zip(part).enumerate() {
                if let Some(l) = from.least {
                    self.add(into, l, j > 0, false);
                }
                for slot in from.top {
                    self.add(into, slot, false, j < last);
                }
            }
        }
        let mut done = lock(&self.prepared);
        for (j, &a) in want.iter().enumerate() {
            // The greatest starts at or before `a`, greatest first, and the least after it.
            let mut before: Vec<Entry> = Vec::new();
            for b in buckets[..=j].iter_mut().rev() {
                b.top
                    .sort_unstable_by_key(|s| std::cmp::Reverse(s.first.start));
                before.extend(b.top.iter().map(|s| self.kept(s)));
                if before.len() >= LOOK_BACK {
                    break;
                }
            }
            before.truncate(LOOK_BACK);
            let after = buckets[j + 1..]
                .iter()
                .find_map(|b| b.least.as_ref())
                .map(|s| self.kept(s));
            let valid = |e: &Entry| self.name(e.table, e.name).is_some();
            if !before.iter().all(valid) || after.as_ref().is_some_and(|e| !valid(e)) {
                continue;
            }
            let hit = before.iter().enumerate().find_map(|(i, c)| {
                let mut end = c.start.saturating_add(c.size);
                if end == c.start {
                    end = match i {
                        0 => after.map_or(u64::MAX, |e| e.start),
                        _ => before[i - 1].start,
                    };
                }
                (a < end).then_some(Hit {
                    table: c.table,
                    name: c.name,
                    start: c.start,
                })
            });
            done.insert(a, hit);
        }
    }

    /// Adds the entries of `slot` to bucket `b`: to its least start (`least`) and to its
    /// greatest ones (`top`).
    fn add(&self, b: &mut Bucket, slot: Slot, least: bool, top: bool) {
        let start = slot.first.start;
        if least {
            match &mut b.least {
                Some(l) if l.first.start == start => self.absorb(l, slot.clone()),
                Some(l) if l.first.start < start => {}
                l => *l = Some(slot.clone()),
            }
        }
        if !top {
            return;
        }
        // The slot of the least start in the top, replaced by a greater start.
        let mut least: Option<(usize, u64)> = None;
        for (k, s) in b.top.iter_mut().enumerate() {
            let at = s.first.start;
            if at == start {
                return self.absorb(s, slot);
            }
            if least.is_none_or(|(_, l)| at < l) {
                least = Some((k, at));
            }
        }
        match least {
            _ if b.top.len() < LOOK_BACK => b.top.push(slot),
            Some((k, l)) if l < start => b.top[k] = slot,
            _ => {}
        }
    }

    /// Adds the aliases of `from`, read after those of `into`, to `into`; past
    /// [`MAX_ALIASES`] it keeps only the one it would.
    fn absorb(&self, into: &mut Slot, from: Slot) {
        into.more.push(from.first);
        into.more.extend(from.more);
        if into.more.len() >= MAX_ALIASES {
            let kept = self.kept(into);
            *into = Slot::new(kept);
        }
    }

    /// The alias of a slot that is kept ([`SymbolTable::choose`]).
    fn kept(&self, slot: &Slot) -> Entry {
        if slot.more.is_empty() {
            return slot.first;
        }
        let mut run: Vec<Entry> = std::iter::once(slot.first)
            .chain(slot.more.iter().copied())
            .collect();
        // Stable: of equal ones the first read stays first.
        run.sort_by(|a, b| self.alias_order(a, b));
        self.choose(&run)
    }

    /// The (start, end) ELF address ranges of the functions whose name `keep` accepts.
    pub fn ranges_where(&self, keep: impl Fn(&str) -> bool) -> Vec<(u64, u64)> {
        self.sorted()
            .iter()
            .filter(|s| s.end != u64::MAX && self.name(s.table, s.name).is_some_and(&keep))
            .map(|s| (s.start, s.end))
            .collect()
    }

    /// The function holding ELF address `addr` (its raw symbol name), and `addr`'s offset in
    /// it. Of aliases at one address the name is gdb's: from the first file that has one (the
    /// file before its separate debug file), and there as [`SymbolTable::choose`] says. A symbol of size 0 ends where
    /// the next begins; of the [`LOOK_BACK`] symbols starting last at or before `addr`, the
    /// first that holds it is the answer.
    pub fn lookup(&self, addr: u64) -> Option<(&str, u64)> {
        let hit = match self.sorted.get() {
            Some(syms) => lookup_sorted(syms, addr),
            None => match lock(&self.prepared).get(&addr) {
                Some(hit) => *hit,
                None => lookup_sorted(self.sorted(), addr),
            },
        }?;
        Some((self.name(hit.table, hit.name)?, addr - hit.start))
    }
}

fn lookup_sorted(syms: &[Sym], addr: u64) -> Option<Hit> {
    let i = syms.partition_point(|s| s.start <= addr);
    syms[..i]
        .iter()
        .rev()
        .take(LOOK_BACK)
        .find(|s| addr < s.end)
        .map(|s| Hit {
            table: s.table,
            name: s.name,
            start: s.start,
        })
}

/// Wanted addresses counted one by one, without branches, below this many; a binary search
/// beyond (a search's steps each wait for the one before).
const LINEAR_BUCKETS: usize = 32;

/// How many of the sorted addresses `want` are below `start`: the bucket it goes in.
fn bucket_of(want: &[u64], start: u64) -> usize {
    if want.len() <= LINEAR_BUCKETS {
        want.iter().map(|&a| usize::from(a < start)).sum()
    } else {
        want.partition_point(|&a| a < start)
    }
}

/// The map, also after a thread panicked holding it (it holds only finished answers).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn read_u16(b: &[u8], big: bool) -> u16 {
    let mut a = [0u8; 2];
    a.copy_from_slice(b);
    if big {
        u16::from_be_bytes(a)
    } else {
        u16::from_le_bytes(a)
    }
}

fn read_u32(b: &[u8], big: bool) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(b);
    if big {
        u32::from_be_bytes(a)
    } else {
        u32::from_le_bytes(a)
    }
}

fn read_u64(b: &[u8], big: bool) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(b);
    if big {
        u64::from_be_bytes(a)
    } else {
        u64::from_le_bytes(a)
    }
}

#[cfg(test)]
mod tests;

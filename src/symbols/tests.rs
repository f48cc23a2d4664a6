use super::*;

const STT_OBJECT: u8 = 1;
const STT_GNU_IFUNC: u8 = 10;
const SHN_ABS: u16 = 0xfff1;

/// One symbol of a test file: name, address, size, st_info (binding and type), section
/// index.
#[derive(Clone, Debug)]
struct S(Vec<u8>, u64, u64, u8, u16);

const STB_GLOBAL: u8 = 1;

fn func(name: &str, addr: u64, size: u64) -> S {
    S(
        name.as_bytes().to_vec(),
        addr,
        size,
        STT_FUNC | STB_GLOBAL << 4,
        1,
    )
}

fn local(name: &str, addr: u64, size: u64) -> S {
    S(name.as_bytes().to_vec(), addr, size, STT_FUNC, 1)
}

/// A little-endian ELF64 file with a `.symtab` of `symtab` and a `.dynsym` of `dynsym`.
fn elf(symtab: &[S], dynsym: &[S]) -> Vec<u8> {
    fn table(syms: &[S]) -> (Vec<u8>, Vec<u8>) {
        let mut strs = vec![0u8];
        let mut entries = vec![0u8; SYM64_BYTES];
        for S(name, addr, size, kind, shndx) in syms {
            let off = if name.is_empty() {
                0
            } else {
                strs.len() as u32
            };
            if !name.is_empty() {
                strs.extend_from_slice(name);
                strs.push(0);
            }
            entries.extend_from_slice(&off.to_le_bytes());
            entries.push(*kind);
            entries.push(0);
            entries.extend_from_slice(&shndx.to_le_bytes());
            entries.extend_from_slice(&addr.to_le_bytes());
            entries.extend_from_slice(&size.to_le_bytes());
        }
        (entries, strs)
    }
    let (sym, str_) = table(symtab);
    let (dsym, dstr) = table(dynsym);
    let shstr = b"\0.symtab\0.strtab\0.dynsym\0.dynstr\0.shstrtab\0".to_vec();
    // (name offset in shstr, type, link, entsize, data)
    let sections: Vec<(u32, u32, u32, u64, &[u8])> = vec![
        (1, 2, 2, 24, &sym),
        (9, 3, 0, 0, &str_),
        (17, 11, 4, 24, &dsym),
        (25, 3, 0, 0, &dstr),
        (33, 3, 0, 0, &shstr),
    ];
    let mut out = vec![0u8; 64];
    let mut offsets = Vec::new();
    for s in &sections {
        offsets.push(out.len() as u64);
        out.extend_from_slice(s.4);
        while out.len() % 8 != 0 {
            out.push(0);
        }
    }
    let shoff = out.len() as u64;
    out.extend_from_slice(&[0u8; 64]); // the null section
    for (s, off) in sections.iter().zip(&offsets) {
        let mut h = Vec::new();
        h.extend_from_slice(&s.0.to_le_bytes());
        h.extend_from_slice(&s.1.to_le_bytes());
        h.extend_from_slice(&0u64.to_le_bytes()); // flags
        h.extend_from_slice(&0u64.to_le_bytes()); // addr
        h.extend_from_slice(&off.to_le_bytes());
        h.extend_from_slice(&(s.4.len() as u64).to_le_bytes());
        h.extend_from_slice(&s.2.to_le_bytes());
        h.extend_from_slice(&1u32.to_le_bytes()); // info: first global
        h.extend_from_slice(&8u64.to_le_bytes());
        h.extend_from_slice(&s.3.to_le_bytes());
        out.extend_from_slice(&h);
    }
    out[..4].copy_from_slice(b"\x7fELF");
    out[4] = 2; // ELFCLASS64
    out[5] = 1; // little-endian
    out[6] = 1;
    out[16..18].copy_from_slice(&3u16.to_le_bytes()); // ET_DYN
    out[18..20].copy_from_slice(&62u16.to_le_bytes()); // x86-64
    out[20..24].copy_from_slice(&1u32.to_le_bytes());
    out[40..48].copy_from_slice(&shoff.to_le_bytes());
    out[52..54].copy_from_slice(&64u16.to_le_bytes());
    out[54..56].copy_from_slice(&56u16.to_le_bytes());
    out[58..60].copy_from_slice(&64u16.to_le_bytes());
    out[60..62].copy_from_slice(&(sections.len() as u16 + 1).to_le_bytes());
    out[62..64].copy_from_slice(&(sections.len() as u16).to_le_bytes());
    out
}

fn table_of(files: &[Vec<u8>]) -> SymbolTable {
    let mut t = SymbolTable::default();
    for f in files {
        t.add_file(Arc::new(FileBytes::Read(f.clone())));
    }
    t
}

/// Each address looked up in a table that prepared them all (and answered them without
/// sorting), and in one that sorts.
fn both(files: &[Vec<u8>], addrs: &[u64]) -> Vec<Option<(String, u64)>> {
    let (out, sorted) = compared(files, addrs);
    assert!(!sorted, "prepared lookups sorted the table");
    out
}

/// Each address looked up in a table that prepared them all, and in one that sorts; and
/// whether the first sorted too (an answer that depends on a name that does not read).
fn compared(files: &[Vec<u8>], addrs: &[u64]) -> (Vec<Option<(String, u64)>>, bool) {
    let prepared = table_of(files);
    prepared.prepare(addrs);
    let sorted = table_of(files);
    let out: Vec<_> = addrs
        .iter()
        .map(|&a| prepared.lookup(a).map(|(n, o)| (n.to_string(), o)))
        .collect();
    for (a, p) in addrs.iter().zip(&out) {
        let s = sorted.lookup(*a).map(|(n, o)| (n.to_string(), o));
        assert_eq!(&s, p, "address {a:#x}: sorted {s:?}, prepared {p:?}");
    }
    (out, prepared.sorted.get().is_some())
}

fn named(n: &str, off: u64) -> Option<(String, u64)> {
    Some((n.to_string(), off))
}

#[test]
fn looks_up_sized_and_unsized_symbols() {
    let f = elf(
        &[
            func("a", 0x100, 0x80),
            func("b", 0x200, 0x100),
            func("c", 0x300, 0),
        ],
        &[],
    );
    let got = both(
        std::slice::from_ref(&f),
        &[0x100, 0x17f, 0x180, 0x2ff, 0x5000, 0x10],
    );
    assert_eq!(
        got,
        [
            named("a", 0),
            named("a", 0x7f),
            None,
            named("b", 0xff),
            named("c", 0x4d00),
            None
        ]
    );
    // Unsized symbols (an end of u64::MAX) have no range to give.
    assert_eq!(
        table_of(&[f]).ranges_where(|n| n != "a"),
        vec![(0x200, 0x300)]
    );
}

#[test]
fn an_unsized_symbol_ends_at_the_next_one() {
    let f = elf(&[func("a", 0x100, 0), func("b", 0x200, 0x10)], &[]);
    assert_eq!(
        both(&[f], &[0x1ff, 0x205, 0x210]),
        [named("a", 0xff), named("b", 5), None]
    );
}

#[test]
fn aliases_are_named_as_gdb_names_them() {
    // One file: the greatest name in byte order; .symtab and .dynsym are one file's.
    let lib = elf(
        &[
            func("__GI___clone3", 0x100, 0x40),
            func("__clone3", 0x100, 0x40),
        ],
        &[func("clone3", 0x100, 0x40)],
    );
    // A debug file added after it names the address only where the first file does not.
    let debug = elf(
        &[
            func("zzz_debug", 0x100, 0x40),
            func("only_debug", 0x200, 0x10),
        ],
        &[],
    );
    assert_eq!(
        both(&[lib, debug], &[0x110, 0x204]),
        [named("clone3", 0x10), named("only_debug", 4)]
    );
}

#[test]
fn a_global_alias_of_a_local_one_of_the_same_size_is_kept() {
    let lib = elf(
        &[
            // gcc's local alias of a global function: the global one.
            local("_ZN4work3runEi.localalias", 0x100, 0x20),
            func("_ZN4work3runEi", 0x100, 0x20),
            // A local alias of another size stays the greatest name.
            local("b_local", 0x300, 0x8),
            func("a_global", 0x300, 0x10),
            // Two locals before a global: the greatest.
            local("y", 0x400, 0x10),
            local("x", 0x400, 0x10),
            func("w", 0x400, 0x10),
        ],
        &[],
    );
    // The first file's name, whatever the debug file has.
    let first = elf(&[local("a_file", 0x500, 0x10)], &[]);
    let debug = elf(&[func("z_debug", 0x500, 0x10)], &[]);
    assert_eq!(
        both(&[lib, first, debug], &[0x100, 0x304, 0x400, 0x500]),
        [
            named("_ZN4work3runEi", 0),
            named("b_local", 4),
            named("y", 0),
            named("a_file", 0)
        ]
    );
}

#[test]
fn only_defined_functions_with_names_count() {
    let f = elf(
        &[
            func("outer", 0x100, 0x100),
            S(b"data".to_vec(), 0x180, 0x10, STT_OBJECT, 1),
            S(b"ifunc".to_vec(), 0x180, 0x10, STT_GNU_IFUNC, 1),
            S(b"undefined".to_vec(), 0x180, 0x10, STT_FUNC, SHN_UNDEF),
            S(b"absolute".to_vec(), 0x180, 0x10, STT_FUNC, SHN_ABS),
            S(b"\xff\xfe".to_vec(), 0x180, 0x10, STT_FUNC, 1),
            S(Vec::new(), 0x180, 0x10, STT_FUNC, 1),
            func("at_zero", 0, 0x1000),
        ],
        &[],
    );
    // The name that does not read starts where no other function does: that answer is the
    // sorted table's.
    let (got, sorted) = compared(&[f], &[0x184, 0x10]);
    assert_eq!(got, [named("outer", 0x84), None]);
    assert!(sorted);
}

#[test]
fn nested_symbols_are_found_within_the_look_back() {
    let mut syms = vec![func("outer", 0x1000, 0x1000)];
    for i in 0..LOOK_BACK as u64 {
        syms.push(func(&format!("inner{i}"), 0x1100 + i * 0x10, 8));
    }
    let f = elf(&syms, &[]);
    // Past the last inner symbol: seven of them and `outer` are looked at.
    let near = 0x1100 + (LOOK_BACK as u64 - 1) * 0x10 + 8;
    assert_eq!(both(std::slice::from_ref(&f), &[near]), [None]);
    let f7 = elf(&syms[..LOOK_BACK], &[]);
    assert_eq!(both(&[f7], &[near]), [named("outer", near - 0x1000)]);
    assert_eq!(both(&[f], &[0x1104]), [named("inner0", 4)]);
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[test]
fn prepared_lookups_answer_as_the_sorted_table() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut found, mut asked) = (0, 0);
    for _ in 0..300 {
        let mut files = Vec::new();
        for _ in 0..1 + rng.below(3) {
            let mut tables = [Vec::new(), Vec::new()];
            for t in &mut tables {
                for k in 0..rng.below(60) {
                    let addr = 0x1000 + rng.below(0x400) * 4;
                    let size = [0, 0, 4, 16, 64, 0x200][rng.below(6) as usize];
                    let name = match rng.below(12) {
                        0 => b"\xc3\x28".to_vec(),
                        1 => Vec::new(),
                        n => format!("f{}_{}", n % 4, k % 5).into_bytes(),
                    };
                    let kind = if rng.below(10) == 0 {
                        STT_OBJECT
                    } else {
                        STT_FUNC
                    } | (rng.below(2) as u8 * STB_GLOBAL) << 4;
                    t.push(S(name, addr, size, kind, 1));
                }
            }
            files.push(elf(&tables[0], &tables[1]));
        }
        let addrs: Vec<u64> = (0..1 + rng.below(40))
            .map(|_| 0xff0 + rng.below(0x1100))
            .collect();
        let (got, _) = compared(&files, &addrs);
        found += got.iter().filter(|g| g.is_some()).count();
        asked += got.len();
    }
    assert!(found * 4 > asked, "{found} of {asked} addresses named");
}

#[test]
fn corrupt_files_give_no_symbols_and_no_panic() {
    let good = elf(
        &[
            func("a", 0x100, 0x80),
            func("b", 0x200, 0),
            func("c", 0x300, 0x10),
        ],
        &[func("d", 0x400, 0x10)],
    );
    let mut rng = Rng(42);
    for _ in 0..2000 {
        let mut f = good.clone();
        for _ in 0..1 + rng.below(8) {
            let i = rng.below(f.len() as u64) as usize;
            f[i] = rng.next() as u8;
        }
        if rng.below(4) == 0 {
            f.truncate(rng.below(f.len() as u64) as usize);
        }
        let t = table_of(&[f.clone()]);
        t.prepare(&[0x110, 0x250, 0x404, u64::MAX]);
        for a in [0x110, 0x250, 0x404, u64::MAX, 0] {
            let _ = t.lookup(a);
        }
        let _ = table_of(&[f]).ranges_where(|_| true);
    }
}

//! A unit's line table as gdb keeps it, so that a PC's file and line are the ones gdb shows.
//!
//! When several rows share an address, DWARF (and the `addr2line` crate) take the last one. gdb
//! records rows with its own rules and then prefers a statement row, so optimized code, where
//! one address often has rows of an inlined header and of the caller's file, gets another line
//! from gdb. Example: Debian's python3.11 (3.11.2-6+deb12u9, python3.11-dbg), return address
//! 0x51e3df in `cfunction_vectorcall_O`: the rows at 0x51e3d9 are methodobject.h:52 (statement),
//! methodobject.h:52 and methodobject.c:514 (not statements); gdb shows methodobject.h:52,
//! addr2line methodobject.c:514.
//!
//! The rules are gdb 13's (gdb/dwarf2/read.c `lnp_state_machine::record_line` and
//! `dwarf_record_line_p`, gdb/buildsym.c `buildsym_compunit::record_line`, gdb/symtab.c
//! `find_pc_sect_line`):
//! - a row with line 0 is not recorded;
//! - a row that is not a statement, switches file, and sits at an address where a statement row
//!   was already seen, is not recorded;
//! - a row of the same file and line as the last recorded one is not recorded once that line
//!   had a non-zero discriminator;
//! - switching file ends the old file's range at the new row's address, which drops the old
//!   file's rows at that same address;
//! - a lookup takes the last recorded row at or below the PC; when that row is not a statement,
//!   an earlier statement row at the same address wins.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Units whose recorded rows are kept; past this the cache starts again (memory stays bounded).
const MAX_CACHED_UNITS: usize = 64;
/// Rows recorded per unit, at most (a corrupt line program cannot grow memory without end).
const MAX_ROWS_PER_UNIT: usize = 4 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row {
    pub address: u64,
    pub file_index: u64,
    pub line: u32,
    pub is_stmt: bool,
}

/// One row of a line program, as the state machine emits it.
#[derive(Clone, Copy, Debug)]
pub struct RawRow {
    pub address: u64,
    pub file_index: u64,
    pub line: u32,
    pub is_stmt: bool,
    pub discriminator: u64,
    pub end_sequence: bool,
}

/// A sequence's recorded rows, from its first row's address to the one its `end_sequence` row
/// gives.
#[derive(Debug, Default)]
pub struct Sequence {
    pub start: u64,
    pub end: u64,
    pub rows: Vec<Row>,
}

/// Applies gdb's recording rules to the rows of one line program; the sequences come out
/// sorted by start.
pub fn record(raw: impl IntoIterator<Item = RawRow>) -> Vec<Sequence> {
    let mut out = Vec::new();
    let mut cur = Sequence::default();
    let mut last_file: Option<u64> = None;
    let mut last_line = 0u32;
    let mut last_address: Option<u64> = None;
    let mut stmt_at_address = false;
    let mut prev_line = 0u32;
    let mut line_has_discriminator = false;
    let mut rows_total = 0usize;
    for r in raw {
        if r.line != prev_line {
            line_has_discriminator = false;
            prev_line = r.line;
        }
        line_has_discriminator |= r.discriminator != 0;
        if r.end_sequence {
            if let Some(first) = cur.rows.first() {
                cur.start = first.address;
                cur.end = r.address;
                out.push(std::mem::take(&mut cur));
            }
            last_file = None;
            last_address = None;
            stmt_at_address = false;
            continue;
        }
        let file_changed = last_file != Some(r.file_index);
        let ignore = r.line == 0
            || (file_changed
                && last_file.is_some()
                && last_address == Some(r.address)
                && !r.is_stmt
                && stmt_at_address);
        if !ignore {
            if file_changed {
                // The old file's end marker at this address pops its rows there.
                while cur.rows.last().is_some_and(|x| x.address == r.address) {
                    cur.rows.pop();
                }
            }
            let same_line = !file_changed && r.line == last_line;
            if !(same_line && line_has_discriminator) && rows_total < MAX_ROWS_PER_UNIT {
                cur.rows.push(Row {
                    address: r.address,
                    file_index: r.file_index,
                    line: r.line,
                    is_stmt: r.is_stmt,
                });
                rows_total += 1;
            }
            last_file = Some(r.file_index);
            last_line = r.line;
        }
        if last_address != Some(r.address) {
            stmt_at_address = false;
            last_address = Some(r.address);
        }
        stmt_at_address |= r.is_stmt;
    }
    out.sort_unstable_by_key(|s| s.start);
    out
}

/// The row gdb finds for `addr`, if a sequence covers it.
pub fn lookup(seqs: &[Sequence], addr: u64) -> Option<Row> {
    // A unit built with -ffunction-sections has a sequence per function: search, not scan.
    let seq = &seqs[seqs.partition_point(|s| s.start <= addr).checked_sub(1)?];
    if addr >= seq.end {
        return None;
    }
    let rows = &seq.rows;
    let mut i = rows.partition_point(|r| r.address <= addr).checked_sub(1)?;
    if !rows[i].is_stmt {
        let mut j = i;
        while j > 0 && rows[j - 1].address == rows[j].address && !rows[j].is_stmt {
            j -= 1;
        }
        if rows[j].is_stmt {
            i = j;
        }
    }
    Some(rows[i])
}

/// Recorded rows per unit, built on first use.
#[derive(Default)]
pub struct Cache {
    units: Mutex<HashMap<usize, Arc<Vec<Sequence>>>>,
}

impl Cache {
    pub fn get(&self, unit: usize, build: impl FnOnce() -> Vec<Sequence>) -> Arc<Vec<Sequence>> {
        if let Some(s) = self.units.lock().ok().and_then(|m| m.get(&unit).cloned()) {
            return s;
        }
        let built = Arc::new(build());
        if let Ok(mut m) = self.units.lock() {
            if m.len() >= MAX_CACHED_UNITS {
                m.clear();
            }
            m.insert(unit, built.clone());
        }
        built
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(address: u64, file_index: u64, line: u32, is_stmt: bool) -> RawRow {
        RawRow {
            address,
            file_index,
            line,
            is_stmt,
            discriminator: 0,
            end_sequence: false,
        }
    }

    fn end(address: u64) -> RawRow {
        RawRow {
            address,
            file_index: 0,
            line: 0,
            is_stmt: false,
            discriminator: 0,
            end_sequence: true,
        }
    }

    /// The rows of Debian python3.11's `cfunction_vectorcall_O` around its call (file 29:
    /// methodobject.c, file 34: methodobject.h), from `llvm-dwarfdump --debug-line`.
    fn vectorcall_o() -> Vec<Sequence> {
        record([
            raw(0x51e3cf, 29, 514, true),
            raw(0x51e3cf, 29, 514, false),
            raw(0x51e3d3, 34, 47, true),
            raw(0x51e3d3, 34, 48, true),
            raw(0x51e3d3, 34, 49, true),
            raw(0x51e3d3, 34, 49, false),
            raw(0x51e3d9, 34, 52, true),
            raw(0x51e3d9, 34, 52, false),
            raw(0x51e3d9, 29, 514, false),
            raw(0x51e3df, 29, 516, true),
            raw(0x51e3df, 33, 122, true),
            raw(0x51e3df, 33, 123, true),
            raw(0x51e3df, 33, 123, false),
            raw(0x51e3e3, 33, 123, false),
            raw(0x51e3e3, 29, 517, true),
            end(0x51e3f0),
        ])
    }

    fn at(seqs: &[Sequence], addr: u64) -> Option<(u64, u32)> {
        lookup(seqs, addr).map(|r| (r.file_index, r.line))
    }

    #[test]
    fn a_file_switch_that_is_no_statement_is_not_recorded() {
        // gdb: methodobject.h:52 (DWARF's last row there is methodobject.c:514).
        assert_eq!(at(&vectorcall_o(), 0x51e3de), Some((34, 52)));
    }

    #[test]
    fn a_file_switch_drops_the_old_files_rows_at_that_address() {
        let s = vectorcall_o();
        // 516 (file 29) was dropped when file 33 started at the same address.
        assert_eq!(at(&s, 0x51e3df), Some((33, 123)));
        // Not a statement, after a statement row of the same file at the same address.
        assert_eq!(at(&s, 0x51e3e0), Some((33, 123)));
        assert_eq!(at(&s, 0x51e3ef), Some((29, 517)));
    }

    #[test]
    fn a_statement_row_at_the_same_address_wins() {
        let s = record([raw(0x10, 1, 5, true), raw(0x10, 1, 6, false), end(0x20)]);
        assert_eq!(at(&s, 0x18), Some((1, 5)));
        // No statement at that address: the last row.
        let s = record([raw(0x10, 1, 5, false), raw(0x10, 1, 6, false), end(0x20)]);
        assert_eq!(at(&s, 0x18), Some((1, 6)));
    }

    #[test]
    fn outside_every_sequence_there_is_no_row() {
        let s = vectorcall_o();
        assert_eq!(at(&s, 0x51e3ce), None);
        assert_eq!(at(&s, 0x51e3f0), None);
        assert_eq!(at(&record([end(0x10)]), 0x10), None);
    }

    #[test]
    fn sequences_out_of_address_order_are_found() {
        let s = record([
            raw(0x40, 2, 9, true),
            end(0x50),
            raw(0x10, 1, 5, true),
            end(0x20),
        ]);
        assert_eq!(at(&s, 0x18), Some((1, 5)));
        assert_eq!(at(&s, 0x48), Some((2, 9)));
        assert_eq!(at(&s, 0x30), None);
    }

    #[test]
    fn line_zero_is_not_recorded() {
        let s = record([raw(0x10, 1, 5, true), raw(0x14, 1, 0, true), end(0x20)]);
        assert_eq!(at(&s, 0x16), Some((1, 5)));
    }
}

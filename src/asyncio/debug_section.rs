//! `_Py_AsyncioModuleDebugOffsets` (3.14+): where asyncio keeps its tasks and each thread's
//! running loop, published by CPython for out-of-process tools.
//!
//! The table lives in the ELF section `.AsyncioDebug` of the module that defines `_asyncio`:
//! in 3.14 that is usually `lib-dynload/_asyncio.cpython-314-*.so` (symbol `_AsyncioDebug`,
//! Modules/_asynciomodule.c), in 3.15 the interpreter itself (symbol `_Py_AsyncioDebug`).
//! Section headers survive `strip`, so the section is found by name, then read from the
//! target's memory at its load address (it is initialised data), or from the file when that
//! page is missing. It is checked as strictly as `_Py_DebugOffsets`: every group's size non-zero
//! and at most 1 MiB, every field inside its structure.

use crate::binary::ElfInfo;
use crate::memory::Memory;
use crate::target::Target;

pub const SECTION: &str = ".AsyncioDebug";
/// `sizeof(struct _Py_AsyncioModuleDebugOffsets)` in 3.14 and 3.15: three groups of 7, 2 and
/// 4 words (Modules/_asynciomodule.c 3.14, Include/internal/pycore_debug_offsets.h 3.15).
pub const SECTION_SIZE: usize = 13 * 8;
const MAX_STRUCT_SIZE: u64 = 1 << 20;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AsyncioDebug {
    pub task: TaskObject,
    pub interp: InterpreterState,
    pub thread: ThreadState,
    /// The module the section was read from (file name), for the report.
    pub found_in: String,
}

/// `asyncio_task_object`: offsets into `TaskObj`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskObject {
    pub size: u64,
    pub name: u64,
    pub awaited_by: u64,
    /// `char` fields.
    pub is_task: u64,
    pub awaited_by_is_set: u64,
    pub coro: u64,
    pub node: u64,
}

/// `asyncio_interpreter_state`: offsets into `PyInterpreterState`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InterpreterState {
    pub size: u64,
    pub tasks_head: u64,
}

/// `asyncio_thread_state`: offsets into `_PyThreadStateImpl` (whose address is the
/// `PyThreadState`'s).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadState {
    pub size: u64,
    pub running_loop: u64,
    pub running_task: u64,
    pub tasks_head: u64,
}

impl AsyncioDebug {
    pub fn parse(b: &[u8], found_in: &str) -> Result<AsyncioDebug, &'static str> {
        if b.len() < SECTION_SIZE {
            return Err("section too small");
        }
        let w: Vec<u64> = b[..SECTION_SIZE]
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()))
            .collect();
        let d = AsyncioDebug {
            task: TaskObject {
                size: w[0],
                name: w[1],
                awaited_by: w[2],
                is_task: w[3],
                awaited_by_is_set: w[4],
                coro: w[5],
                node: w[6],
            },
            interp: InterpreterState {
                size: w[7],
                tasks_head: w[8],
            },
            thread: ThreadState {
                size: w[9],
                running_loop: w[10],
                running_task: w[11],
                tasks_head: w[12],
            },
            found_in: found_in.to_string(),
        };
        for size in [d.task.size, d.interp.size, d.thread.size] {
            if size == 0 || size > MAX_STRUCT_SIZE {
                return Err("group size");
            }
        }
        // (offset, bytes it needs, structure size)
        let t = &d.task;
        let checks = [
            (t.name, 8, t.size),
            (t.awaited_by, 8, t.size),
            (t.is_task, 1, t.size),
            (t.awaited_by_is_set, 1, t.size),
            (t.coro, 8, t.size),
            (t.node, 16, t.size),
            (d.interp.tasks_head, 16, d.interp.size),
            (d.thread.running_loop, 8, d.thread.size),
            (d.thread.running_task, 8, d.thread.size),
            (d.thread.tasks_head, 16, d.thread.size),
        ];
        if checks
            .iter()
            .any(|(off, len, size)| off.checked_add(*len).is_none_or(|end| end > *size))
        {
            return Err("field outside its structure");
        }
        Ok(d)
    }

    /// Finds and reads the section in the target: the modules that can define `_asyncio`
    /// (`_asyncio*.so`, libpython, the python executable). `Ok(None)` when none has it (the
    /// module is not loaded yet, or the version has no such section).
    pub fn find(target: &Target) -> Result<Option<AsyncioDebug>, String> {
        let mut problems = Vec::new();
        for m in target.modules() {
            let name = m.file_name();
            if !(name.starts_with("_asyncio")
                || name.starts_with("libpython3")
                || name.starts_with("python"))
            {
                continue;
            }
            // A file that cannot be found (or is another build) has no section for us.
            let Ok(path) = target.real_path(&m.path) else {
                continue;
            };
            let Ok(info) = ElfInfo::load(&path, &[]) else {
                continue;
            };
            let Some(&(vaddr, size)) = info.sections.get(SECTION) else {
                continue;
            };
            if size < SECTION_SIZE as u64 {
                problems.push(format!("{name}: {SECTION} is {size} bytes"));
                continue;
            }
            let addr = m.base.wrapping_sub(info.first_vaddr).wrapping_add(vaddr);
            let mut buf = vec![0u8; SECTION_SIZE];
            let bytes = match target.mem.read_into(addr, &mut buf) {
                Ok(()) => buf,
                Err(_) => match ElfInfo::section_data(&path, SECTION) {
                    Ok(Some(b)) => b,
                    _ => {
                        problems.push(format!("{name}: {SECTION} unreadable"));
                        continue;
                    }
                },
            };
            match AsyncioDebug::parse(&bytes, name) {
                Ok(d) => return Ok(Some(d)),
                Err(e) => problems.push(format!("{name}: {SECTION}: {e}")),
            }
        }
        if problems.is_empty() {
            Ok(None)
        } else {
            Err(problems.join("; "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(w: &[u64]) -> Vec<u8> {
        w.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    /// The section of Debian's 3.14.10 `_asyncio` module.
    const DEBIAN_3_14: [u64; 13] = [
        168, 136, 96, 108, 109, 128, 152, 225864, 10880, 936, 864, 872, 880,
    ];

    #[test]
    fn parses_a_real_table() {
        let d = AsyncioDebug::parse(&words(&DEBIAN_3_14), "x").unwrap();
        assert_eq!(d.task.coro, 128);
        assert_eq!(d.thread.running_loop, 864);
        assert_eq!(d.interp.tasks_head, 10880);
    }

    #[test]
    fn refuses_bad_tables() {
        let mut w = DEBIAN_3_14;
        w[5] = 168; // coro at the end of the task
        assert!(AsyncioDebug::parse(&words(&w), "x").is_err());
        let mut w = DEBIAN_3_14;
        w[9] = 0;
        assert!(AsyncioDebug::parse(&words(&w), "x").is_err());
        let mut w = DEBIAN_3_14;
        w[7] = 1 << 40;
        assert!(AsyncioDebug::parse(&words(&w), "x").is_err());
        assert!(AsyncioDebug::parse(&words(&DEBIAN_3_14[..12]), "x").is_err());
        let mut w = DEBIAN_3_14;
        w[1] = u64::MAX - 3; // an offset whose end overflows
        assert!(AsyncioDebug::parse(&words(&w), "x").is_err());
    }
}

//! The verdict's asyncio task lines (docs/report.md, "The verdict"): every waiting task's wait,
//! grouped by kind, target and innermost application frame, so that a server's thousands of
//! tasks read as a few lines; and the idle tasks (a server waiting for connections, its tick,
//! its lifespan queue) by the task rows of the idle table, counted apart.
//!
//! The application frame is the innermost one outside library code
//! ([`super::library::library_of`]): the place in the program's own code where the wait was
//! made.

use std::collections::HashMap;
use std::sync::Arc;

use crate::asyncio::{AsyncView, TaskView};
use crate::cpython::FrameItem;
use crate::model::{TaskClass, TaskGroup, TaskIdle, TaskWhy, WaitKind, Waiting, WaitsOn};

/// Frames of one task looked through for its application frame or an idle row.
const MAX_FRAMES: usize = 256;

/// A task row of the idle table: a library's own place where a task waits for work.
#[derive(Clone, Copy, Debug)]
pub struct TaskRow {
    /// `TaskWhy.idle`.
    pub kind: TaskIdle,
    /// The verdict's words for one and for several.
    pub one: &'static str,
    pub many: &'static str,
    /// The file the waiting coroutine is in (a path suffix).
    pub file: &'static str,
    /// Its qualified name (`co_qualname`: tasks are read on 3.11+ only).
    pub function: &'static str,
    /// The statement it waits in, as the library writes it.
    pub source: &'static str,
}

/// The task rows of the idle table. A task matches when its frames, from the innermost
/// outwards, are asyncio's own (`/asyncio/`) up to a row's frame. Each `source` was read in:
/// CPython 3.11.7 to 3.14 (asyncio), uvicorn 0.54.0.
pub const TASK_ROWS: &[TaskRow] = &[
    TaskRow {
        kind: TaskIdle::Server,
        one: "server waiting for connections",
        many: "servers waiting for connections",
        file: "/asyncio/base_events.py",
        function: "Server.serve_forever",
        source: "await self._serving_forever_fut",
    },
    TaskRow {
        kind: TaskIdle::ServerTick,
        one: "server tick",
        many: "server ticks",
        file: "/uvicorn/server.py",
        function: "Server.main_loop",
        source: "await asyncio.sleep(0.1)",
    },
    TaskRow {
        kind: TaskIdle::Lifespan,
        one: "lifespan queue",
        many: "lifespan queues",
        file: "/uvicorn/lifespan/on.py",
        function: "LifespanOn.receive",
        source: "return await self.receive_queue.get()",
    },
];

/// Whether `file` is library code ([`super::library::library_of`]).
fn is_library(file: &str) -> bool {
    super::library::library_of(file).is_some()
}

/// A Python frame of a task: where it is.
#[derive(Clone, Copy, Debug)]
struct At<'a> {
    function: &'a Arc<str>,
    file: &'a Arc<str>,
    line: Option<u32>,
}

/// A task's Python frames, innermost first, at most [`MAX_FRAMES`], into `out` (emptied first:
/// one buffer serves every task).
fn frames<'a>(t: &'a TaskView, out: &mut Vec<At<'a>>) {
    out.clear();
    out.extend(t.frames.iter().take(MAX_FRAMES).filter_map(|i| match i {
        FrameItem::Python(p) => Some(At {
            function: &p.code.qualname,
            file: &p.code.filename,
            line: p.line,
        }),
        FrameItem::Unreadable { .. } => None,
    }));
}

/// [`is_library`] of each file once: a file name is one `Arc` shared by its code objects'
/// frames, so 100,000 tasks in one coroutine ask about a few files, by address.
#[derive(Default)]
struct LibraryFiles(HashMap<usize, bool>);

impl LibraryFiles {
    fn is_library(&mut self, file: &Arc<str>) -> bool {
        let key = Arc::as_ptr(file) as *const u8 as usize;
        *self.0.entry(key).or_insert_with(|| is_library(file))
    }
}

/// The task row `frames` match, by [`TASK_ROWS`]' rule.
fn idle_row(frames: &[At]) -> Option<&'static TaskRow> {
    for f in frames {
        let (function, file) = (&**f.function, &**f.file);
        if let Some(row) = TASK_ROWS
            .iter()
            .find(|r| r.function == function && file.ends_with(r.file))
        {
            return Some(row);
        }
        if !file.contains("/asyncio/") {
            return None;
        }
    }
    None
}

/// The innermost application frame of `frames`, else the innermost.
fn place<'a>(frames: &[At<'a>], files: &mut LibraryFiles) -> Option<At<'a>> {
    frames
        .iter()
        .find(|f| !files.is_library(f.file))
        .or_else(|| frames.first())
        .copied()
}

/// The verdict class of a wait: a task holds what it waits for; the outside world (or a
/// future nothing can complete); the rest.
fn class(w: &Waiting) -> TaskClass {
    match &w.on {
        _ if w.owner.is_some() => TaskClass::Owned,
        Some(WaitsOn::Future { orphan: Some(true) }) => TaskClass::Outside,
        Some(WaitsOn::Future { .. } | WaitsOn::Sleep { .. }) | None => TaskClass::Other,
        Some(_) => TaskClass::Outside,
    }
}

/// What tasks wait on alike, beyond the kind: the same socket peer, the same job, the same
/// object; not what differs per task (its own fd, its own sleep's deadline).
fn target(w: &Waiting) -> String {
    match &w.on {
        Some(WaitsOn::Socket {
            direction, peer, ..
        }) => format!("{direction:?} {peer:?}"),
        Some(WaitsOn::Executor { job, .. }) => format!("{job:?}"),
        Some(WaitsOn::Child { command, .. }) => format!("{command:?}"),
        Some(WaitsOn::Future { orphan }) => format!("{orphan:?} {:?}", w.type_name),
        Some(WaitsOn::Sleep { .. }) => String::new(),
        _ => format!("{:?} {:?}", w.object, w.owner),
    }
}

/// Sets each idle task's `idle` in `whys` (`view.tasks`' order) and returns the tasks' waits
/// grouped: by class, then the largest group first, ties in the tasks' order. A running task
/// and one that waits on nothing memory shows are in no group.
pub fn task_groups(view: &AsyncView, whys: &mut [TaskWhy]) -> Vec<TaskGroup> {
    type Key = (
        TaskClass,
        Option<TaskIdle>,
        Option<WaitKind>,
        String,
        Option<Arc<str>>,
        Option<Arc<str>>,
        Option<u32>,
    );
    let mut index: HashMap<Key, usize> = HashMap::new();
    let mut last: Option<(Key, usize)> = None;
    let mut groups: Vec<TaskGroup> = Vec::new();
    let mut files = LibraryFiles::default();
    let mut fs = Vec::new();
    for (t, why) in view.tasks.iter().zip(whys.iter_mut()) {
        if t.on_cpu.is_some() || !t.supported {
            continue;
        }
        frames(t, &mut fs);
        why.idle = idle_row(&fs).map(|r| r.kind);
        let w = why.waiting.as_ref();
        let (class, kind, target) = match (why.idle, w) {
            (Some(idle), _) => (TaskClass::Idle, Some(idle), String::new()),
            (None, Some(w)) => (class(w), None, target(w)),
            (None, None) => continue,
        };
        let at = if why.idle.is_some() {
            None
        } else {
            place(&fs, &mut files)
        };
        let (function, file, line) = at.map_or((None, None, None), |f| {
            (Some(f.function.clone()), Some(f.file.clone()), f.line)
        });
        let wait_kind = w.map(|w| w.kind);
        let key = (
            class,
            kind,
            wait_kind,
            target,
            function.clone(),
            file.clone(),
            line,
        );
        // Tasks in a row often wait alike (a server's 100,000 tasks, one coroutine): their
        // group is the last one, found without hashing the key's strings again.
        if let Some((k, g)) = &last {
            if *k == key {
                groups[*g].tasks.push(t.raw.addr);
                continue;
            }
        }
        match index.get(&key) {
            Some(&g) => {
                groups[g].tasks.push(t.raw.addr);
                last = Some((key, g));
            }
            None => {
                last = Some((key.clone(), groups.len()));
                index.insert(key, groups.len());
                groups.push(TaskGroup {
                    class,
                    idle: kind,
                    tasks: vec![t.raw.addr],
                    name: t.raw.name.clone(),
                    waiting: w.cloned(),
                    function,
                    file,
                    line,
                    timeout: why.timeout.clone(),
                });
            }
        }
    }
    // Stable: the tasks' order among groups of one class and size; classes in their
    // declared (the verdict's) order.
    groups.sort_by_key(|g| (g.class, std::cmp::Reverse(g.tasks.len())));
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_code_is_the_standard_library_and_installed_packages() {
        for f in [
            "/usr/lib/python3.11/asyncio/tasks.py",
            "/root/.pyenv/versions/3.12.1/lib/python3.12/threading.py",
            "/opt/py/lib/python3.13t/queue.py",
            "/opt/py/lib/python3.13t/site-packages/anyio/_core.py",
            "/venv/lib/python3.12/site-packages/uvicorn/server.py",
            "/usr/lib/python3/dist-packages/aiohttp/web.py",
            "<frozen importlib._bootstrap>",
        ] {
            assert!(is_library(f), "{f}");
        }
        for f in [
            "/srv/app/app.py",
            "/work/tests/scenarios/why_fastapi.py",
            "/home/u/lib/pythonic/x.py",
            "<string>",
        ] {
            assert!(!is_library(f), "{f}");
        }
    }

    /// Frames for the rule: (function, file, line), innermost first.
    fn frames(spec: &[(&str, &str, u32)]) -> Vec<(Arc<str>, Arc<str>, u32)> {
        spec.iter()
            .map(|&(f, file, l)| (f.into(), file.into(), l))
            .collect()
    }

    fn at(v: &[(Arc<str>, Arc<str>, u32)]) -> Vec<At<'_>> {
        v.iter()
            .map(|(function, file, line)| At {
                function,
                file,
                line: Some(*line),
            })
            .collect()
    }

    #[test]
    fn an_idle_row_matches_through_asyncio_frames_only() {
        let tick = frames(&[
            ("sleep", "/usr/lib/python3.12/asyncio/tasks.py", 665),
            (
                "Server.main_loop",
                "/sp/site-packages/uvicorn/server.py",
                248,
            ),
            ("Server._serve", "/sp/site-packages/uvicorn/server.py", 107),
        ]);
        assert_eq!(
            idle_row(&at(&tick)).map(|r| r.kind),
            Some(TaskIdle::ServerTick)
        );
        let handler = frames(&[
            ("sleep", "/usr/lib/python3.12/asyncio/tasks.py", 665),
            ("handler", "/srv/app.py", 9),
            (
                "Server.main_loop",
                "/sp/site-packages/uvicorn/server.py",
                248,
            ),
        ]);
        assert!(idle_row(&at(&handler)).is_none());
        assert_eq!(
            place(&at(&handler), &mut LibraryFiles::default()).and_then(|f| f.line),
            Some(9)
        );
        let all_library = frames(&[("Queue.get", "/usr/lib/python3.12/asyncio/queues.py", 158)]);
        assert_eq!(
            place(&at(&all_library), &mut LibraryFiles::default()).and_then(|f| f.line),
            Some(158)
        );
    }
}

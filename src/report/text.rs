//! Text rendering, in the style of CPython's libpython.py where it has one.

use std::collections::HashMap;
use std::fmt::Write;

use super::{
    Crash, Deadlock, FrameKind, FrameReport, GreenletReport, LocalReport, Report, StackEntry,
    ThreadReport, Waiting, WaitsOn,
};

/// Text one rendering builds at most; past it the frames left are not shown (with a line
/// that says so). Every frame repeats its names and source line, so a deep stack of long
/// names could otherwise take gigabytes.
pub const MAX_TEXT_BYTES: usize = 256 << 20;
pub(crate) const TEXT_CUT: &str = "(output cut: over 256 MiB of text)\n";
/// Characters of one source line shown.
pub(crate) const MAX_SOURCE_LINE_CHARS: usize = 1024;

/// Source files larger than this are not read for display.
const MAX_SOURCE_BYTES: u64 = 16 << 20;

/// Source bytes kept per rendering: files past it are not shown (a core can name any
/// number of files).
const MAX_SOURCES_BYTES: u64 = 64 << 20;

/// Reads source lines from the local file system, once per file.
#[derive(Default)]
pub struct Sources {
    files: HashMap<String, Option<Vec<String>>>,
    bytes: u64,
    /// The last line [`Sources::shown`] gave, as (file, line, text): a deep recursion asks for
    /// the same line 100,000 times in a row, and a hash and a trim each cost more than a
    /// compare.
    last: Option<(String, u32, String)>,
}

impl Sources {
    /// Line `line` of `file` as a traceback shows it: trimmed, at most
    /// [`MAX_SOURCE_LINE_CHARS`] characters.
    pub fn shown(&mut self, file: &str, line: u32) -> Option<&str> {
        let hit = matches!(&self.last, Some((f, l, _)) if *l == line && f == file);
        if !hit {
            let mut last = self.last.take().unwrap_or_default();
            let code = self.line(file, line)?.trim();
            let cut = code
                .char_indices()
                .nth(MAX_SOURCE_LINE_CHARS)
                .map_or(code.len(), |(i, _)| i);
            // The memo's buffers are reused: a stack of many different lines allocates none.
            last.2.clear();
            last.2.push_str(&code[..cut]);
            last.0.clear();
            last.0.push_str(file);
            last.1 = line;
            self.last = Some(last);
        }
        self.last.as_ref().map(|(_, _, code)| code.as_str())
    }

    pub fn line(&mut self, file: &str, line: u32) -> Option<&str> {
        self.lines(file)?
            .get((line as usize).checked_sub(1)?)
            .map(|s| s.as_str())
    }
    pub fn lines(&mut self, file: &str) -> Option<&[String]> {
        // Looked up before an entry is made: a deep stack asks for one file 100,000 times.
        if !self.files.contains_key(file) {
            let lines = read_lines(file, &mut self.bytes);
            self.files.insert(file.to_string(), lines);
        }
        self.files.get(file)?.as_deref()
    }
}

/// The lines of `file`, its size added to `kept` (and nothing read once that is full).
fn read_lines(file: &str, kept: &mut u64) -> Option<Vec<String>> {
    let meta = std::fs::metadata(file).ok()?;
    if !meta.is_file() || meta.len() > MAX_SOURCE_BYTES {
        return None;
    }
    *kept = kept
        .checked_add(meta.len())
        .filter(|&k| k <= MAX_SOURCES_BYTES)?;
    let bytes = std::fs::read(file).ok()?;
    Some(
        String::from_utf8_lossy(&bytes)
            .lines()
            .map(|l| l.to_string())
            .collect(),
    )
}

/// `text` as a terminal or a debugger can print it: a NUL (only a corrupt name read from the
/// target holds one) as `\x00`, as the debuggers' frontend prints it
/// (`pyunwind_frontend.printable`: gdb.write refuses a NUL).
pub fn printable(text: String) -> String {
    if text.contains('\0') {
        text.replace('\0', "\\x00")
    } else {
        text
    }
}

/// `Thread 4242 "worker-1" (holds the GIL):`; with the system's name of the thread where it
/// says more (see [`super::names::shown_native_name`]): `Thread 4243 "Thread-2 (serve)" ["http-io"]:`, or
/// alone for a thread with no `threading` name: `Thread 4244 "pt_autograd_0" (no Python
/// thread state):`. `r` is the report the thread is in.
pub fn thread_header(r: &Report, t: &ThreadReport) -> String {
    let mut s = String::from("Thread ");
    match (t.native_id, t.thread_id) {
        (Some(n), _) => write!(s, "{n}").unwrap(),
        (None, Some(id)) => write!(s, "{id:#x}").unwrap(),
        (None, None) => s.push('?'),
    }
    if let Some(name) = t.any_name() {
        write!(s, " \"{name}\"").unwrap();
    }
    if let Some(native) = super::names::shown_native_name(r, t) {
        write!(s, " [\"{native}\"]").unwrap();
    }
    if t.thread_state.is_none() {
        s.push_str(" (no Python thread state)");
    }
    match t.holds_gil {
        Some(true) => s.push_str(" (holds the GIL)"),
        Some(false) => {}
        None => {}
    }
    if let Some(why) = &t.why {
        match (why.state, &why.syscall) {
            (Some(state), Some(call)) => write!(s, " [{state}: {call}]").unwrap(),
            (Some(state), None) => write!(s, " [{state}]").unwrap(),
            (None, _) => {}
        }
    }
    s.push(':');
    s
}

/// `"poster"` (a thread's name), else its native id.
fn who(r: &Report, native_id: u64) -> String {
    match r
        .threads
        .iter()
        .find(|t| t.native_id == Some(native_id))
        .and_then(ThreadReport::any_name)
    {
        Some(name) => format!("thread {native_id} \"{name}\""),
        None => format!("thread {native_id}"),
    }
}

/// Where the owner took `object` by a `with` block: ` (taken at app.py:19, in poster)`, the
/// `with` statement's line; else the line its frame is at now, where the code does not show
/// the statement: ` (its with block in poster, now at app.py:21)`.
fn held_in(r: &Report, owner: u64, object: u64) -> String {
    let Some(t) = r.threads.iter().find(|t| t.native_id == Some(owner)) else {
        return String::new();
    };
    let Some(h) = t
        .why
        .iter()
        .flat_map(|w| &w.holding)
        .find(|h| h.object == object)
    else {
        return String::new();
    };
    match h.frame.and_then(|i| t.frames.get(i)) {
        Some(FrameReport {
            function: Some(function),
            file: Some(file),
            line: Some(line),
            ..
        }) => {
            let file = file.rsplit('/').next().unwrap_or(file);
            match h.line {
                Some(taken) => format!(" (taken at {file}:{taken}, in {function})"),
                None => format!(" (its with block in {function}, now at {file}:{line})"),
            }
        }
        _ => String::new(),
    }
}

/// A wait on the outside world, in words: `waits on socket fd 7 (recv from 10.0.0.5:5432,
/// local 10.0.0.2:40122)`, `waits on pipe fd 5 (read)`, `waits for child 4300 (sleep 1000) to
/// exit`, `is blocked in native code: torch._C._EngineBase.run_backward, in
/// c10d::Reducer::finalize_backward()`. None for the other waits.
fn waits_on(w: &Waiting) -> Option<String> {
    let s = match (w.kind, w.on.as_ref()?) {
        (
            _,
            WaitsOn::Socket {
                fd,
                direction,
                local,
                peer,
            },
        ) => {
            let mut s = "waits on socket".to_string();
            if let Some(fd) = fd {
                write!(s, " fd {fd}").unwrap();
            }
            let mut parts = Vec::new();
            match (direction, peer) {
                (Some(d), Some(p)) => {
                    let to = match *d {
                        "recv" => "from",
                        "accept" => "on",
                        _ => "to",
                    };
                    parts.push(format!("{d} {to} {p}"));
                }
                (Some(d), None) => parts.push(d.to_string()),
                (None, Some(p)) => parts.push(format!("peer {p}")),
                (None, None) => {}
            }
            if let Some(l) = local {
                parts.push(format!("local {l}"));
            }
            if !parts.is_empty() {
                write!(s, " ({})", parts.join(", ")).unwrap();
            }
            s
        }
        (
            kind,
            WaitsOn::Fd {
                fd,
                direction,
                path,
            },
        ) => {
            let mut s = match kind {
                "fd" => "waits on".to_string(),
                k => format!("waits on {k}"),
            };
            if let Some(fd) = fd {
                write!(s, " fd {fd}").unwrap();
            }
            if let Some(p) = path {
                write!(s, " {p}").unwrap();
            }
            if let Some(d) = direction {
                write!(s, " ({d})").unwrap();
            }
            s
        }
        (_, WaitsOn::Child { pid, command }) => match (pid, command) {
            (Some(p), Some(c)) => format!("waits for child {p} ({c}) to exit"),
            (Some(p), None) => format!("waits for child {p} to exit"),
            (None, _) => "waits for any child to exit".to_string(),
        },
        (
            _,
            WaitsOn::Native {
                function,
                native_function,
            },
        ) => {
            let mut s = "is blocked in native code".to_string();
            if let Some(f) = function {
                write!(s, ": {f}").unwrap();
            }
            if let Some(n) = native_function {
                write!(s, ", in {n}").unwrap();
            }
            s
        }
    };
    Some(s)
}

/// `waits for RLock 0x7f.. held by thread 12 "rotator"`; the owner unknown says so.
fn waits_for(r: &Report, w: &Waiting) -> String {
    if let Some(s) = waits_on(w) {
        return s;
    }
    if w.kind == "sleep" {
        return "sleeps (time.sleep)".to_string();
    }
    let mut s = match w.kind {
        "gil" => "waits for the GIL".to_string(),
        _ => format!("waits for {}", w.type_name.as_deref().unwrap_or(w.kind)),
    };
    if let Some(o) = w.object {
        write!(s, " {o:#x}").unwrap();
    }
    match (w.owner, w.object) {
        (Some(owner), _) if w.kind == "join" => {
            write!(s, " to end: it is {}", who(r, owner)).unwrap()
        }
        (Some(owner), Some(object)) => {
            write!(s, " held by {}{}", who(r, owner), held_in(r, owner, object)).unwrap()
        }
        (Some(owner), None) => write!(s, " held by {}", who(r, owner)).unwrap(),
        (None, _) if w.kind == "lock" => {
            s.push_str(" (its holder is unknown: a Lock taken by acquire() leaves no trace)")
        }
        (None, _) => {}
    }
    s
}

/// `task 0x7f.. "worker-1"` (its name when the report lists the tasks), else `task 0x7f..`.
fn which_task(r: &Report, id: u64) -> String {
    match r.tasks.iter().flatten().find(|t| t.id == id) {
        Some(t) => format!("task {id:#x} \"{}\"", t.name),
        None => format!("task {id:#x}"),
    }
}

/// `waits for asyncio Lock 0x7f.. held by task 0x7f.. "writer"`.
fn task_waits_for(r: &Report, w: &Waiting) -> String {
    let mut s = format!(
        "waits for asyncio {}",
        w.type_name.as_deref().unwrap_or(w.kind)
    );
    if let Some(o) = w.object {
        write!(s, " {o:#x}").unwrap();
    }
    if let Some(owner) = w.owner {
        write!(s, " held by {}", which_task(r, owner)).unwrap();
    }
    s
}

/// `Deadlock: poster waits for RLock 0x.. held by rotator; rotator waits for ...`.
pub fn deadlock_line(r: &Report, d: &Deadlock) -> String {
    if d.kind == "task_locks" {
        let parts: Vec<String> = d
            .tasks
            .iter()
            .zip(&d.objects)
            .map(|(&t, &o)| format!("{} waits for asyncio lock {o:#x}", which_task(r, t)))
            .collect();
        return format!(
            "Deadlock: asyncio tasks wait for each other's locks: {}",
            parts.join("; ")
        );
    }
    if d.kind == "await" {
        let tasks: Vec<String> = d.tasks.iter().map(|t| format!("{t:#x}")).collect();
        return format!(
            "Deadlock: asyncio tasks await each other: {}",
            tasks.join(" -> ")
        );
    }
    let parts: Vec<String> = d
        .threads
        .iter()
        .filter_map(|&n| {
            let t = r.threads.iter().find(|t| t.native_id == Some(n))?;
            let w = t.why.as_ref()?.waiting.as_ref()?;
            Some(format!("{} {}", who(r, n), waits_for(r, w)))
        })
        .collect();
    format!("Deadlock: {}", parts.join("; "))
}

/// The idle kinds in the order the idle line counts them, each with its words (one, many).
const IDLE_WORDS: &[(&str, &str, &str)] = &[
    ("pool_worker", "pool worker", "pool workers"),
    ("pool_thread", "pool thread", "pool threads"),
    ("queue_feeder", "queue feeder", "queue feeders"),
    ("timer", "timer between ticks", "timers between ticks"),
    (
        "server",
        "server waiting for connections",
        "servers waiting for connections",
    ),
    (
        "master",
        "master waiting for signals",
        "masters waiting for signals",
    ),
    ("event_loop", "event loop", "event loops"),
];

/// `7 idle: 5 pool workers, 1 server waiting for connections, 1 event loop`; None when no
/// thread is idle.
fn idle_line(r: &Report) -> Option<String> {
    let kinds: Vec<&str> = r
        .threads
        .iter()
        .filter_map(|t| t.why.as_ref()?.idle)
        .collect();
    if kinds.is_empty() {
        return None;
    }
    let parts: Vec<String> = IDLE_WORDS
        .iter()
        .filter_map(|&(kind, one, many)| {
            let n = kinds.iter().filter(|&&k| k == kind).count();
            (n > 0).then(|| format!("{n} {}", if n == 1 { one } else { many }))
        })
        .collect();
    Some(format!("{} idle: {}", kinds.len(), parts.join(", ")))
}

/// Which group of the verdict a thread's wait is in: 0 its owner is known, 1 it is on the
/// outside world (a socket, pipe, file, child, native code), 2 the rest.
fn wait_rank(w: &Waiting) -> u8 {
    if w.owner.is_some() {
        0
    } else if w.on.is_some() {
        1
    } else {
        2
    }
}

/// `, which waits on socket fd 7 (...)`: the owner's own wait, one level down; empty when it
/// waits for nothing memory shows, or for the waiter itself (a deadlock says that).
fn owners_wait(r: &Report, waiter: u64, owner: u64) -> String {
    let Some(w) = r
        .threads
        .iter()
        .find(|t| t.native_id == Some(owner))
        .and_then(|t| t.why.as_ref()?.waiting.as_ref())
    else {
        return String::new();
    };
    if w.owner == Some(waiter) {
        return String::new();
    }
    format!(", which {}", waits_for(r, w))
}

/// `--why` and `py-why`'s first lines (docs/report.md, "The verdict"): the crash, the
/// deadlocks, then each waiting thread's wait, those whose owner is known first, then the
/// waits on the outside world, then those with no owner; then the tasks waiting for a lock
/// a task holds; one line when none of them is there. Idle threads get no line of their
/// own: one line counts them by kind.
pub fn verdict(r: &Report) -> String {
    let mut out = String::new();
    if let Some(line) = report_crash_line(r) {
        writeln!(out, "{line}").unwrap();
    }
    for d in r.deadlocks.iter().flatten() {
        writeln!(out, "{}", deadlock_line(r, d)).unwrap();
    }
    let mut waits: Vec<(u8, u64, &Waiting)> = r
        .threads
        .iter()
        .filter_map(|t| {
            let why = t.why.as_ref()?;
            if why.idle.is_some() {
                return None;
            }
            let w = why.waiting.as_ref()?;
            Some((wait_rank(w), t.native_id?, w))
        })
        .collect();
    // Stable: the report's thread order within each group.
    waits.sort_by_key(|&(rank, _, _)| rank);
    for (_, n, w) in waits {
        let chained = w.owner.map_or(String::new(), |o| owners_wait(r, n, o));
        writeln!(out, "{} {}{chained}", who(r, n), waits_for(r, w)).unwrap();
    }
    // Tasks waiting for a lock another task holds; not every task parked on a queue or an
    // event (a server has thousands).
    for t in r.tasks.iter().flatten() {
        if let Some(w) = t
            .why
            .as_ref()
            .and_then(|w| w.waiting.as_ref())
            .filter(|w| w.owner.is_some())
        {
            writeln!(out, "{} {}", which_task(r, t.id), task_waits_for(r, w)).unwrap();
        }
    }
    // A gevent worker's thread runs its hub; its requests wait in greenlets.
    greenlet_waits(r, &mut out);
    if out.is_empty() {
        out.push_str("No crash, deadlock or blocked wait found.\n");
    }
    if let Some(line) = idle_line(r) {
        writeln!(out, "{line}").unwrap();
    }
    out
}

/// What a greenlet waits on, for counting: kind, object, type.
type WaitKey<'a> = (&'a str, Option<u64>, Option<&'a str>);

/// `--why --greenlets`: what each thread's suspended greenlets wait on, most common first
/// (a gevent server has thousands: one line per thread).
fn greenlet_waits(r: &Report, out: &mut String) {
    let Some(all) = &r.greenlets else { return };
    let mut threads: Vec<Option<u64>> = Vec::new();
    for g in all {
        if g.waiting.is_some() && !threads.contains(&g.thread) {
            threads.push(g.thread);
        }
    }
    for t in threads {
        // (kind, object, type) -> count; sockets and sleeps counted by kind alone.
        let mut counts: Vec<(WaitKey, usize)> = Vec::new();
        for w in all
            .iter()
            .filter(|g| g.thread == t)
            .filter_map(|g| g.waiting.as_ref())
        {
            let key = match w.kind {
                "socket" | "sleep" => (w.kind, None, None),
                _ => (w.kind, w.object, w.type_name.as_deref()),
            };
            match counts.iter_mut().find(|c| c.0 == key) {
                Some(c) => c.1 += 1,
                None => counts.push((key, 1)),
            }
        }
        // The outside world first (sockets), then the most common.
        counts.sort_by_key(|c| (c.0 .0 != "socket", std::cmp::Reverse(c.1)));
        let socket = all
            .iter()
            .filter(|g| g.thread == t)
            .filter_map(|g| g.waiting.as_ref())
            .find(|w| w.kind == "socket");
        let parts: Vec<String> = counts
            .iter()
            .map(|((kind, obj, ty), n)| match (*kind, obj) {
                ("sleep", _) => format!("{n} in gevent.sleep"),
                // One socket is named as a thread's is: `on socket fd 12 (recv from ...)`.
                ("socket", _) if *n == 1 => match socket.and_then(waits_on) {
                    Some(s) => format!("1 {}", s.replacen("waits on", "on", 1)),
                    None => "1 on a socket".to_string(),
                },
                ("socket", _) => format!("{n} on sockets"),
                (k, Some(o)) => format!(
                    "{n} on {k} {o:#x}{}",
                    ty.map_or(String::new(), |t| format!(" ({t})"))
                ),
                (k, None) => format!("{n} on {k}"),
            })
            .collect();
        let whose = t.map_or("threads that have ended".to_string(), |n| who(r, n));
        writeln!(out, "Greenlets of {whose} wait: {}", parts.join(", ")).unwrap();
    }
}

/// `py-why`: the verdict, then every thread with its state, then the errors.
pub fn why(r: &Report, src: &mut Sources) -> String {
    let mut out = verdict(r);
    out.push('\n');
    threads(r, src, &mut out);
    out
}

/// libpython's `py-bt`: `Traceback (most recent call first):` and one `File` line per frame.
pub fn traceback(t: &ThreadReport, src: &mut Sources, out: &mut String) {
    if t.frames.is_empty() {
        out.push_str("(no Python frames)\n");
        return;
    }
    out.push_str("Traceback (most recent call first):\n");
    frames(&t.frames, "  ", src, out);
    if t.truncated {
        out.push_str(
            "  (older frames not shown: the walk stopped before the thread's first frame)\n",
        );
    }
}

/// One `File "...", line N, in f` entry (and its source line) per frame, each line prefixed
/// with `indent`.
pub fn frames(frames: &[FrameReport], indent: &str, src: &mut Sources, out: &mut String) {
    for f in frames {
        if out.len() >= MAX_TEXT_BYTES {
            if !out.ends_with(TEXT_CUT) {
                out.push_str(TEXT_CUT);
            }
            return;
        }
        match f.kind {
            FrameKind::Jit if f.file.is_none() => {
                writeln!(
                    out,
                    "{indent}(JIT) {:#018x} {}",
                    f.address.unwrap_or(0),
                    f.function.as_deref().unwrap_or("??")
                )
                .unwrap();
            }
            FrameKind::Python | FrameKind::Jit => {
                // Pieces pushed, not formatted: 100,000 frames are printed in a few ms.
                let file = f.file.as_deref().unwrap_or("???");
                let func = f.function.as_deref().unwrap_or("???");
                out.push_str(indent);
                out.push_str("File \"");
                out.push_str(file);
                out.push_str("\", line ");
                match f.line {
                    Some(l) => write!(out, "{l}").unwrap(),
                    None => out.push('?'),
                }
                out.push_str(", in ");
                out.push_str(func);
                out.push('\n');
                if let Some(code) = f.line.and_then(|l| src.shown(file, l)) {
                    out.push_str(indent);
                    out.push_str("  ");
                    out.push_str(code);
                    out.push('\n');
                }
                if let Some(locals) = f.locals() {
                    for l in locals {
                        writeln!(out, "{indent}    {} = {}", l.name, l.repr).unwrap();
                    }
                }
            }
            FrameKind::Native => {
                write!(
                    out,
                    "{indent}(C) {:#018x} {}",
                    f.address.unwrap_or(0),
                    f.function.as_deref().unwrap_or("??")
                )
                .unwrap();
                match (f.module(), f.offset()) {
                    (Some(m), Some(o)) => write!(out, " ({m}+{o:#x})").unwrap(),
                    (Some(m), None) => write!(out, " ({m})").unwrap(),
                    _ => {}
                }
                if let (Some(file), Some(line)) = (&f.file, f.line) {
                    write!(out, " at {file}:{line}").unwrap();
                }
                if f.inlined() == Some(true) {
                    out.push_str(" (inlined)");
                }
                out.push('\n');
            }
            FrameKind::Unreadable => {
                writeln!(
                    out,
                    "{indent}(unreadable frame at {:#x}: {})",
                    f.address.unwrap_or(0),
                    f.reason().unwrap_or("unknown")
                )
                .unwrap();
            }
        }
    }
}

/// `Crashed: SIGSEGV (SEGV_MAPERR) at 0x10 in thread 1234 "parser"`, or for a signal a
/// process sent, `Crashed: SIGABRT (SI_TKILL, sent by pid 1234) in thread 1234 "MainThread"`.
pub fn crash_line(c: &Crash, thread_name: Option<&str>) -> String {
    let mut s = String::from("Crashed: ");
    match c.signal {
        Some(name) => s.push_str(name),
        None => write!(s, "signal {}", c.signo).unwrap(),
    }
    match (&c.code, c.sender_pid) {
        (Some(code), Some(pid)) => write!(s, " ({code}, sent by pid {pid})").unwrap(),
        (Some(code), None) => write!(s, " ({code})").unwrap(),
        (None, _) => {}
    }
    if let Some(a) = c.address {
        write!(s, " at {a:#x}").unwrap();
    }
    write!(s, " in thread {}", c.thread).unwrap();
    if let Some(name) = thread_name {
        write!(s, " \"{name}\"").unwrap();
    }
    s
}

/// The report's crash line (see [`crash_line`]), the thread named from the report.
pub fn report_crash_line(r: &Report) -> Option<String> {
    let c = r.crash.as_ref()?;
    let name = r
        .threads
        .iter()
        .find(|t| t.native_id == Some(c.thread))
        .and_then(ThreadReport::any_name);
    Some(crash_line(c, name))
}

/// The crash line (when the target crashed), then every thread, each with a header, then the
/// errors: `py-bt -a`.
pub fn all_threads(r: &Report, src: &mut Sources) -> String {
    all_threads_parked(r, &[], src)
}

/// `py-bt -a`: with, under each thread, how many greenlets are parked in it (`parked`: native
/// id and count).
pub fn all_threads_parked(r: &Report, parked: &[(u64, usize)], src: &mut Sources) -> String {
    let mut out = String::new();
    if let Some(line) = report_crash_line(r) {
        writeln!(out, "{line}\n").unwrap();
    }
    threads_parked(r, parked, src, &mut out);
    out
}

/// Every thread, each with a header, then the errors, appended to `out` (a deep stack's
/// text is megabytes: built in place, not copied).
pub fn threads(r: &Report, src: &mut Sources, out: &mut String) {
    threads_parked(r, &[], src, out)
}

fn threads_parked(r: &Report, parked: &[(u64, usize)], src: &mut Sources, out: &mut String) {
    // About 90 bytes a Python frame (its line and its source line).
    out.reserve(r.threads.iter().map(|t| t.frames.len() * 90).sum());
    for (i, t) in r.threads.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        writeln!(out, "{}", thread_header(r, t)).unwrap();
        traceback(t, src, out);
        if let Some((_, n)) = parked.iter().find(|p| Some(p.0) == t.native_id) {
            writeln!(
                out,
                "{n} greenlet{} suspended in this thread (py-greenlets shows their stacks)",
                if *n == 1 { "" } else { "s" }
            )
            .unwrap();
        }
        if t.native_id.is_some() {
            greenlets(r, t.native_id, src, out);
        }
    }
    if r.greenlets
        .as_ref()
        .is_some_and(|g| g.iter().any(|g| g.thread.is_none()))
    {
        out.push_str("\nGreenlets of no running thread (it has ended, or is not known):\n");
        greenlets(r, None, src, out);
    }
    errors(r, out);
}

/// The greenlets of thread `native_id` (None: of none), each suspended one with the stack it
/// resumes in; the running one's stack is its thread's, shown above.
pub fn greenlets(r: &Report, native_id: Option<u64>, src: &mut Sources, out: &mut String) {
    let Some(all) = &r.greenlets else { return };
    let ours: Vec<&GreenletReport> = all.iter().filter(|g| g.thread == native_id).collect();
    if ours.is_empty() {
        return;
    }
    let count = |s: &str| ours.iter().filter(|g| g.state == s).count();
    writeln!(
        out,
        "Greenlets: {} ({} running, {} suspended, {} not started, {} dead)",
        ours.len(),
        count("running"),
        count("suspended"),
        count("not_started"),
        count("dead")
    )
    .unwrap();
    for g in ours {
        let mut what = g.type_name.clone();
        if let Some(n) = &g.name {
            write!(what, " \"{n}\"").unwrap();
        }
        if let Some(f) = &g.function {
            write!(what, ", runs {f}").unwrap();
        }
        if g.main {
            what.push_str(", main");
        }
        let state = g.state.replace('_', " ");
        match g.state {
            "running" if native_id.is_some() => {
                writeln!(
                    out,
                    "  Greenlet {:#x} ({what}) running: the traceback above",
                    g.address
                )
                .unwrap();
            }
            "suspended" => {
                let wait = g.waiting.as_ref().map_or(String::new(), |w| {
                    let mut s = format!(", waiting: {}", w.kind);
                    if let Some(o) = w.object {
                        write!(s, " {o:#x}").unwrap();
                    }
                    if let Some(t) = &w.type_name {
                        write!(s, " ({t})").unwrap();
                    }
                    s
                });
                writeln!(out, "  Greenlet {:#x} ({what}) suspended{wait}:", g.address).unwrap();
                if g.frames.is_empty() {
                    out.push_str("    (no Python frames)\n");
                } else {
                    out.push_str("    Traceback (most recent call first):\n");
                    frames(&g.frames, "      ", src, out);
                }
                if g.truncated {
                    out.push_str("      (older frames not shown: the walk stopped early)\n");
                }
            }
            _ => writeln!(out, "  Greenlet {:#x} ({what}) {state}", g.address).unwrap(),
        }
    }
}

/// `pid --native`: how long the threads were stopped.
pub fn native_stops(r: &Report, out: &mut String) {
    let Some(stops) = &r.native_stops else { return };
    let max = stops.iter().map(|s| s.stopped_us).max().unwrap_or(0);
    writeln!(
        out,
        "\n{} threads stopped one at a time for their registers and stacks, the longest for {}.{:03} ms",
        stops.len(),
        max / 1000,
        max % 1000
    )
    .unwrap();
}

pub fn errors(r: &Report, out: &mut String) {
    for e in &r.errors {
        writeln!(out, "error: {}", e.what).unwrap();
    }
}

/// libpython's `py-bt-full` line: `#3 Frame 0x7f.., for file f.py, line 3, in fn (a=1, b=2)`.
pub fn frame_line(index: usize, f: &FrameReport, locals: Option<&[LocalReport]>) -> String {
    let mut s = format!(
        "#{index} Frame {:#x}, for file {}, line {}, in {}",
        f.address.unwrap_or(0),
        f.file.as_deref().unwrap_or("???"),
        f.line.map_or("?".to_string(), |l| l.to_string()),
        f.function.as_deref().unwrap_or("???")
    );
    if let Some(ls) = locals {
        let parts: Vec<String> = ls
            .iter()
            .map(|l| format!("{}={}", l.name, l.repr))
            .collect();
        write!(s, " ({})", parts.join(", ")).unwrap();
    }
    s
}

/// `py-bt-full`: every frame with its locals.
pub fn full(t: &ThreadReport, src: &mut Sources) -> String {
    let mut out = String::new();
    for (i, f) in t.frames.iter().enumerate() {
        full_frame(i, f, src, &mut out);
    }
    if t.frames.is_empty() {
        out.push_str("(no Python frames)\n");
    }
    out
}

/// One frame of `py-bt-full`: its `#i Frame` line and its source line.
fn full_frame(i: usize, f: &FrameReport, src: &mut Sources, out: &mut String) {
    match f.kind {
        FrameKind::Python | FrameKind::Jit => {
            writeln!(out, "{}", frame_line(i, f, f.locals())).unwrap();
            if let (Some(file), Some(l)) = (&f.file, f.line) {
                if let Some(code) = src.line(file, l) {
                    writeln!(out, "    {}", code.trim()).unwrap();
                }
            }
        }
        _ => {
            writeln!(
                out,
                "#{i} (unreadable frame at {:#x}: {})",
                f.address.unwrap_or(0),
                f.reason().unwrap_or("unknown")
            )
            .unwrap();
        }
    }
}

/// `py-bt` (`full`: `py-bt-full`) over a thread's stack entries: its Python frames and the
/// native frames libpython shows between them.
pub fn entries(
    t: &ThreadReport,
    entries: &[StackEntry],
    full: bool,
    src: &mut Sources,
    out: &mut String,
) {
    if !full {
        if t.frames.is_empty() && entries.is_empty() {
            out.push_str("(no Python frames)\n");
            return;
        }
        out.push_str("Traceback (most recent call first):\n");
    }
    for e in entries {
        match (
            e.index.and_then(|i| t.frames.get(i).map(|f| (i, f))),
            &e.text,
        ) {
            // Numbered as py-up numbers it: the debugger's level (libpython: gdb's frame number),
            // else the Python frame's index.
            (Some((i, f)), _) if full => full_frame(e.level.unwrap_or(i), f, src, out),
            (Some((_, f)), _) => frames(std::slice::from_ref(f), "  ", src, out),
            // A frame the debugger does not show (its unwind stopped early) has no level.
            (None, Some(text)) if full => match e.level {
                Some(level) => writeln!(out, "#{level} {text}").unwrap(),
                None => writeln!(out, "#? {text}").unwrap(),
            },
            (None, Some(text)) => writeln!(out, "  {text}").unwrap(),
            (None, None) => {}
        }
    }
    if full && t.frames.is_empty() && entries.is_empty() {
        out.push_str("(no Python frames)\n");
    }
    if !full && t.truncated {
        out.push_str(
            "  (older frames not shown: the walk stopped before the thread's first frame)\n",
        );
    }
}

/// `py-locals`: one `name = repr` line per local.
pub fn locals(ls: &[LocalReport]) -> String {
    let mut out = String::new();
    for l in ls {
        writeln!(out, "{} = {}", l.name, l.repr).unwrap();
    }
    out
}

/// `py-list`: lines `start..=end` of `file`, the current line marked with `>`.
pub fn listing(
    src: &mut Sources,
    file: &str,
    current: u32,
    start: u32,
    end: u32,
) -> Result<String, String> {
    let lines = src
        .lines(file)
        .ok_or_else(|| format!("Unable to open {file}"))?;
    let mut out = String::new();
    let start = start.max(1);
    for n in start..=end.min(lines.len() as u32) {
        let mark = if n == current {
            format!(">{n}")
        } else {
            n.to_string()
        };
        writeln!(out, "{mark:>4}    {}", lines[(n - 1) as usize]).unwrap();
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crash_lines() {
        let mut c = Crash {
            signal: Some("SIGSEGV"),
            signo: 11,
            code: Some("SEGV_MAPERR".into()),
            address: Some(0x10),
            thread: 1234,
            sender_pid: None,
        };
        assert_eq!(
            crash_line(&c, Some("parser")),
            "Crashed: SIGSEGV (SEGV_MAPERR) at 0x10 in thread 1234 \"parser\""
        );
        c.code = Some("SI_USER".into());
        c.address = None;
        c.sender_pid = Some(4321);
        assert_eq!(
            crash_line(&c, Some("MainThread")),
            "Crashed: SIGSEGV (SI_USER, sent by pid 4321) in thread 1234 \"MainThread\""
        );
        c.signal = None;
        c.signo = 40;
        c.code = None;
        assert_eq!(crash_line(&c, None), "Crashed: signal 40 in thread 1234");
    }

    fn report_of(threads: Vec<ThreadReport>) -> Report {
        Report {
            python: super::super::PythonReport {
                version: "3.12.1".into(),
                free_threaded: false,
                jit: false,
                found_by: String::new(),
                source: "live",
                pid: Some(1),
            },
            crash: None,
            threads,
            tasks: None,
            cycles: None,
            loops: None,
            greenlets: None,
            native_stops: None,
            deadlocks: Some(Vec::new()),
            errors: Vec::new(),
        }
    }

    fn thread(id: u64, name: &str, idle: Option<&'static str>, w: Option<Waiting>) -> ThreadReport {
        ThreadReport {
            native_id: Some(id),
            thread_id: Some(id),
            name: Some(name.into()),
            native_name: None,
            holds_gil: Some(false),
            interpreter: Some(0),
            thread_state: Some(0),
            frames: Vec::new(),
            truncated: false,
            why: Some(super::super::ThreadWhy {
                state: Some(if idle.is_some() { "idle" } else { "syscall" }),
                idle,
                waiting: w,
                ..Default::default()
            }),
        }
    }

    fn wait(kind: &'static str, owner: Option<u64>, on: Option<WaitsOn>) -> Option<Waiting> {
        Some(Waiting {
            kind,
            object: (on.is_none()).then_some(0x10),
            type_name: (kind == "lock").then(|| "Lock".into()),
            owner,
            frame: 0,
            on,
        })
    }

    #[test]
    fn the_verdict_leads_with_owned_then_outside_then_ownerless_waits_and_counts_the_idle() {
        let queue = || wait("simple_queue_get", None, None);
        let r = report_of(vec![
            thread(1, "MainThread", None, wait("lock", None, None)),
            thread(2, "w0", Some("pool_worker"), queue()),
            thread(
                3,
                "client",
                None,
                wait(
                    "socket",
                    None,
                    Some(WaitsOn::Socket {
                        fd: Some(7),
                        direction: Some("recv"),
                        local: Some("127.0.0.1:40122".into()),
                        peer: Some("127.0.0.1:5432".into()),
                    }),
                ),
            ),
            thread(4, "w1", None, wait("lock", Some(3), None)),
            thread(5, "w2", Some("pool_worker"), queue()),
            thread(6, "srv", Some("server"), None),
            thread(
                7,
                "run",
                None,
                wait(
                    "child",
                    None,
                    Some(WaitsOn::Child {
                        pid: Some(99),
                        command: Some("sleep 1000".into()),
                    }),
                ),
            ),
        ]);
        assert_eq!(
            verdict(&r),
            "thread 4 \"w1\" waits for Lock 0x10 held by thread 3 \"client\", which waits on \
             socket fd 7 (recv from 127.0.0.1:5432, local 127.0.0.1:40122)\n\
             thread 3 \"client\" waits on socket fd 7 (recv from 127.0.0.1:5432, local \
             127.0.0.1:40122)\n\
             thread 7 \"run\" waits for child 99 (sleep 1000) to exit\n\
             thread 1 \"MainThread\" waits for Lock 0x10 (its holder is unknown: a Lock taken \
             by acquire() leaves no trace)\n\
             3 idle: 2 pool workers, 1 server waiting for connections\n"
        );
        let idle_only = report_of(vec![thread(2, "w0", Some("pool_worker"), queue())]);
        assert_eq!(
            verdict(&idle_only),
            "No crash, deadlock or blocked wait found.\n1 idle: 1 pool worker\n"
        );
    }
}

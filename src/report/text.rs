//! Text rendering, in the style of CPython's libpython.py where it has one.

use std::collections::HashMap;
use std::fmt::Write;

use super::verdict_text;
use crate::model::{
    FrameKind, FrameReport, GreenletReport, GreenletState, LocalReport, Report, StackEntry,
    ThreadReport,
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
    if let Some(id) = t.interpreter_id.filter(|i| *i != 0) {
        write!(s, " (interpreter {id})").unwrap();
    }
    match t.holds_gil {
        Some(true) => s.push_str(" (holds the GIL)"),
        Some(false) => {}
        None => {}
    }
    if let Some(why) = &t.why {
        match (why.state, &why.syscall) {
            (Some(state), Some(call)) if !state.over_a_window() => {
                write!(s, " [{state}: {call}]").unwrap()
            }
            (Some(state), _) => write!(s, " [{state}]").unwrap(),
            (None, _) => {}
        }
    }
    s.push(':');
    s
}

/// `py-why`: the verdict, then every thread with its state, then the errors.
pub fn why(r: &Report, src: &mut Sources) -> String {
    let mut out = verdict_text::verdict(r);
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

/// What a debugger's backtrace adds to the name of a frame a subinterpreter runs (gdb's `bt`
/// filter, lldb's frame provider): ` [interpreter 1]`; nothing for the main interpreter's.
pub fn interpreter_label(f: &FrameReport) -> Option<String> {
    f.interpreter_id
        .filter(|i| *i != 0)
        .map(|i| format!(" [interpreter {i}]"))
}

/// Where a stack crosses from one interpreter into the one it was entered from: before frame
/// `f`, when `last` (the interpreter of the frames above it) is another, the line
/// `--- interpreter 1 (entered from interpreter 0) ---`. `last` then becomes `f`'s.
pub fn interpreter_crossing(
    last: &mut Option<u32>,
    f: &FrameReport,
    indent: &str,
    out: &mut String,
) {
    crossing_into(last, f.interpreter_id, indent, out);
}

/// [`interpreter_crossing`] before a frame of interpreter `id` (None: not known, no line).
fn crossing_into(last: &mut Option<u32>, id: Option<u32>, indent: &str, out: &mut String) {
    let Some(id) = id else { return };
    if let Some(inner) = last.filter(|i| *i != id) {
        writeln!(
            out,
            "{indent}--- interpreter {inner} (entered from interpreter {id}) ---"
        )
        .unwrap();
    }
    *last = Some(id);
}

/// One `File "...", line N, in f` entry (and its source line) per frame, each line prefixed
/// with `indent`; a line where the stack crosses into another interpreter
/// ([`interpreter_crossing`]).
pub fn frames(frames: &[FrameReport], indent: &str, src: &mut Sources, out: &mut String) {
    let mut interp = None;
    // A native frame (with `--native`) belongs with the Python frame below it, which calls
    // it: a crossing goes above the C code that crossed (saved reports' native frames may
    // carry no id).
    let owner = crate::model::frame_interpreters(frames);
    for (k, f) in frames.iter().enumerate() {
        if out.len() >= MAX_TEXT_BYTES {
            if !out.ends_with(TEXT_CUT) {
                out.push_str(TEXT_CUT);
            }
            return;
        }
        crossing_into(&mut interp, owner[k], indent, out);
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

/// The crash line (when the target crashed), then every thread, each with a header, then the
/// errors: `py-bt -a`.
pub fn all_threads(r: &Report, src: &mut Sources) -> String {
    all_threads_parked(r, &[], src)
}

/// `py-bt -a`: with, under each thread, how many greenlets are parked in it (`parked`: native
/// id and count).
pub fn all_threads_parked(r: &Report, parked: &[(u64, usize)], src: &mut Sources) -> String {
    let mut out = String::new();
    if let Some(line) = verdict_text::report_crash_line(r) {
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
    let count = |s: GreenletState| ours.iter().filter(|g| g.state == s).count();
    writeln!(
        out,
        "Greenlets: {} ({} running, {} suspended, {} not started, {} dead)",
        ours.len(),
        count(GreenletState::Running),
        count(GreenletState::Suspended),
        count(GreenletState::NotStarted),
        count(GreenletState::Dead)
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
        match g.state {
            GreenletState::Running if native_id.is_some() => {
                writeln!(
                    out,
                    "  Greenlet {:#x} ({what}) running: the traceback above",
                    g.address
                )
                .unwrap();
            }
            GreenletState::Suspended => {
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
            state => writeln!(
                out,
                "  Greenlet {:#x} ({what}) {}",
                g.address,
                greenlet_state_words(state)
            )
            .unwrap(),
        }
    }
}

/// A greenlet's state in the text: `running`, `suspended`, `not started`, `dead`.
fn greenlet_state_words(s: GreenletState) -> &'static str {
    match s {
        GreenletState::Running => "running",
        GreenletState::Suspended => "suspended",
        GreenletState::NotStarted => "not started",
        GreenletState::Dead => "dead",
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
    let mut interp = None;
    for (i, f) in t.frames.iter().enumerate() {
        interpreter_crossing(&mut interp, f, "", &mut out);
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
    let mut interp = None;
    for (k, e) in entries.iter().enumerate() {
        // A native entry (the C function a frame calls) belongs with the Python frame that
        // calls it, the next one: a crossing goes above it.
        let python = entries[k..]
            .iter()
            .find_map(|e| e.index)
            .and_then(|i| t.frames.get(i));
        if let Some(f) = python {
            interpreter_crossing(&mut interp, f, if full { "" } else { "  " }, out);
        }
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
    use crate::model::StateWord;
    use crate::report::test_support::python_frame as py;

    fn thread(frames: Vec<FrameReport>) -> ThreadReport {
        ThreadReport {
            native_id: Some(7),
            thread_id: Some(7),
            name: Some("to-sub1".into()),
            native_name: None,
            holds_gil: Some(false),
            interpreter: Some(0x100),
            interpreter_id: frames.first().and_then(|f| f.interpreter_id),
            thread_state: Some(0x200),
            frames,
            truncated: false,
            why: None,
        }
    }

    /// `park` in interpreter 2, entered from `hop` in 1, entered from `run` in 0.
    fn nested() -> ThreadReport {
        let mut frames = vec![
            py("park", "c.py", 7),
            py("hop", "c.py", 9),
            py("run", "m.py", 3),
        ];
        for (f, id) in frames.iter_mut().zip([2, 1, 0]) {
            f.interpreter_id = Some(id);
        }
        thread(frames)
    }

    #[test]
    fn a_traceback_marks_each_interpreter_it_was_entered_from() {
        let t = nested();
        let r = crate::report::test_support::report_of("3.14.0", 1, vec![t.clone()]);
        let mut out = String::new();
        traceback(&t, &mut Sources::default(), &mut out);
        assert_eq!(
            out,
            "Traceback (most recent call first):\n\
             \x20 File \"c.py\", line 7, in park\n\
             \x20 --- interpreter 2 (entered from interpreter 1) ---\n\
             \x20 File \"c.py\", line 9, in hop\n\
             \x20 --- interpreter 1 (entered from interpreter 0) ---\n\
             \x20 File \"m.py\", line 3, in run\n"
        );
        assert_eq!(
            thread_header(&r, &t),
            "Thread 7 \"to-sub1\" (interpreter 2):"
        );
        assert_eq!(
            interpreter_label(&t.frames[0]).as_deref(),
            Some(" [interpreter 2]")
        );
        assert_eq!(interpreter_label(&t.frames[2]), None);
    }

    #[test]
    fn a_header_gives_the_system_call_of_an_instant_not_of_a_window() {
        let mut t = thread(vec![py("spin", "s.py", 3)]);
        let r = crate::report::test_support::report_of("3.12.1", 1, vec![t.clone()]);
        let mut header = |state| {
            t.why = Some(crate::model::ThreadWhy {
                state: Some(state),
                syscall: Some("futex".into()),
                ..Default::default()
            });
            thread_header(&r, &t)
        };
        assert_eq!(
            header(StateWord::Syscall),
            "Thread 7 \"to-sub1\" [syscall: futex]:"
        );
        assert_eq!(
            header(StateWord::Spinning),
            "Thread 7 \"to-sub1\" [spinning]:"
        );
        assert_eq!(header(StateWord::Busy), "Thread 7 \"to-sub1\" [busy]:");
    }

    #[test]
    fn native_frames_go_below_the_crossing_with_the_frame_that_calls_them() {
        let mut t = nested();
        let c = FrameReport::native(0x4242, Some("exec_impl".into()), None, None);
        t.frames.insert(1, c.clone());
        t.frames.push(c);
        let mut out = String::new();
        frames(&t.frames, "  ", &mut Sources::default(), &mut out);
        assert_eq!(
            out,
            "  File \"c.py\", line 7, in park\n\
             \x20 --- interpreter 2 (entered from interpreter 1) ---\n\
             \x20 (C) 0x0000000000004242 exec_impl\n\
             \x20 File \"c.py\", line 9, in hop\n\
             \x20 --- interpreter 1 (entered from interpreter 0) ---\n\
             \x20 File \"m.py\", line 3, in run\n\
             \x20 (C) 0x0000000000004242 exec_impl\n"
        );
    }

    #[test]
    fn py_bt_puts_a_crossing_above_the_c_function_that_crossed() {
        let t = nested();
        let python = |i| StackEntry {
            kind: FrameKind::Python,
            index: Some(i),
            level: None,
            text: None,
        };
        let native = StackEntry {
            kind: FrameKind::Native,
            index: None,
            level: None,
            text: Some("<built-in method exec of module object>".into()),
        };
        let entries = [python(0), native.clone(), python(1), python(2)];
        let mut out = String::new();
        super::entries(&t, &entries, false, &mut Sources::default(), &mut out);
        assert_eq!(
            out,
            "Traceback (most recent call first):\n\
             \x20 File \"c.py\", line 7, in park\n\
             \x20 --- interpreter 2 (entered from interpreter 1) ---\n\
             \x20 <built-in method exec of module object>\n\
             \x20 File \"c.py\", line 9, in hop\n\
             \x20 --- interpreter 1 (entered from interpreter 0) ---\n\
             \x20 File \"m.py\", line 3, in run\n"
        );
    }
}

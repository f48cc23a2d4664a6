//! The `pyunwind` command line, shared by the standalone binary (`src/bin/pyunwind.rs`) and the
//! entry point of the pip package (`_pyunwind.cli_main`), so there is one implementation.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Parser;

use crate::error::{Error, Result};
use crate::model::{Hosted, Report};
use crate::report::text as render;
use crate::report::text_out::TextOut;
use crate::report::{heap_text, tasks as task_text};
use crate::sample::window::{self, Plan};
use crate::session::native_stacks::ThreadRegs;
use crate::session::{self, Session};
use crate::target::{FileSearch, Target};

mod args;
mod install;
mod many;
mod record;
mod watch;

use args::{Cli, Cmd, DebugFiles, Files, Grouping, Output};
use install::{install, script_path, Debugger};
use many::{group_reports, json_lines, merge, outcomes, read_all, text_sections, with_descendants};

/// Where the debugger scripts of this installation are: the pip package's directory, or a
/// checkout's `gdb-scripts/` and `lldb-scripts/`.
#[derive(Clone, Debug)]
pub struct Scripts {
    pub gdb: PathBuf,
    pub lldb: PathBuf,
}

impl Scripts {
    /// The scripts of the checkout that holds `exe` (`<checkout>/target/release/pyunwind`).
    pub fn of_checkout(exe: &Path) -> Option<Scripts> {
        exe.ancestors().find_map(|dir| {
            let s = Scripts {
                gdb: dir.join("gdb-scripts/pyunwind-gdb.py"),
                lldb: dir.join("lldb-scripts/pyunwind_lldb.py"),
            };
            (s.gdb.is_file() && s.lldb.is_file()).then_some(s)
        })
    }
}

/// Runs the command line `args` (program name first); returns the exit status.
pub fn main<I, T>(args: I, scripts: Option<Scripts>) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    crate::allocator::huge_pages();
    let cli = match crate::panic::catch("cli-args", || Cli::try_parse_from(args)) {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
        Err(e) => {
            eprintln!("pyunwind: {e}");
            return e.exit_status();
        }
    };
    match crate::panic::catch_result("cli", || run(cli, scripts.as_ref())) {
        Ok((s, status)) => {
            let s = crate::report::text::printable(s);
            // A closed pipe (`| head`) is not an error worth a message.
            let _ = std::io::stdout().write_all(s.as_bytes());
            let _ = std::io::stdout().flush();
            status
        }
        Err(e) => {
            eprintln!("pyunwind: {e}");
            e.exit_status()
        }
    }
}

/// One target of a run.
#[derive(Clone, Debug)]
enum Spec {
    Live(i32),
    Core(PathBuf),
}

impl Spec {
    /// How the target was given, for error entries.
    fn label(&self) -> String {
        match self {
            Spec::Live(pid) => pid.to_string(),
            Spec::Core(p) => p.display().to_string(),
        }
    }
}

/// What is needed to open a core besides its path.
#[derive(Clone, Default)]
struct CoreFiles {
    exe: Option<String>,
    search: FileSearch,
}

fn open_target(spec: &Spec, files: &CoreFiles) -> Result<Target> {
    match spec {
        Spec::Live(pid) => Target::live(*pid).map(|mut t| {
            // The lookup is the target's own until a session shares it.
            if let Some(lookup) = std::sync::Arc::get_mut(&mut t.files) {
                lookup.set_debug(
                    files.search.debug_dirs.clone(),
                    files.search.debuginfod.clone(),
                );
            }
            t
        }),
        Spec::Core(core) => {
            Target::core_with(&path_str(core)?, files.exe.as_deref(), files.search.clone())
        }
    }
}

/// What a `pid` or `core` command reads, and how.
struct Targets {
    specs: Vec<Spec>,
    /// `--children`: each pid's descendants too.
    children: bool,
    grouping: Grouping,
    files: CoreFiles,
    out: Output,
}

/// Exit status 0 (`Ok`, `(text, status)`), or the error of a run that printed nothing.
fn run(cli: Cli, scripts: Option<&Scripts>) -> Result<(String, i32)> {
    let targets = match cli.cmd {
        Cmd::Pid {
            pids,
            children,
            for_seconds: Some(seconds),
            rate,
            debug,
            group,
            out,
        } => return watch_command(&pids, children, &group, seconds, rate, debug, &out),
        Cmd::Pid {
            pids,
            children,
            debug,
            group,
            out,
            ..
        } => Targets {
            specs: pids.into_iter().map(Spec::Live).collect(),
            children,
            grouping: group,
            files: debug.live_files(),
            out,
        },
        Cmd::Core {
            for_seconds: Some(_),
            ..
        } => {
            return Err(Error::Usage(
                "--for samples a running process over time and a core is one stop: use `pid \
                 PID --why --for SECONDS`"
                    .into(),
            ))
        }
        Cmd::Core {
            cores,
            exe,
            files,
            group,
            out,
            ..
        } => Targets {
            specs: cores.into_iter().map(Spec::Core).collect(),
            children: false,
            grouping: group,
            files: core_files(exe.as_deref(), files)?,
            out,
        },
        Cmd::Record {
            pid,
            duration,
            rate,
            format,
            output,
            idle,
            native,
            async_,
            greenlets,
            children,
            json,
            debug,
        } => {
            return record::record(record::RecordArgs {
                pid,
                plan: Plan::new(duration, rate)?,
                format,
                output,
                idle,
                native,
                async_,
                greenlets,
                children,
                json,
                files: debug.live_files(),
            });
        }
        Cmd::Watch {
            pids,
            children,
            stall,
            out_dir,
            interval,
            native,
            core,
            json,
            debug,
        } => {
            return watch::watch(watch::WatchArgs {
                pids,
                children,
                stall_s: stall,
                out_dir,
                interval_s: interval,
                native,
                core,
                json,
                files: debug.live_files(),
            })
        }
        Cmd::Merge {
            reports,
            group_by,
            tree,
            why,
            json,
        } => return merge(&reports, group_by, tree, why, json),
        Cmd::Diff {
            old,
            new,
            top,
            json,
        } => return heap_diff(&old, &new, top, json),
        Cmd::GdbScript => return script_line(scripts, Debugger::Gdb),
        Cmd::LldbScript => return script_line(scripts, Debugger::Lldb),
        Cmd::InstallGdb { init } => {
            return install(scripts, Debugger::Gdb, init.init_file, true).map(|s| (s, 0))
        }
        Cmd::InstallLldb { init } => {
            return install(scripts, Debugger::Lldb, init.init_file, true).map(|s| (s, 0))
        }
        Cmd::UninstallGdb { init } => {
            return install(scripts, Debugger::Gdb, init.init_file, false).map(|s| (s, 0))
        }
        Cmd::UninstallLldb { init } => {
            return install(scripts, Debugger::Lldb, init.init_file, false).map(|s| (s, 0))
        }
    };
    read_targets(targets)
}

/// `diff OLD NEW`: what grew between two saved heap reports.
fn heap_diff(old: &Path, new: &Path, top: usize, json: bool) -> Result<(String, i32)> {
    let read = |p: &Path| -> Result<crate::heap::diff::SavedHeap> {
        let file = std::fs::File::open(p).map_err(|err| Error::Io {
            path: p.display().to_string(),
            err,
        })?;
        let saved: crate::heap::diff::Saved =
            serde_json::from_reader(std::io::BufReader::new(file)).map_err(|e| Error::BadFile {
                path: p.display().to_string(),
                why: format!("not a --json report: {e}"),
            })?;
        saved.heap.ok_or_else(|| Error::BadFile {
            path: p.display().to_string(),
            why: "the report has no heap (save it with --heap --json)".into(),
        })
    };
    let d = crate::heap::diff::diff(&read(old)?, &read(new)?);
    let out = if json {
        let r = crate::heap::diff::HeapDiffReport { heap_diff: d };
        serde_json::to_string(&r).map_err(|e| Error::Usage(format!("diff: {e}")))? + "\n"
    } else {
        crate::report::heap_diff::render(&d, top)
    };
    Ok((out, 0))
}

/// `gdb-script`, `lldb-script`: the script's path, one line.
fn script_line(scripts: Option<&Scripts>, debugger: Debugger) -> Result<(String, i32)> {
    Ok((
        script_path(scripts, debugger)?.display().to_string() + "\n",
        0,
    ))
}

/// `pid PID --why --for SECONDS`, once its options are checked: it watches one process.
fn watch_command(
    pids: &[i32],
    children: bool,
    group: &Grouping,
    seconds: f64,
    rate: Option<f64>,
    debug: DebugFiles,
    out: &Output,
) -> Result<(String, i32)> {
    let pid = match (pids, children, group.by()) {
        ([pid], false, None) => *pid,
        _ => {
            return Err(Error::Usage(
                "--for watches one process (no --children, --group or --tree)".into(),
            ))
        }
    };
    let plan = Plan::new(seconds, rate.unwrap_or(window::DEFAULT_RATE_HZ))?;
    let files = debug.live_files();
    watch_one(pid, &plan, &files, out)
}

/// How `core`'s files are looked up: `--exe`, `--sysroot`, the search path, debug files.
fn core_files(exe: Option<&Path>, files: Files) -> Result<CoreFiles> {
    Ok(CoreFiles {
        exe: exe.map(path_str).transpose()?,
        search: FileSearch {
            sysroot: files.sysroot,
            search_path: files.lib_search_path,
            debuginfod: files.debug.debuginfod(),
            debug_dirs: files.debug.debug_file_directory,
        },
    })
}

/// Reads the targets: one on its own (its errors end the run), several in parallel, then
/// grouped, one JSON line each or one text section each.
fn read_targets(targets: Targets) -> Result<(String, i32)> {
    let Targets {
        specs,
        children,
        grouping,
        files,
        out,
    } = targets;
    check_output(&out)?;
    let by = grouping.by();
    let host = crate::model::host_name();
    if specs.len() == 1 && !children && by.is_none() {
        // One target: its report as before (errors end the run), plus `host`.
        let target = open_target(&specs[0], &files)?;
        let live_pid = match specs[0] {
            Spec::Live(pid) => Some(pid),
            Spec::Core(_) => None,
        };
        return with_report(target, live_pid, &out, true, |session, report| {
            emit_one(session, report, &out, &host)
        });
    }
    let targets = with_descendants(specs, children);
    let text_each = by.is_none() && !out.json;
    let results = read_all(&targets, &|(spec, _)| {
        let live_pid = match spec {
            Spec::Live(pid) => Some(*pid),
            Spec::Core(_) => None,
        };
        with_report(
            open_target(spec, &files)?,
            live_pid,
            &out,
            false,
            |session, report| {
                let text = if text_each {
                    render_text(session, report, &out)?
                } else {
                    String::new()
                };
                Ok((report.clone(), text))
            },
        )
    });
    let (read, status) = outcomes(targets, results, &host)?;
    if let Some(by) = by {
        return group_reports(read, by, &grouping, &out, &host, status);
    }
    if out.json {
        return json_lines(&read, &host, status);
    }
    Ok((text_sections(&read, &host), status))
}

/// One target's report as `out` asks: its JSON written out (with `host`), else its text.
fn emit_one(session: &Session, report: &Report, out: &Output, host: &str) -> Result<(String, i32)> {
    if out.json {
        let hosted = Hosted {
            host,
            pid: None,
            report,
        };
        match &report.tasks {
            Some(tasks) => {
                write_json_with(|w| crate::model::task_list_json::to_writer(w, &hosted, tasks))?
            }
            None => write_json(&hosted)?,
        }
        return Ok((String::new(), 0));
    }
    // Written out as it is made: the text of 100,000 tasks is 41 MB.
    let mut stdout = stdout_file();
    let mut text = TextOut::streamed(&mut stdout);
    render_text_into(session, report, out, &mut text)?;
    broken_pipe_ok(text.finish().map(drop))?;
    Ok((String::new(), 0))
}

/// `pid PID --why --for SECONDS`: the process sampled over the window, then its report made
/// at the window's end (or, when it exited before, its last sample's) with each thread's
/// progress and the state it gives.
fn watch_one(pid: i32, plan: &Plan, files: &CoreFiles, out: &Output) -> Result<(String, i32)> {
    check_output(out)?;
    let first = Session::open(open_target(&Spec::Live(pid), files)?)?;
    let mut watched = window::watch(pid, plan, &first);
    drop(first);
    let host = crate::model::host_name();
    let emit = |session: &Session, report: &Report| emit_one(session, report, out, &host);
    if watched.run.exited.is_none() {
        if let Ok(target) = open_target(&Spec::Live(pid), files) {
            return with_report(target, Some(pid), out, true, |session, report| {
                let mut r = report.clone();
                watched.conclude(&mut r, true);
                emit(session, &r)
            });
        }
        watched.run.exited = Some(watched.run.elapsed());
    }
    let Some((session, last)) = watched.last.take() else {
        return Err(Error::Usage(format!(
            "process {pid} exited before its first sample"
        )));
    };
    let mut r = crate::why::report(&session, last);
    watched.conclude(&mut r, false);
    emit(&session, &r)
}

/// The options that do not go together, for every target.
fn check_output(out: &Output) -> Result<()> {
    if (out.native || out.native_all) && (out.async_ || out.tasks) {
        return Err(Error::Usage(
            "--native does not go with --async or --tasks".into(),
        ));
    }
    Ok(())
}

/// Opens `target`, builds the report `out` asks for and hands it to `f` with the session.
/// `last`: the process exits once `f` is done, so the session and its reports are left to
/// the kernel instead of freed one allocation at a time (100,000 frames take about 10 ms).
fn with_report<T>(
    target: Target,
    live_pid: Option<i32>,
    out: &Output,
    last: bool,
    f: impl FnOnce(&Session, &Report) -> Result<T>,
) -> Result<T> {
    let mut session = Session::open(target)?;
    let asyncio = out.async_ || out.tasks;
    let native = out.native || out.native_all;
    let native_report = if native {
        let regs = match live_pid {
            Some(pid) => {
                let mut regs = ThreadRegs::of_live(pid, session.target.arch)?;
                session.set_thread_ids(regs.thread_ids());
                // `--why`'s states: as the stop found each thread, with its native stack.
                session.set_stopped_syscalls(std::mem::take(&mut regs.syscalls));
                regs
            }
            None => ThreadRegs::of_core(&session),
        };
        Some(session::native_stacks::native_report(
            &session,
            &regs,
            out.native_all,
            out.locals,
        )?)
    } else {
        None
    };
    // One report, owned and extended in place: each step's copy of a report of 100,000 tasks
    // cost a tenth of the run.
    let mut report = if out.tasks_from_report() || (asyncio && out.json && !out.why) {
        // The view's tasks become the report's: the text or JSON reads nothing else of
        // asyncio (100,000 tasks: the text built the tasks' report twice, 0.39 G
        // instructions each time).
        session::asyncio::take_report_once(&mut session)?
    } else if asyncio {
        session::asyncio::take_report(&mut session)?
    } else if let Some(r) = native_report {
        r
    } else {
        session::report::report(&session, None, out.locals)?
    };
    if out.greenlets {
        crate::why::add_greenlets(&session, &mut report, out.locals);
    }
    if out.heap {
        crate::heap::census::add_to(
            &session,
            &mut report,
            out.heap_top.unwrap_or(crate::heap::census::DEFAULT_TOP),
        );
    }
    if out.why {
        report = crate::why::report(&session, report);
    }
    let result = f(&session, &report);
    if last {
        std::mem::forget(report);
        std::mem::forget(session);
    }
    result
}

/// Streamed and compact: a report of 100,000 tasks is about 50 MB of JSON. Written to a
/// duplicate of standard output's descriptor, not through `Stdout`, whose line buffering
/// searches every 64 KiB block for a newline that compact JSON does not have.
fn write_json<T: serde::Serialize>(v: &T) -> Result<()> {
    write_json_with(|w| serde_json::to_writer(w, v))
}

/// [`write_json`] with `to_writer` making the JSON.
fn write_json_with(
    to_writer: impl FnOnce(&mut std::io::BufWriter<Box<dyn Write>>) -> serde_json::Result<()>,
) -> Result<()> {
    let mut w = std::io::BufWriter::with_capacity(1 << 16, stdout_file());
    let written = to_writer(&mut w)
        .map_err(std::io::Error::from)
        .and_then(|()| w.write_all(b"\n"))
        .and_then(|()| w.flush());
    broken_pipe_ok(written)
}

/// Standard output for large writes: a duplicate of its descriptor, after what `Stdout` holds
/// is flushed (`Stdout` when it cannot be duplicated).
fn stdout_file() -> Box<dyn Write> {
    use std::os::fd::AsFd;
    let stdout = std::io::stdout();
    let _ = stdout.lock().flush();
    match stdout.as_fd().try_clone_to_owned() {
        Ok(fd) => Box::new(std::fs::File::from(fd)),
        Err(_) => Box::new(stdout.lock()),
    }
}

/// A closed pipe (`| head`) is not an error worth a message.
fn broken_pipe_ok(r: std::io::Result<()>) -> Result<()> {
    match r {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(Error::Usage(format!("writing the report: {e}")))
        }
        _ => Ok(()),
    }
}

/// The text of one target's report.
fn render_text(session: &Session, report: &Report, out: &Output) -> Result<String> {
    let mut text = TextOut::kept();
    render_text_into(session, report, out, &mut text)?;
    Ok(text.into_kept())
}

/// [`render_text`] into `all`, which may write it out as it grows.
fn render_text_into(
    session: &Session,
    report: &Report,
    out: &Output,
    all: &mut TextOut,
) -> Result<()> {
    let asyncio = out.async_ || out.tasks;
    let py = session::report::python_report(session);
    // A crash is the first thing to say; with --why, the whole verdict.
    let text = all.text();
    if out.why {
        text.push_str(&crate::report::verdict_text::verdict(report));
        text.push('\n');
    } else if let Some(l) = crate::report::verdict_text::report_crash_line(report) {
        text.push_str(&l);
        text.push('\n');
    }
    *text += &format!(
        "Python {} ({} {})\n\n",
        py.version,
        py.source,
        py.pid.map_or(String::new(), |p| format!("pid {p}"))
    );
    if asyncio {
        let from_report = report.tasks.is_some() && out.tasks_from_report();
        let tasks_report = if from_report {
            report
        } else {
            session::asyncio::report(session)?
        };
        if out.async_ {
            all.push_part(&task_text::async_bt(
                tasks_report,
                &mut render::Sources::default(),
            ));
        }
        if out.tasks {
            if out.async_ {
                all.text().push('\n');
            }
            task_text::tree_and_table_into(tasks_report, true, true, all);
        }
    }
    if !asyncio {
        render::threads(report, &mut render::Sources::default(), all.text());
        render::native_stops(report, all.text());
    }
    if let Some(h) = &report.heap {
        all.text().push('\n');
        all.text().push_str(&heap_text::render(
            h,
            out.heap_top.unwrap_or(crate::heap::census::DEFAULT_TOP),
        ));
    }
    Ok(())
}

fn path_str(p: &Path) -> Result<String> {
    p.to_str()
        .map(str::to_string)
        .ok_or_else(|| Error::Usage(format!("{}: path is not UTF-8", p.display())))
}

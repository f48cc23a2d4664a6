//! The `pyunwind` command line, shared by the standalone binary (`src/bin/pyunwind.rs`) and the
//! entry point of the pip package (`_pyunwind.cli_main`), so there is one implementation.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand, ValueEnum};

use crate::error::{Error, Result};
use crate::report::gather::Gatherer;
use crate::report::group::{GroupBy, TargetError, ThreadIn};
use crate::report::group_text;
use crate::report::text as render;
use crate::report::{Hosted, Report};
use crate::sample::window::{self, Plan};
use crate::session::native_stacks::ThreadRegs;
use crate::session::{self, Session};
use crate::symbols::debuginfod::{Client, Config};
use crate::target::{FileSearch, Target};

mod install;
mod many;
mod record;

use install::{install, script_path, Debugger};
use many::{descendants, merge, read_all};
use record::ProfileFormat;

const ABOUT: &str = "Python stacks of a live process or a core file, without debug info";

const LONG_ABOUT: &str = "\
Python stacks of a live process or a core file, without debug info.

pyunwind reads only the target's memory (process_vm_readv, or the core file and the files it
maps) and decodes CPython 3.10 to 3.15's own data structures: every thread's Python stack, its
locals, asyncio tasks with their await chains. Nothing is stopped, injected or run in the
target. Cores may be compressed (zstd, lz4, xz, gzip: recognised by their first bytes).

The same decoder is loaded into gdb and lldb: `pyunwind gdb-script` prints the script to
`source` in gdb, `pyunwind install-gdb` adds it to ~/.gdbinit (lldb: `lldb-script`,
`install-lldb`).

Errors are one line on stderr and exit status 1; a partially readable target still gives a
report, with what could not be read listed under `errors`. A bug in pyunwind itself is one line
`pyunwind: internal error in ...` and exit status 70.

Several targets (`pid PID...`, `pid --children PID`, `core CORE...`) are read in parallel; one
that cannot be read gets an error entry in the output and the others are still read. Exit
status 0 when every target was read, 1 when some could not be (70 for a bug). `--group` groups
identical Python stacks across the targets' threads, `--tree` merges them into one call tree,
and with `--why` both start with the straggler verdict; `merge` does the same over saved
`--json` reports from any number of machines.";

#[derive(Parser)]
#[command(name = "pyunwind", version, about = ABOUT, long_about = LONG_ABOUT)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Args)]
struct Output {
    /// Show each frame's local variables (`name = repr`, arguments first).
    #[arg(long)]
    locals: bool,
    /// asyncio: each task's async stack (its coroutines, the tasks awaiting it, the loop's
    /// frames), grouped by the thread running its loop; threads without a loop as usual.
    #[arg(long = "async")]
    async_: bool,
    /// asyncio: the task tree (like `python -m asyncio pstree`) and table (like `ps`).
    #[arg(long)]
    tasks: bool,
    /// Also every thread's native frames (unwound with the modules' CFI, or frame pointers),
    /// with the Python frames in place of the eval-loop frames that run them and CPython's
    /// call plumbing between two Python frames hidden. Live: each thread is stopped (ptrace)
    /// for as long as it takes to copy its registers and stack, and the stop times are shown.
    #[arg(long)]
    native: bool,
    /// Like --native, without hiding anything, and every thread of the process: those with
    /// no Python thread state too (a C library's own threads), with their native frames.
    #[arg(long = "native-all")]
    native_all: bool,
    /// greenlet and gevent: every greenlet (running, suspended, not started, dead), each
    /// suspended one with the stack it resumes in, under the thread it belongs to.
    #[arg(long)]
    greenlets: bool,
    /// What the memory is: the interpreters' objects by type (count, `sys.getsizeof` bytes,
    /// share), the largest objects and what the walk could not reach (docs/report.md, "The
    /// heap"). Reads only: nothing runs in the target.
    #[arg(long)]
    heap: bool,
    /// With --heap: how many types and largest objects to list (default 20).
    #[arg(long = "heap-top", value_name = "N", requires = "heap")]
    heap_top: Option<usize>,
    /// Why it is stuck or crashed: the crash, each thread's state, the wait it is blocked in
    /// and who holds what it waits for, the locks it holds, and the deadlocks; the verdict
    /// first.
    #[arg(long)]
    why: bool,
    /// Print the JSON report (docs/report.md, docs/report.schema.json) instead of text; with
    /// --async or --tasks it has `tasks`, `loops` and `cycles`. Several targets: one line per
    /// target; with --group: one object with the groups.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct Files {
    /// Look up the files the target names (executable, libpython, ...) under DIR first, as
    /// gdb's `set sysroot` does: for a core from a container image or another machine.
    #[arg(long, value_name = "DIR")]
    sysroot: Option<PathBuf>,
    /// Also look for those files by their file name in DIR (repeatable).
    #[arg(long = "lib-search-path", value_name = "DIR")]
    lib_search_path: Vec<PathBuf>,
    #[command(flatten)]
    debug: DebugFiles,
}

#[derive(clap::Args)]
struct DebugFiles {
    /// Look for separate debug files (by build-id or .gnu_debuglink) under DIR instead of
    /// /usr/lib/debug, as gdb's `set debug-file-directory` (repeatable).
    #[arg(long = "debug-file-directory", value_name = "DIR")]
    debug_file_directory: Vec<PathBuf>,
    /// Do not ask the debuginfod servers of DEBUGINFOD_URLS for what is not found here. With
    /// them (and --native), a module without DWARF whose debug file is not found locally gets
    /// it by build-id, and a core's file that is missing or of another build is fetched; into
    /// the cache gdb and elfutils share (DEBUGINFOD_CACHE_PATH, else
    /// $XDG_CACHE_HOME/debuginfod_client or ~/.cache/debuginfod_client), each checked against
    /// its build-id. DEBUGINFOD_TIMEOUT (seconds, default 90) bounds connecting and each read
    /// (and a download slower than 100 KiB/s over that long is given up), DEBUGINFOD_MAXTIME a
    /// whole download, DEBUGINFOD_MAXSIZE its size. What could not be fetched is one error
    /// entry per module.
    #[arg(long = "no-debuginfod")]
    no_debuginfod: bool,
}

impl DebugFiles {
    /// How a live process's files are looked up: its own, then these debug files.
    fn live_files(self) -> CoreFiles {
        CoreFiles {
            search: FileSearch {
                debuginfod: self.debuginfod(),
                debug_dirs: self.debug_file_directory,
                ..FileSearch::default()
            },
            ..CoreFiles::default()
        }
    }

    /// The run's debuginfod client: one for every target, so that a file is fetched once.
    fn debuginfod(&self) -> Option<std::sync::Arc<Client>> {
        if self.no_debuginfod {
            return None;
        }
        Config::from_env().map(|c| std::sync::Arc::new(Client::new(c)))
    }
}

#[derive(clap::Args)]
struct Grouping {
    /// Group identical Python stacks (same functions, files and lines) across every thread
    /// of every target: biggest group first, groups of a single process flagged as outliers.
    /// With --native the Python frames are the key and the first thread's native frames are
    /// shown; with --async or --tasks, asyncio tasks are grouped too, by their await chains;
    /// with --greenlets, suspended greenlets, by their stacks; with --why, each thread's
    /// state is part of the key.
    #[arg(long)]
    group: bool,
    /// What makes two stacks identical: `line` (functions, files and lines) or `function`
    /// (lines may differ). Implies --group.
    #[arg(long = "group-by", value_name = "KEY", value_enum)]
    group_by: Option<GroupByArg>,
    /// Merge every thread's Python stack into one call tree, as LLNL's STAT draws it: one
    /// line per frame, outermost first, with how many threads pass through it, and at each
    /// leaf the threads whose stack ends there (with --async or --greenlets, a tree of the
    /// tasks' or greenlets' stacks too). Implies --group. With --why over several
    /// processes, both --group and --tree start with the straggler verdict: where the
    /// majority of the job's ranks is, and which are elsewhere.
    #[arg(long)]
    tree: bool,
}

impl Grouping {
    fn by(&self) -> Option<GroupBy> {
        match self.group_by {
            Some(GroupByArg::Line) => Some(GroupBy::Line),
            Some(GroupByArg::Function) => Some(GroupBy::Function),
            None => (self.group || self.tree).then_some(GroupBy::Line),
        }
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum GroupByArg {
    Line,
    Function,
}

#[derive(clap::Args)]
struct InitFile {
    /// The debugger's init file to edit (default: ~/.gdbinit for gdb, ~/.lldbinit for lldb).
    #[arg(long, value_name = "PATH")]
    init_file: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Cmd {
    /// Read a running process (process_vm_readv; nothing is stopped or injected).
    ///
    /// Files are read through /proc/PID/root and /proc/PID/map_files, so a process in another
    /// mount namespace (a container) or whose executable was deleted or replaced works too.
    ///
    /// Several pids are read in parallel. --json then prints one line per process: its report
    /// with `host` and `pid`, or `{"target", "host", "pid", "error"}` for one that could not be
    /// read (the lines can be concatenated from many hosts into `pyunwind merge -`).
    Pid {
        /// The process ids.
        #[arg(required = true, num_args = 1..)]
        pids: Vec<i32>,
        /// Also every process under each PID (its children, theirs, ...: from /proc), for a
        /// pre-fork server, a pool or a launcher; those in which no Python is found are left
        /// out (named on stderr).
        #[arg(long)]
        children: bool,
        /// With --why: watch the process for SECONDS instead of reading it once, sampling
        /// every thread's Python stack (the process is never stopped) and its CPU time
        /// (/proc). Each thread gets `progress` (samples, CPU seconds, whether its stack
        /// moved, how many distinct stacks); one on CPU 60% of the window whose stack never
        /// moved is `spinning`, one on CPU 10% whose stack moved is `busy`; the others keep
        /// what the last sample shows. One process.
        #[arg(long = "for", value_name = "SECONDS", requires = "why")]
        for_seconds: Option<f64>,
        /// With --for: samples a second (default 100, at most 1000).
        #[arg(long, value_name = "HZ", requires = "for_seconds")]
        rate: Option<f64>,
        #[command(flatten)]
        debug: DebugFiles,
        #[command(flatten)]
        group: Grouping,
        #[command(flatten)]
        out: Output,
    },
    /// Read an ELF core file (from gcore, the kernel or systemd-coredump; plain or compressed).
    ///
    /// The files the core names are checked against the build-ids the core records; one that
    /// differs is refused. Use --sysroot, --lib-search-path or --exe when the core comes from
    /// elsewhere.
    ///
    /// Several cores are read in parallel, as several pids are (see `pid`).
    Core {
        /// The core files (plain, or compressed with zstd, lz4, xz or gzip).
        #[arg(required = true, num_args = 1..)]
        cores: Vec<PathBuf>,
        /// The executable, when the path recorded in the core is wrong or missing.
        #[arg(long, value_name = "PATH")]
        exe: Option<PathBuf>,
        /// `pid`'s only: a core is one stop (refused with a one-line error).
        #[arg(long = "for", value_name = "SECONDS", hide = true)]
        for_seconds: Option<String>,
        #[command(flatten)]
        files: Files,
        #[command(flatten)]
        group: Grouping,
        #[command(flatten)]
        out: Output,
    },
    /// Record a sampling profile of a running process: every thread's Python stack at each
    /// tick (the process is never stopped), written as collapsed stacks (`root;...;leaf
    /// COUNT`, frames as `function (file:line)`) or speedscope's file (one `sampled` profile
    /// per thread). Ends with one line: the samples taken, the rate achieved, the thread
    /// samples written, torn (a frame that could not be read: left out) and dropped at a cap.
    Record {
        /// The process id.
        pid: i32,
        /// Seconds to record.
        #[arg(short = 'd', long, value_name = "SECONDS", default_value_t = 10.0)]
        duration: f64,
        /// Samples a second (at most 1000).
        #[arg(short = 'r', long, value_name = "HZ", default_value_t = window::DEFAULT_RATE_HZ)]
        rate: f64,
        /// The file's format.
        #[arg(short = 'f', long, value_enum, default_value = "speedscope")]
        format: ProfileFormat,
        /// The file to write.
        #[arg(short = 'o', long, value_name = "FILE")]
        output: PathBuf,
        /// Also the threads that are not running (blocked, sleeping); without it a thread's
        /// sample counts only when it is on a CPU or waiting for one (/proc's state `R`).
        #[arg(long)]
        idle: bool,
        #[command(flatten)]
        debug: DebugFiles,
    },
    /// Group identical Python stacks over saved `--json` reports (from any number of
    /// machines): as `--group` does, streamed, one report held at a time; tasks and greenlets
    /// too, of reports saved with --async, --tasks or --greenlets.
    ///
    /// Each file holds reports one after the other (as `pid|core --json` prints them, or
    /// pretty-printed); `-` reads them from stdin. A report that is corrupt or cut short gets
    /// an error entry and the others are merged; exit status 1 then.
    Merge {
        /// Saved reports (`-`: stdin).
        #[arg(required = true, num_args = 1..)]
        reports: Vec<PathBuf>,
        /// What makes two stacks identical: `line` or `function` (lines may differ).
        #[arg(
            long = "group-by",
            value_name = "KEY",
            value_enum,
            default_value = "line"
        )]
        group_by: GroupByArg,
        /// Also merge every thread's stack into one call tree (see `pid --tree`).
        #[arg(long)]
        tree: bool,
        /// Also the straggler verdict: where the majority of the job's ranks is, and which
        /// are elsewhere (with each thread's state where the reports were made with --why).
        #[arg(long)]
        why: bool,
        /// Print the groups as JSON (docs/report.md).
        #[arg(long)]
        json: bool,
    },
    /// Print the path of the gdb script (`source` it, or `gdb -x PATH`).
    GdbScript,
    /// Print the path of the lldb script (`command script import PATH`).
    LldbScript,
    /// Make gdb load pyunwind at start-up: add `source <gdb-script>` to ~/.gdbinit (idempotent).
    InstallGdb {
        #[command(flatten)]
        init: InitFile,
    },
    /// Make lldb load pyunwind at start-up: add `command script import <lldb-script>` to
    /// ~/.lldbinit (idempotent).
    InstallLldb {
        #[command(flatten)]
        init: InitFile,
    },
    /// Remove the line install-gdb added.
    UninstallGdb {
        #[command(flatten)]
        init: InitFile,
    },
    /// Remove the line install-lldb added.
    UninstallLldb {
        #[command(flatten)]
        init: InitFile,
    },
}

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
    crate::heap::huge_pages();
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

/// Exit status 0 (`Ok`, `(text, status)`), or the error of a run that printed nothing.
fn run(cli: Cli, scripts: Option<&Scripts>) -> Result<(String, i32)> {
    let (specs, children, grouping, files, out) = match cli.cmd {
        Cmd::Pid {
            pids,
            children,
            for_seconds: Some(seconds),
            rate,
            debug,
            group,
            out,
        } => {
            let pid = match (&pids[..], children, group.by()) {
                ([pid], false, None) => *pid,
                _ => {
                    return Err(Error::Usage(
                        "--for watches one process (no --children, --group or --tree)".into(),
                    ))
                }
            };
            let plan = Plan::new(seconds, rate.unwrap_or(window::DEFAULT_RATE_HZ))?;
            let files = debug.live_files();
            return watch_one(pid, &plan, &files, &out);
        }
        Cmd::Pid {
            pids,
            children,
            debug,
            group,
            out,
            ..
        } => (
            pids.into_iter().map(Spec::Live).collect::<Vec<_>>(),
            children,
            group,
            debug.live_files(),
            out,
        ),
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
        } => (
            cores.into_iter().map(Spec::Core).collect(),
            false,
            group,
            CoreFiles {
                exe: exe.as_deref().map(path_str).transpose()?,
                search: FileSearch {
                    sysroot: files.sysroot,
                    search_path: files.lib_search_path,
                    debuginfod: files.debug.debuginfod(),
                    debug_dirs: files.debug.debug_file_directory,
                },
            },
            out,
        ),
        Cmd::Record {
            pid,
            duration,
            rate,
            format,
            output,
            idle,
            debug,
        } => {
            let files = debug.live_files();
            let plan = Plan::new(duration, rate)?;
            return record::record(pid, &plan, format, &output, idle, &files);
        }
        Cmd::Merge {
            reports,
            group_by,
            tree,
            why,
            json,
        } => return merge(&reports, group_by, tree, why, json),
        Cmd::GdbScript => {
            return Ok((
                script_path(scripts, Debugger::Gdb)?.display().to_string() + "\n",
                0,
            ))
        }
        Cmd::LldbScript => {
            return Ok((
                script_path(scripts, Debugger::Lldb)?.display().to_string() + "\n",
                0,
            ))
        }
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
    check_output(&out)?;
    let by = grouping.by();
    let host = crate::report::host_name();
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
    let mut targets: Vec<(Spec, bool)> = Vec::new();
    for spec in specs {
        match (&spec, children) {
            // With --children the root is part of the tree too: a launcher may be a shell.
            (Spec::Live(root), true) => {
                // A root that is gone is read as a target, which gives its error entry.
                let Ok(tree) = descendants(*root) else {
                    targets.push((spec, false));
                    continue;
                };
                targets.push((spec.clone(), true));
                for pid in tree {
                    if !targets
                        .iter()
                        .any(|(s, _)| matches!(s, Spec::Live(p) if *p == pid))
                    {
                        targets.push((Spec::Live(pid), true));
                    }
                }
            }
            _ => targets.push((spec, false)),
        }
    }
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
    // Processes of a tree in which no Python runs (a shell, a compiler) are not targets.
    let mut left_out = Vec::new();
    let mut status = 0;
    let mut read = Vec::new();
    for ((spec, from_tree), r) in targets.into_iter().zip(results) {
        match r {
            Err(Error::NoPython(_)) if from_tree => left_out.push(match &spec {
                // Named as ps names it, so that the note says what was left out.
                Spec::Live(pid) => match std::fs::read_to_string(format!("/proc/{pid}/comm")) {
                    Ok(comm) => format!("{pid} ({})", comm.trim_end()),
                    Err(_) => pid.to_string(),
                },
                Spec::Core(_) => spec.label(),
            }),
            Err(e) => {
                status = status.max(e.exit_status());
                let pid = match spec {
                    Spec::Live(pid) => u32::try_from(pid).ok(),
                    Spec::Core(_) => None,
                };
                let error = TargetError {
                    target: spec.label(),
                    host: Some(host.clone()),
                    pid,
                    error: e.to_string(),
                };
                read.push((spec, pid, Err(error)));
            }
            Ok((report, text)) => {
                let pid = match spec {
                    Spec::Live(pid) => u32::try_from(pid).ok(),
                    Spec::Core(_) => report.python.pid,
                };
                read.push((spec, pid, Ok((report, text))));
            }
        }
    }
    if read.is_empty() {
        return Err(Error::NoPython(format!(
            "no process of the tree runs Python ({} looked at)",
            left_out.len()
        )));
    }
    if !left_out.is_empty() {
        eprintln!(
            "pyunwind: no Python in {} process(es) of the tree, left out: {}",
            left_out.len(),
            left_out.join(", ")
        );
    }
    if let Some(by) = by {
        let mut grouper = Gatherer::new(by, grouping.tree, out.why);
        if out.async_ || out.tasks {
            grouper = grouper.with_tasks(true);
        }
        if out.greenlets {
            grouper = grouper.with_greenlets(true);
        }
        let mut failed = Vec::new();
        for (_, pid, r) in read {
            match r {
                // Every report's tasks and greenlets too (none: an empty list), so that
                // each grouping counts the same processes.
                Ok((report, _)) => {
                    grouper.add_report(Some(&host), pid, report.threads.iter().map(From::from));
                    grouper.add_tasks(
                        Some(&host),
                        pid,
                        Some(report.tasks.iter().flatten().map(From::from)),
                    );
                    grouper.add_greenlets(
                        Some(&host),
                        pid,
                        Some(
                            report
                                .greenlets
                                .iter()
                                .flatten()
                                .filter_map(ThreadIn::greenlet),
                        ),
                    );
                }
                Err(e) => failed.push(e),
            }
        }
        let gathered = grouper.finish(failed);
        if out.json {
            write_json(&gathered)?;
            return Ok((String::new(), status));
        }
        return Ok((
            group_text::render(&gathered, &mut render::Sources::default()),
            status,
        ));
    }
    if out.json {
        // One line per target, in the order given: each what `pid PID --json` prints for it.
        let mut w = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
        for (_, pid, r) in &read {
            let written = match r {
                Ok((report, _)) => serde_json::to_writer(
                    &mut w,
                    &Hosted {
                        host: &host,
                        pid: *pid,
                        report,
                    },
                ),
                Err(e) => serde_json::to_writer(&mut w, e),
            }
            .map_err(std::io::Error::from)
            .and_then(|()| w.write_all(b"\n"));
            if let Err(e) = written {
                return broken_pipe_ok(Err(e)).map(|()| (String::new(), status));
            }
        }
        return broken_pipe_ok(w.flush()).map(|()| (String::new(), status));
    }
    let mut text = String::new();
    for (i, (spec, pid, r)) in read.iter().enumerate() {
        if i > 0 {
            text.push('\n');
        }
        // `==> pid 4101 on b7 <==`, `==> core /cores/core.4101 (pid 4101) on b7 <==`.
        let what = match (spec, pid) {
            (Spec::Live(p), _) => format!("pid {p}"),
            (Spec::Core(c), Some(p)) => format!("core {} (pid {p})", c.display()),
            (Spec::Core(c), None) => format!("core {}", c.display()),
        };
        match r {
            Ok((_, body)) => text += &format!("==> {what} on {host} <==\n{body}"),
            Err(e) => text += &format!("==> {what} on {host} <==\nerror: {}\n", e.error),
        }
    }
    Ok((text, status))
}

/// One target's report as `out` asks: its JSON written out (with `host`), else its text.
fn emit_one(session: &Session, report: &Report, out: &Output, host: &str) -> Result<(String, i32)> {
    if out.json {
        write_json(&Hosted {
            host,
            pid: None,
            report,
        })?;
        return Ok((String::new(), 0));
    }
    Ok((render_text(session, report, out)?, 0))
}

/// `pid PID --why --for SECONDS`: the process sampled over the window, then its report made
/// at the window's end (or, when it exited before, its last sample's) with each thread's
/// progress and the state it gives.
fn watch_one(pid: i32, plan: &Plan, files: &CoreFiles, out: &Output) -> Result<(String, i32)> {
    check_output(out)?;
    let first = Session::open(open_target(&Spec::Live(pid), files)?)?;
    let mut watched = window::watch(pid, plan, &first);
    drop(first);
    let host = crate::report::host_name();
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
    let mut r = crate::why::report(&session, &last);
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
                let regs = ThreadRegs::of_live(pid, session.target.arch)?;
                session.set_thread_ids(regs.thread_ids());
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
    let mut owned = None;
    let report = if asyncio {
        session::asyncio::report(&session)?
    } else if let Some(r) = &native_report {
        r
    } else {
        owned.insert(session::report::report(&session, None, out.locals)?)
    };
    let mut green_owned = None;
    let report = if out.greenlets {
        let mut r = report.clone();
        session::greenlets::add_to(&session, &mut r, out.locals);
        green_owned.insert(r)
    } else {
        report
    };
    let mut heap_owned = None;
    let report = if out.heap {
        let mut r = report.clone();
        session::heap::add_to(
            &session,
            &mut r,
            out.heap_top.unwrap_or(session::heap::DEFAULT_TOP),
        );
        heap_owned.insert(r)
    } else {
        report
    };
    let mut why_owned = None;
    let report = if out.why {
        why_owned.insert(crate::why::report(&session, report))
    } else {
        report
    };
    let result = f(&session, report);
    if last {
        std::mem::forget((owned, native_report, green_owned, heap_owned, why_owned));
        std::mem::forget(session);
    }
    result
}

/// Streamed and compact: a report of 100,000 tasks is about 50 MB of JSON. Written to a
/// duplicate of standard output's descriptor, not through `Stdout`, whose line buffering
/// searches every 64 KiB block for a newline that compact JSON does not have.
fn write_json<T: serde::Serialize>(v: &T) -> Result<()> {
    use std::os::fd::AsFd;
    let stdout = std::io::stdout();
    let _ = stdout.lock().flush();
    let mut w = match stdout.as_fd().try_clone_to_owned() {
        Ok(fd) => std::io::BufWriter::with_capacity(
            1 << 16,
            Box::new(std::fs::File::from(fd)) as Box<dyn Write>,
        ),
        Err(_) => {
            std::io::BufWriter::with_capacity(1 << 16, Box::new(stdout.lock()) as Box<dyn Write>)
        }
    };
    let written = serde_json::to_writer(&mut w, v)
        .map_err(std::io::Error::from)
        .and_then(|()| w.write_all(b"\n"))
        .and_then(|()| w.flush());
    broken_pipe_ok(written)
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
    let asyncio = out.async_ || out.tasks;
    let py = session::report::python_report(session);
    // A crash is the first thing to say; with --why, the whole verdict.
    let mut text = if out.why {
        crate::report::verdict_text::verdict(report) + "\n"
    } else {
        crate::report::verdict_text::report_crash_line(report)
            .map_or_else(String::new, |l| l + "\n")
    };
    text += &format!(
        "Python {} ({} {})\n\n",
        py.version,
        py.source,
        py.pid.map_or(String::new(), |p| format!("pid {p}"))
    );
    if out.async_ {
        text.push_str(&session::asyncio::render_async(session)?);
    }
    if out.tasks {
        if out.async_ {
            text.push('\n');
        }
        text.push_str(&session::asyncio::render_tasks(session, true, true)?);
    }
    if !asyncio {
        render::threads(report, &mut render::Sources::default(), &mut text);
        render::native_stops(report, &mut text);
    }
    if let Some(h) = &report.heap {
        text.push('\n');
        text.push_str(&session::heap::render(
            h,
            out.heap_top.unwrap_or(session::heap::DEFAULT_TOP),
        ));
    }
    Ok(text)
}

fn path_str(p: &Path) -> Result<String> {
    p.to_str()
        .map(str::to_string)
        .ok_or_else(|| Error::Usage(format!("{}: path is not UTF-8", p.display())))
}

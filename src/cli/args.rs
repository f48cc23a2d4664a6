//! The command line's options: the subcommands and the flags they share, as clap parses them.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use super::CoreFiles;
use crate::memory::debuginfod::{Client, Config};
use crate::report::group::GroupBy;
use crate::sample::window;
use crate::target::FileSearch;

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
pub(super) struct Cli {
    #[command(subcommand)]
    pub(super) cmd: Cmd,
}

#[derive(clap::Args)]
pub(super) struct Output {
    /// Show each frame's local variables (`name = repr`, arguments first).
    #[arg(long)]
    pub(super) locals: bool,
    /// asyncio: each task's async stack (its coroutines, the tasks awaiting it, the loop's
    /// frames), grouped by the thread running its loop; threads without a loop as usual.
    #[arg(long = "async")]
    pub(super) async_: bool,
    /// asyncio: the task tree (like `python -m asyncio pstree`) and table (like `ps`).
    #[arg(long)]
    pub(super) tasks: bool,
    /// Also every thread's native frames (unwound with the modules' CFI, or frame pointers),
    /// with the Python frames in place of the eval-loop frames that run them and CPython's
    /// call plumbing between two Python frames hidden. Live: each thread is stopped (ptrace)
    /// for as long as it takes to copy its registers and stack, and the stop times are shown.
    #[arg(long)]
    pub(super) native: bool,
    /// Like --native, without hiding anything, and every thread of the process: those with
    /// no Python thread state too (a C library's own threads), with their native frames.
    #[arg(long = "native-all")]
    pub(super) native_all: bool,
    /// greenlet and gevent: every greenlet (running, suspended, not started, dead), each
    /// suspended one with the stack it resumes in, under the thread it belongs to.
    #[arg(long)]
    pub(super) greenlets: bool,
    /// What the memory is: the interpreters' objects by type (count, `sys.getsizeof` bytes,
    /// share), the largest objects and what the walk could not reach (docs/report.md, "The
    /// heap"). Reads only: nothing runs in the target.
    #[arg(long)]
    pub(super) heap: bool,
    /// With --heap: how many types and largest objects to list (default 20).
    #[arg(long = "heap-top", value_name = "N", requires = "heap")]
    pub(super) heap_top: Option<usize>,
    /// Why it is stuck or crashed: the crash, each thread's state, the wait it is blocked in
    /// and who holds what it waits for, the locks it holds, and the deadlocks; the verdict
    /// first.
    #[arg(long)]
    pub(super) why: bool,
    /// Print the JSON report (docs/report.md, docs/report.schema.json) instead of text; with
    /// --async or --tasks it has `tasks`, `loops` and `cycles`. Several targets: one line per
    /// target; with --group: one object with the groups.
    #[arg(long)]
    pub(super) json: bool,
}

impl Output {
    /// The tasks' text and JSON come from the report this target's run builds, its tasks
    /// moved out of the stop's view rather than copied: nothing added to it (a verdict, the
    /// heap, greenlets, and their errors) is in the tasks' text, which shows only the stop's
    /// asyncio report. Otherwise that text is rendered from the session's own report.
    pub(super) fn tasks_from_report(&self) -> bool {
        (self.async_ || self.tasks) && !self.why && !self.heap && !self.greenlets
    }
}

#[derive(clap::Args)]
pub(super) struct Files {
    /// Look up the files the target names (executable, libpython, ...) under DIR first, as
    /// gdb's `set sysroot` does: for a core from a container image or another machine.
    #[arg(long, value_name = "DIR")]
    pub(super) sysroot: Option<PathBuf>,
    /// Also look for those files by their file name in DIR (repeatable).
    #[arg(long = "lib-search-path", value_name = "DIR")]
    pub(super) lib_search_path: Vec<PathBuf>,
    #[command(flatten)]
    pub(super) debug: DebugFiles,
}

#[derive(clap::Args)]
pub(super) struct DebugFiles {
    /// Look for separate debug files (by build-id or .gnu_debuglink) under DIR instead of
    /// /usr/lib/debug, as gdb's `set debug-file-directory` (repeatable).
    #[arg(long = "debug-file-directory", value_name = "DIR")]
    pub(super) debug_file_directory: Vec<PathBuf>,
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
    pub(super) no_debuginfod: bool,
}

impl DebugFiles {
    /// How a live process's files are looked up: its own, then these debug files.
    pub(super) fn live_files(self) -> CoreFiles {
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
    pub(super) fn debuginfod(&self) -> Option<std::sync::Arc<Client>> {
        if self.no_debuginfod {
            return None;
        }
        Config::from_env().map(|c| std::sync::Arc::new(Client::new(c)))
    }
}

#[derive(clap::Args)]
pub(super) struct Grouping {
    /// Group identical Python stacks (same functions, files and lines) across every thread
    /// of every target: biggest group first, groups of a single process flagged as outliers.
    /// With --native the Python frames are the key and the first thread's native frames are
    /// shown; with --async or --tasks, asyncio tasks are grouped too, by their await chains;
    /// with --greenlets, suspended greenlets, by their stacks; with --why, each thread's
    /// state is part of the key.
    #[arg(long)]
    pub(super) group: bool,
    /// What makes two stacks identical: `line` (functions, files and lines) or `function`
    /// (lines may differ). Implies --group.
    #[arg(long = "group-by", value_name = "KEY", value_enum)]
    pub(super) group_by: Option<GroupByArg>,
    /// Merge every thread's Python stack into one call tree, as LLNL's STAT draws it: one
    /// line per frame, outermost first, with how many threads pass through it, and at each
    /// leaf the threads whose stack ends there (with --async or --greenlets, a tree of the
    /// tasks' or greenlets' stacks too). Implies --group. With --why over several
    /// processes, both --group and --tree start with the straggler verdict: where the
    /// majority of the job's ranks is, and which are elsewhere.
    #[arg(long)]
    pub(super) tree: bool,
}

impl Grouping {
    pub(super) fn by(&self) -> Option<GroupBy> {
        match self.group_by {
            Some(GroupByArg::Line) => Some(GroupBy::Line),
            Some(GroupByArg::Function) => Some(GroupBy::Function),
            None => (self.group || self.tree).then_some(GroupBy::Line),
        }
    }
}

#[derive(Clone, Copy, ValueEnum)]
pub(super) enum GroupByArg {
    Line,
    Function,
}

#[derive(clap::Args)]
pub(super) struct InitFile {
    /// The debugger's init file to edit (default: ~/.gdbinit for gdb, ~/.lldbinit for lldb).
    #[arg(long, value_name = "PATH")]
    pub(super) init_file: Option<PathBuf>,
}

#[derive(Subcommand)]
pub(super) enum Cmd {
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
    /// COUNT`, frames as `function (file:line)`), speedscope's file (one `sampled` profile
    /// per thread) or pprof's (`profile.proto`, gzipped; each thread a label). Ends with one
    /// line: the samples taken, the rate achieved, the stack samples written, torn (a frame
    /// that could not be read: left out) and dropped at a cap, and a process that exited or
    /// exec'd (its samples stop there: two programs never mix).
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
        /// Native frames too, interleaved with the Python ones as `pid --native` shows them
        /// (each thread is stopped for the moment its registers and stack are copied).
        #[arg(long)]
        native: bool,
        /// asyncio: a thread whose event loop runs a task gives that task's await chain (the
        /// task's frames, its awaiter's, ..., the loop's) instead of its own stack; with
        /// --idle every pending task gives its own (`task ADDRESS "name"` in speedscope,
        /// `task_id`/`task_name` labels in pprof).
        #[arg(long = "async")]
        async_: bool,
        /// With --idle, each suspended greenlet gives its stack too (a running one is its
        /// thread).
        #[arg(long)]
        greenlets: bool,
        /// The processes under PID too, the tree read again at each tick: each process's
        /// stacks under a `process PID` root frame.
        #[arg(long)]
        children: bool,
        /// Instead of the closing line, print the run's summary as JSON, `{"record": {...}}`:
        /// the samples, the rate achieved, the stack samples written, torn, dropped and
        /// unreadable, the threads that began and ended, and each thread's samples
        /// (docs/report.md).
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        debug: DebugFiles,
    },
    /// Watch running processes and, when a thread stalls, save the verdict: each process is
    /// sampled every --interval (default 1 s; nothing is stopped), and a thread that is not
    /// idle and stays stalled for --stall seconds gets the process's `--why --json` report
    /// written to DIR/PID-UNIXTIME.json, once per stall, and one line printed.
    ///
    /// Stalled: from one sample to the next its Python stack did not change and it did not
    /// run at all (its CPU time, run-queue time and context switches in /proc stayed the same;
    /// a thread polling in a loop that sleeps is never stalled), or it spins as `pid --why
    /// --for` says (on CPU at least 60% of the time, its stack never moving). Idle threads
    /// (pool workers waiting for work, servers waiting for connections, idle event loops) never
    /// count. A stall is reported again only after the thread's stack has changed.
    ///
    /// Runs until every process watched has exited (exit status 0), or SIGINT or SIGTERM;
    /// exit status 3 when at least one stall was written, 0 when none, 1 on bad input.
    Watch {
        /// The process ids.
        #[arg(required = true, num_args = 1..)]
        pids: Vec<i32>,
        /// Also every process under each PID (re-read at each sample, so ranks a launcher
        /// starts later are watched too). With several processes each stall also writes
        /// DIR/PID-UNIXTIME-job.json: the straggler verdict over all of them (`--group --why
        /// --json`'s document).
        #[arg(long)]
        children: bool,
        /// Seconds a thread must stay stalled to be reported.
        #[arg(long, value_name = "SECONDS")]
        stall: f64,
        /// The directory the reports are written to (made if missing).
        #[arg(long = "out", value_name = "DIR")]
        out_dir: PathBuf,
        /// Seconds between two samples of a process.
        #[arg(long, value_name = "SECONDS", default_value_t = 1.0)]
        interval: f64,
        /// The reports also have every thread's native frames (`pid --native --why`: each
        /// thread is stopped for as long as its registers and stack are copied).
        #[arg(long)]
        native: bool,
        /// Also write a core, DIR/PID-UNIXTIME.PID, with gdb's `gcore` (it stops the process
        /// while it copies its memory; gdb must be installed).
        #[arg(long)]
        core: bool,
        /// Print each stall as one line of JSON, `{"stall": {...}}` (docs/report.md).
        #[arg(long)]
        json: bool,
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
    /// What grew between two saved `--heap --json` reports (one process at two times, or two
    /// cores): each type's change in count and bytes, and the containers among the retainers
    /// whose length or retained size grew (docs/report.md, "What grows").
    Diff {
        /// The earlier report.
        old: PathBuf,
        /// The later report.
        new: PathBuf,
        /// How many types and containers the text lists (default 20).
        #[arg(long, value_name = "N", default_value_t = 20)]
        top: usize,
        /// Print `heap_diff` as JSON.
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

/// `record --format`.
#[derive(Clone, Copy, ValueEnum)]
pub(super) enum ProfileFormat {
    /// `root;...;leaf COUNT` lines (Brendan Gregg's folded stacks, py-spy's `raw`).
    Collapsed,
    /// speedscope's JSON file (https://www.speedscope.app).
    Speedscope,
    /// pprof's `profile.proto`, gzipped (each thread a label).
    Pprof,
}

impl ProfileFormat {
    pub(super) fn name(self) -> &'static str {
        match self {
            ProfileFormat::Collapsed => "collapsed",
            ProfileFormat::Speedscope => "speedscope",
            ProfileFormat::Pprof => "pprof",
        }
    }
}

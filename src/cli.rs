//! The `pyunwind` command line, shared by the standalone binary (`src/bin/pyunwind.rs`) and the
//! entry point of the pip package (`_pyunwind.cli_main`), so there is one implementation.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand};

use crate::error::{Error, Result};
use crate::native_stacks::ThreadRegs;
use crate::report::text as render;
use crate::session::Session;
use crate::target::{FileSearch, Target};

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
`pyunwind: internal error in ...` and exit status 70.";

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
    /// Like --native, without hiding anything.
    #[arg(long = "native-all")]
    native_all: bool,
    /// Why it is stuck or crashed: the crash, each thread's state, the wait it is blocked in
    /// and who holds what it waits for, the locks it holds, and the deadlocks; the verdict
    /// first.
    #[arg(long)]
    why: bool,
    /// Print the JSON report (docs/report.md, docs/report.schema.json) instead of text; with
    /// --async or --tasks it has `tasks`, `loops` and `cycles`.
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
    Pid {
        /// The process id.
        pid: i32,
        #[command(flatten)]
        out: Output,
    },
    /// Read an ELF core file (from gcore, the kernel or systemd-coredump; plain or compressed).
    ///
    /// The files the core names are checked against the build-ids the core records; one that
    /// differs is refused. Use --sysroot, --lib-search-path or --exe when the core comes from
    /// elsewhere.
    Core {
        /// The core file (plain, or compressed with zstd, lz4, xz or gzip).
        core: PathBuf,
        /// The executable, when the path recorded in the core is wrong or missing.
        #[arg(long, value_name = "PATH")]
        exe: Option<PathBuf>,
        #[command(flatten)]
        files: Files,
        #[command(flatten)]
        out: Output,
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
        Ok(s) => {
            let s = crate::report::text::printable(s);
            // A closed pipe (`| head`) is not an error worth a message.
            let _ = std::io::stdout().write_all(s.as_bytes());
            let _ = std::io::stdout().flush();
            0
        }
        Err(e) => {
            eprintln!("pyunwind: {e}");
            e.exit_status()
        }
    }
}

fn run(cli: Cli, scripts: Option<&Scripts>) -> Result<String> {
    let mut live_pid = None;
    let (target, out) = match cli.cmd {
        Cmd::Pid { pid, out } => {
            live_pid = Some(pid);
            (Target::live(pid)?, out)
        }
        Cmd::Core {
            core,
            exe,
            files,
            out,
        } => {
            let files = FileSearch {
                sysroot: files.sysroot,
                search_path: files.lib_search_path,
            };
            (
                Target::core_with(
                    &path_str(&core)?,
                    exe.as_deref().map(path_str).transpose()?.as_deref(),
                    files,
                )?,
                out,
            )
        }
        Cmd::GdbScript => {
            return Ok(script_path(scripts, Debugger::Gdb)?.display().to_string() + "\n")
        }
        Cmd::LldbScript => {
            return Ok(script_path(scripts, Debugger::Lldb)?.display().to_string() + "\n")
        }
        Cmd::InstallGdb { init } => return install(scripts, Debugger::Gdb, init.init_file, true),
        Cmd::InstallLldb { init } => return install(scripts, Debugger::Lldb, init.init_file, true),
        Cmd::UninstallGdb { init } => {
            return install(scripts, Debugger::Gdb, init.init_file, false)
        }
        Cmd::UninstallLldb { init } => {
            return install(scripts, Debugger::Lldb, init.init_file, false)
        }
    };
    let mut session = Session::open(target)?;
    let asyncio = out.async_ || out.tasks;
    let native = out.native || out.native_all;
    if native && asyncio {
        return Err(Error::Usage(
            "--native does not go with --async or --tasks".into(),
        ));
    }
    let native_report = if native {
        let regs = match live_pid {
            Some(pid) => {
                let regs = ThreadRegs::of_live(pid)?;
                session.set_thread_ids(regs.thread_ids());
                regs
            }
            None => ThreadRegs::of_core(&session),
        };
        Some(session.native_report(&regs, out.native_all, out.locals)?)
    } else {
        None
    };
    let owned;
    let report = if asyncio {
        session.async_report()?
    } else if let Some(r) = &native_report {
        r
    } else {
        owned = session.report(None, out.locals)?;
        &owned
    };
    let why_owned;
    let report = if out.why {
        why_owned = crate::why::report(&session, report);
        &why_owned
    } else {
        report
    };
    if out.json {
        // Streamed and compact: a report of 100,000 tasks is about 50 MB of JSON.
        let mut w = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
        let written = serde_json::to_writer(&mut w, report)
            .map_err(std::io::Error::from)
            .and_then(|()| w.write_all(b"\n"))
            .and_then(|()| w.flush());
        // A closed pipe (`| head`) is not an error worth a message.
        if let Err(e) = written {
            if e.kind() != std::io::ErrorKind::BrokenPipe {
                return Err(Error::Usage(format!("writing the report: {e}")));
            }
        }
        return Ok(String::new());
    }
    let py = session.python_report();
    // A crash is the first thing to say; with --why, the whole verdict.
    let mut text = if out.why {
        render::verdict(report) + "\n"
    } else {
        render::report_crash_line(report).map_or_else(String::new, |l| l + "\n")
    };
    text += &format!(
        "Python {} ({} {})\n\n",
        py.version,
        py.source,
        py.pid.map_or(String::new(), |p| format!("pid {p}"))
    );
    if out.async_ {
        text.push_str(&session.render_async()?);
    }
    if out.tasks {
        if out.async_ {
            text.push('\n');
        }
        text.push_str(&session.render_tasks(true, true)?);
    }
    if !asyncio {
        text.push_str(&render::threads(report, &mut render::Sources::default()));
        render::native_stops(report, &mut text);
    }
    Ok(text)
}

fn path_str(p: &Path) -> Result<String> {
    p.to_str()
        .map(str::to_string)
        .ok_or_else(|| Error::Usage(format!("{}: path is not UTF-8", p.display())))
}

#[derive(Clone, Copy)]
enum Debugger {
    Gdb,
    Lldb,
}

impl Debugger {
    fn init_name(self) -> &'static str {
        match self {
            Debugger::Gdb => ".gdbinit",
            Debugger::Lldb => ".lldbinit",
        }
    }
    /// The init-file line that loads `script` (the same as `make install` writes).
    fn line(self, script: &Path) -> String {
        match self {
            Debugger::Gdb => format!("source {}", script.display()),
            Debugger::Lldb => format!("command script import {}", script.display()),
        }
    }
}

fn script_path(scripts: Option<&Scripts>, dbg: Debugger) -> Result<PathBuf> {
    let s = scripts.ok_or_else(|| {
        Error::Usage(
            "no debugger scripts beside this pyunwind (install it with pip, or run the one \
             built in a checkout)"
                .into(),
        )
    })?;
    let p = match dbg {
        Debugger::Gdb => &s.gdb,
        Debugger::Lldb => &s.lldb,
    };
    if !p.is_file() {
        return Err(Error::Usage(format!("{}: script missing", p.display())));
    }
    Ok(p.clone())
}

/// Adds (or removes) the line that loads the debugger script; running it twice changes
/// nothing the second time.
fn install(
    scripts: Option<&Scripts>,
    dbg: Debugger,
    init: Option<PathBuf>,
    add: bool,
) -> Result<String> {
    let script = script_path(scripts, dbg)?;
    let init = match init {
        Some(p) => p,
        None => {
            let home = std::env::var_os("HOME")
                .ok_or_else(|| Error::Usage("HOME is not set: give --init-file".into()))?;
            PathBuf::from(home).join(dbg.init_name())
        }
    };
    let line = dbg.line(&script);
    let old = match std::fs::read_to_string(&init) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(Error::io(init.display().to_string(), e)),
    };
    let present = old.lines().any(|l| l == line);
    let new = if add {
        if present {
            return Ok(format!(
                "pyunwind: {} already has `{line}`\n",
                init.display()
            ));
        }
        let sep = if old.is_empty() || old.ends_with('\n') {
            ""
        } else {
            "\n"
        };
        format!("{old}{sep}{line}\n")
    } else {
        if !present {
            return Ok(format!("pyunwind: {} has no `{line}`\n", init.display()));
        }
        old.lines()
            .filter(|l| *l != line)
            .map(|l| format!("{l}\n"))
            .collect()
    };
    std::fs::write(&init, new).map_err(|e| Error::io(init.display().to_string(), e))?;
    Ok(format!(
        "pyunwind: {} `{line}` {} {}\n",
        if add { "added" } else { "removed" },
        if add { "to" } else { "from" },
        init.display()
    ))
}

//! `pyunwind`: every thread's Python stack from a live process or a core file.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use pyunwind::session::Session;
use pyunwind::target::Target;

#[derive(Parser)]
#[command(
    name = "pyunwind",
    version,
    about = "Python stacks of a live process or a core file, without debug info"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Args)]
struct Output {
    /// Show each frame's local variables.
    #[arg(long)]
    locals: bool,
    /// asyncio: each task's async stack (its coroutines, the tasks awaiting it, the loop's
    /// frames), grouped by the thread running its loop; threads without a loop as usual.
    #[arg(long = "async")]
    async_: bool,
    /// asyncio: the task tree (like `python -m asyncio pstree`) and table (like `ps`).
    #[arg(long)]
    tasks: bool,
    /// Print the JSON report instead of text (with --async or --tasks: with `tasks`, `loops`
    /// and `cycles`).
    #[arg(long)]
    json: bool,
}

#[derive(Subcommand)]
enum Cmd {
    /// Read a running process (process_vm_readv; nothing is stopped or injected).
    Pid {
        pid: i32,
        #[command(flatten)]
        out: Output,
    },
    /// Read an ELF core file (e.g. from gcore).
    Core {
        core: String,
        /// The executable, when the path recorded in the core is wrong or missing.
        #[arg(long)]
        exe: Option<String>,
        #[command(flatten)]
        out: Output,
    },
}

fn run(cli: Cli) -> pyunwind::Result<String> {
    let (target, out) = match cli.cmd {
        Cmd::Pid { pid, out } => (Target::live(pid)?, out),
        Cmd::Core { core, exe, out } => (Target::core(&core, exe.as_deref())?, out),
    };
    let session = Session::open(target)?;
    let asyncio = out.async_ || out.tasks;
    if out.json {
        let report = if asyncio {
            session.async_report()?
        } else {
            session.report(None, out.locals)?
        };
        Ok(serde_json::to_string_pretty(&report).expect("report serializes") + "\n")
    } else {
        let py = session.python_report();
        let mut text = format!(
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
            text.push_str(&session.render_bt(None, out.locals, None)?);
        }
        Ok(text)
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(s) => {
            use std::io::Write;
            // A closed pipe (`| head`) is not an error worth a message.
            let _ = std::io::stdout().write_all(s.as_bytes());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("pyunwind: {e}");
            ExitCode::FAILURE
        }
    }
}

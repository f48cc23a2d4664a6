//! `install-gdb`/`install-lldb` and their `uninstall-` and `script` forms: the line that loads
//! our script, added to or removed from the debugger's init file, idempotently.

use std::path::{Path, PathBuf};

use super::Scripts;
use crate::error::{Error, Result};

#[derive(Clone, Copy)]
pub(super) enum Debugger {
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

pub(super) fn script_path(scripts: Option<&Scripts>, dbg: Debugger) -> Result<PathBuf> {
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
pub(super) fn install(
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

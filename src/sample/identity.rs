//! Which program a process runs: a recording stops at an `exec`, so that the stacks of two
//! programs never mix in one profile.
//!
//! `exec` keeps the pid and the start time (`/proc/PID/stat` field 22), so neither tells it.
//! What it changes: the executable (`/proc/PID/exe`, its target and the file's device and
//! inode, when the new program is another file) and the new stack's start (`startstack`,
//! `/proc/PID/stat` field 28, Linux fs/proc/array.c `do_task_stat`), placed at random by
//! ASLR at each exec. An exec of the same executable with ASLR off changes neither and is not
//! seen.

use std::os::unix::fs::MetadataExt;

/// What identifies the program process `pid` runs now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    exe: Option<(String, u64, u64)>,
    start_stack: Option<u64>,
}

impl Identity {
    /// Process `pid`'s, or None when it is gone or going: no longer there, a zombie, or
    /// exiting (its exe is unreadable then: an exit, not an exec); also when /proc shows
    /// neither its exe nor its stack's start (another user's process).
    pub fn of(pid: i32) -> Option<Identity> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The state letter, field 3: `Z` (zombie) or `X` (dead), Linux fs/proc/array.c
        // `task_state_array`.
        let state = stat[stat.rfind(')')? + 1..].split_whitespace().next()?;
        if matches!(state, "Z" | "X") {
            return None;
        }
        let exe_path = format!("/proc/{pid}/exe");
        // A process of another user may have no readable exe: the stack's start alone is
        // compared.
        let exe = std::fs::read_link(&exe_path).ok().and_then(|target| {
            let m = std::fs::metadata(&exe_path).ok()?;
            Some((target.to_string_lossy().into_owned(), m.dev(), m.ino()))
        });
        let start_stack = parse_start_stack(&stat);
        // An exiting process has let go of its memory (Linux `exit_mm`): no exe, and a
        // `startstack` of 0. That is an exit on its way, not an exec (a process that execs
        // always has both).
        if exe.is_none() && start_stack.unwrap_or(0) == 0 {
            return None;
        }
        Some(Identity { exe, start_stack })
    }
}

/// `startstack` of a `stat` line: field 28, counted after the command's last `)` (the command
/// may hold spaces and parentheses), where field 3 is the first.
fn parse_start_stack(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(28 - 3)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_stack_is_field_28() {
        let stat = "42 (a b) c) S 1 42 42 0 -1 4194560 100 0 0 0 5 6 0 0 20 0 1 0 777 1000 50 \
                    18446744073709551615 1 2 140731234 0 0 0 0 0 0 0 0 0 17 3 0 0";
        assert_eq!(parse_start_stack(stat), Some(140731234));
        assert_eq!(parse_start_stack("42 (x) S 1"), None);
    }

    #[test]
    fn our_own_identity_is_stable() {
        let me = std::process::id() as i32;
        let a = Identity::of(me).unwrap();
        assert!(a.exe.is_some() && a.start_stack.is_some(), "{a:?}");
        assert_eq!(Identity::of(me), Some(a));
    }
}

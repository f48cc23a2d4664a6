//! The crash a core records: the fatal signal, its `si_code`, the fault address or the sender,
//! and the thread that took it, from the core's notes (docs/report.md, `crash`).
//!
//! The signal is the first NT_PRSTATUS note's `pr_cursig`, and that note's thread took it:
//! the kernel writes the dumping thread first (and its `pr_cursig` into every thread's note, so
//! the others' say nothing of who crashed); gdb's gcore writes its signalled thread first. The
//! NT_SIGINFO note that follows that NT_PRSTATUS gives the code and the address or sender.
//!
//! Not a crash: a core whose first thread has no signal (gcore of a running process: SIGSTOP
//! in NT_SIGINFO, `pr_cursig` 0), or a signal whose default action does not dump core (a
//! debugger's core of a process stopped at Ctrl-C), or SIGTRAP in a core a debugger wrote (its
//! own breakpoints and steps).

use super::signals;
use super::{Siginfo, SignalNotes};
use crate::model::{Crash, ErrorReport};

/// The crash the notes record, if any, and what was wrong with the notes (one line each, for
/// the report's `errors`; a core's notes are not target memory, so they have no address). A
/// garbled note costs the fields it holds, never the report.
pub fn crash(notes: &SignalNotes) -> (Option<Crash>, Vec<ErrorReport>) {
    let mut problems = Vec::new();
    let head = match notes.first_thread {
        None => return (None, problems),
        Some(Err(len)) => {
            problems.push(ErrorReport::note(format!(
                "core notes: the first NT_PRSTATUS note is {len} bytes, too short for \
                 pr_cursig and pr_pid: whether the process crashed is unknown"
            )));
            return (None, problems);
        }
        Some(Ok(h)) => h,
    };
    let signo = u32::from(head.cursig);
    if !signals::dumps_core(signo) || (notes.by_gdb && signo == signals::SIGTRAP) {
        return (None, problems);
    }
    let siginfo: Option<&Siginfo> = match &notes.siginfo {
        Some(Ok(si)) if i64::from(si.signo) == i64::from(signo) => Some(si),
        Some(Ok(si)) => {
            problems.push(ErrorReport::note(format!(
                "core notes: NT_SIGINFO says signal {}, NT_PRSTATUS says {signo}: the signal's \
                 code and address are unknown",
                si.signo
            )));
            None
        }
        Some(Err(len)) => {
            problems.push(ErrorReport::note(format!(
                "core notes: the NT_SIGINFO note is {len} bytes, too short for siginfo_t: the \
                 signal's code and address are unknown"
            )));
            None
        }
        None => None,
    };
    let code = siginfo.map(|s| {
        signals::code_name(signo, s.code).map_or_else(|| s.code.to_string(), str::to_string)
    });
    let address = siginfo
        .filter(|s| signals::has_fault_address(signo, s.code))
        .map(|s| s.fields);
    // si_pid is the union's first int, the low half on these little-endian targets.
    let sender_pid = siginfo
        .filter(|s| signals::sent_by_process(s.code))
        .map(|s| s.fields as u32 as i32);
    let crash = Crash {
        signal: signals::name(signo),
        signo,
        code,
        address,
        thread: u64::from(head.lwp),
        sender_pid,
    };
    (Some(crash), problems)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::PrStatusHead;

    fn notes(cursig: u16, siginfo: Option<Result<Siginfo, usize>>, by_gdb: bool) -> SignalNotes {
        SignalNotes {
            first_thread: Some(Ok(PrStatusHead { lwp: 1234, cursig })),
            siginfo,
            by_gdb,
        }
    }

    fn si(signo: i32, code: i32, fields: u64) -> Option<Result<Siginfo, usize>> {
        Some(Ok(Siginfo {
            signo,
            errno: 0,
            code,
            fields,
        }))
    }

    #[test]
    fn a_fault_has_an_address_and_no_sender() {
        let (c, p) = crash(&notes(11, si(11, 1, 0x10), false));
        assert!(p.is_empty());
        assert_eq!(
            c,
            Some(Crash {
                signal: Some("SIGSEGV"),
                signo: 11,
                code: Some("SEGV_MAPERR".into()),
                address: Some(0x10),
                thread: 1234,
                sender_pid: None,
            })
        );
    }

    #[test]
    fn a_sent_signal_has_a_sender_and_no_address() {
        // os.abort(): tgkill from pid 4321 (si_uid 1000 in the high half).
        let (c, _) = crash(&notes(6, si(6, -6, (1000 << 32) | 4321), false));
        let c = c.unwrap();
        assert_eq!(
            (c.code.as_deref(), c.address, c.sender_pid),
            (Some("SI_TKILL"), None, Some(4321))
        );
        let (c, _) = crash(&notes(11, si(11, 0, 77), false));
        let c = c.unwrap();
        assert_eq!(
            (c.code.as_deref(), c.address, c.sender_pid),
            (Some("SI_USER"), None, Some(77))
        );
    }

    #[test]
    fn unknown_codes_are_numbers_and_kernel_faults_have_no_address() {
        let c = crash(&notes(11, si(11, 42, 5), false)).0.unwrap();
        assert_eq!((c.code.as_deref(), c.address), (Some("42"), Some(5)));
        let c = crash(&notes(11, si(11, 0x80, 0), false)).0.unwrap();
        assert_eq!(
            (c.code.as_deref(), c.address, c.sender_pid),
            (Some("SI_KERNEL"), None, None)
        );
        let c = crash(&notes(11, None, false)).0.unwrap();
        assert_eq!((c.code, c.address), (None, None));
    }

    #[test]
    fn snapshots_are_not_crashes() {
        // gcore of a running process: SIGSTOP from ptrace, pr_cursig 0.
        assert_eq!(crash(&notes(0, si(19, 0x80, 0), true)), (None, vec![]));
        // A debugger's core at a breakpoint, or at Ctrl-C.
        assert_eq!(crash(&notes(5, si(5, 0x80, 0), true)).0, None);
        assert_eq!(crash(&notes(2, si(2, 0x80, 0), true)).0, None);
        // ... but a debugger's core of a process stopped at a fault is one.
        assert!(crash(&notes(11, si(11, 1, 0x10), true)).0.is_some());
        // A kernel core of a SIGTRAP (int3 with no debugger) is one too.
        assert!(crash(&notes(5, si(5, 0x80, 0), false)).0.is_some());
        assert_eq!(crash(&SignalNotes::default()), (None, vec![]));
    }

    #[test]
    fn garbled_notes_cost_their_fields_and_say_so() {
        let bad_head = SignalNotes {
            first_thread: Some(Err(20)),
            siginfo: si(11, 1, 0x10),
            by_gdb: false,
        };
        let (c, p) = crash(&bad_head);
        assert_eq!(c, None);
        assert!(p[0].what.contains("20 bytes"), "{p:?}");
        let (c, p) = crash(&notes(11, Some(Err(7)), false));
        assert_eq!(c.unwrap().code, None);
        assert!(p[0].what.contains("7 bytes"), "{p:?}");
        let (c, p) = crash(&notes(11, si(-1, 1, 0x10), false));
        assert_eq!(c.unwrap().address, None);
        assert!(p[0].what.contains("signal -1"), "{p:?}");
        // Any pr_cursig: only signals that dump core are crashes.
        for cursig in [0, 1, 9, 19, 32, 64, 0xffff] {
            assert_eq!(
                crash(&notes(cursig, si(i32::MIN, i32::MIN, u64::MAX), false)).0,
                None
            );
        }
    }
}

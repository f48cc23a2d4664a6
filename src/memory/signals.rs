//! Linux signal numbers and `si_code` names, as tables.
//!
//! Numbers: Linux include/uapi/asm-generic/signal.h, which arm64 uses; x86-64's
//! arch/x86/include/uapi/asm/signal.h gives 1 to 31 the same numbers. `si_code` values: Linux
//! include/uapi/asm-generic/siginfo.h, which both use (checked against linux-libc-dev 6.1;
//! `SEGV_CPERR` is from 6.6, for x86 shadow stacks).

pub const SIGTRAP: u32 = 5;
const SIGILL: u32 = 4;
const SIGBUS: u32 = 7;
const SIGFPE: u32 = 8;
const SIGSEGV: u32 = 11;
const SIGSYS: u32 = 31;

/// Names of signals 1 to 31 (index 0 unused). 32 and up are real-time signals, which have no
/// fixed name (glibc keeps the first two for itself, so its `SIGRTMIN` is 34).
const NAMES: [&str; 32] = [
    "",
    "SIGHUP",
    "SIGINT",
    "SIGQUIT",
    "SIGILL",
    "SIGTRAP",
    "SIGABRT",
    "SIGBUS",
    "SIGFPE",
    "SIGKILL",
    "SIGUSR1",
    "SIGSEGV",
    "SIGUSR2",
    "SIGPIPE",
    "SIGALRM",
    "SIGTERM",
    "SIGSTKFLT",
    "SIGCHLD",
    "SIGCONT",
    "SIGSTOP",
    "SIGTSTP",
    "SIGTTIN",
    "SIGTTOU",
    "SIGURG",
    "SIGXCPU",
    "SIGXFSZ",
    "SIGVTALRM",
    "SIGPROF",
    "SIGWINCH",
    "SIGIO",
    "SIGPWR",
    "SIGSYS",
];

/// Signals whose default action dumps core: `SIG_KERNEL_COREDUMP_MASK` (kernel/signal.c),
/// the only ones the kernel writes a core for.
const DUMPS_CORE: [u32; 10] = [3, 4, 5, 6, 7, 8, 11, 24, 25, 31];

/// `si_code` values any signal can carry.
const SI_USER: i32 = 0;
const SI_KERNEL: i32 = 0x80;
const SI_TIMER: i32 = -2;
const SI_SIGIO: i32 = -5;
const GENERIC_CODES: [(i32, &str); 10] = [
    (SI_USER, "SI_USER"),
    (SI_KERNEL, "SI_KERNEL"),
    (-1, "SI_QUEUE"),
    (SI_TIMER, "SI_TIMER"),
    (-3, "SI_MESGQ"),
    (-4, "SI_ASYNCIO"),
    (SI_SIGIO, "SI_SIGIO"),
    (-6, "SI_TKILL"),
    (-7, "SI_DETHREAD"),
    (-60, "SI_ASYNCNL"),
];

/// Per-signal `si_code` names, 1 first; they apply between `SI_USER` and `SI_KERNEL`.
const ILL_CODES: [&str; 9] = [
    "ILL_ILLOPC",
    "ILL_ILLOPN",
    "ILL_ILLADR",
    "ILL_ILLTRP",
    "ILL_PRVOPC",
    "ILL_PRVREG",
    "ILL_COPROC",
    "ILL_BADSTK",
    "ILL_BADIADDR",
];
const FPE_CODES: [&str; 15] = [
    "FPE_INTDIV",
    "FPE_INTOVF",
    "FPE_FLTDIV",
    "FPE_FLTOVF",
    "FPE_FLTUND",
    "FPE_FLTRES",
    "FPE_FLTINV",
    "FPE_FLTSUB",
    "FPE_DECOVF",
    "FPE_DECDIV",
    "FPE_DECERR",
    "FPE_INVASC",
    "FPE_INVDEC",
    "FPE_FLTUNK",
    "FPE_CONDTRAP",
];
const SEGV_CODES: [&str; 10] = [
    "SEGV_MAPERR",
    "SEGV_ACCERR",
    "SEGV_BNDERR",
    "SEGV_PKUERR",
    "SEGV_ACCADI",
    "SEGV_ADIDERR",
    "SEGV_ADIPERR",
    "SEGV_MTEAERR",
    "SEGV_MTESERR",
    "SEGV_CPERR",
];
const BUS_CODES: [&str; 5] = [
    "BUS_ADRALN",
    "BUS_ADRERR",
    "BUS_OBJERR",
    "BUS_MCEERR_AR",
    "BUS_MCEERR_AO",
];
const TRAP_CODES: [&str; 6] = [
    "TRAP_BRKPT",
    "TRAP_TRACE",
    "TRAP_BRANCH",
    "TRAP_HWBKPT",
    "TRAP_UNK",
    "TRAP_PERF",
];
const SYS_CODES: [&str; 2] = ["SYS_SECCOMP", "SYS_USER_DISPATCH"];

/// "SIGSEGV" for 11; None for a number without a fixed name.
pub fn name(signo: u32) -> Option<&'static str> {
    NAMES.get(signo as usize).copied().filter(|n| !n.is_empty())
}

/// Whether the signal's default action dumps core.
pub fn dumps_core(signo: u32) -> bool {
    DUMPS_CORE.contains(&signo)
}

/// Whether `code` is one of the signal's own codes: the kernel sent it for a reason of that
/// signal (`siginfo_layout`, kernel/signal.c), rather than a process or the kernel generically.
fn own_code(code: i32) -> bool {
    SI_USER < code && code < SI_KERNEL
}

/// "SEGV_MAPERR" for (11, 1), "SI_TKILL" for (6, -6); None for a code the tables lack.
pub fn code_name(signo: u32, code: i32) -> Option<&'static str> {
    if !own_code(code) {
        return GENERIC_CODES
            .iter()
            .find(|(c, _)| *c == code)
            .map(|(_, n)| *n);
    }
    let table: &[&str] = match signo {
        SIGILL => &ILL_CODES,
        SIGFPE => &FPE_CODES,
        SIGSEGV => &SEGV_CODES,
        SIGBUS => &BUS_CODES,
        SIGTRAP => &TRAP_CODES,
        SIGSYS => &SYS_CODES,
        _ => &[],
    };
    table.get((code - 1) as usize).copied()
}

/// Whether the siginfo's union starts with `si_addr`, the faulting address (or instruction,
/// for SIGILL and SIGFPE): a fault signal with one of its own codes (`SIL_FAULT` and its
/// variants in `siginfo_layout`). `SI_KERNEL` faults (an x86-64 general protection fault, a
/// non-canonical address) carry no address.
pub fn has_fault_address(signo: u32, code: i32) -> bool {
    matches!(signo, SIGILL | SIGFPE | SIGSEGV | SIGBUS | SIGTRAP) && own_code(code)
}

/// Whether the siginfo's union starts with `si_pid`, the sender: a signal a process sent
/// (`SI_USER`: kill; `SI_TKILL`: tgkill, as abort() and raise() use; `SI_QUEUE`...), which is
/// `SIL_KILL` or `SIL_RT` in `siginfo_layout`. Timers and SIGIO put other fields there.
pub fn sent_by_process(code: i32) -> bool {
    code <= SI_USER && code != SI_TIMER && code != SI_SIGIO
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_codes() {
        assert_eq!(name(11), Some("SIGSEGV"));
        assert_eq!(name(31), Some("SIGSYS"));
        assert_eq!(name(0), None);
        assert_eq!(name(34), None);
        assert_eq!(code_name(11, 1), Some("SEGV_MAPERR"));
        assert_eq!(code_name(7, 2), Some("BUS_ADRERR"));
        assert_eq!(code_name(8, 1), Some("FPE_INTDIV"));
        assert_eq!(code_name(6, -6), Some("SI_TKILL"));
        assert_eq!(code_name(11, 0), Some("SI_USER"));
        assert_eq!(code_name(11, 0x80), Some("SI_KERNEL"));
        assert_eq!(code_name(11, 11), None);
        assert_eq!(code_name(6, 1), None);
        assert_eq!(code_name(11, i32::MIN), None);
        assert_eq!(code_name(11, i32::MAX), None);
        assert!(has_fault_address(11, 1));
        assert!(!has_fault_address(11, 0x80));
        assert!(!has_fault_address(11, 0));
        assert!(!has_fault_address(6, 1));
        assert!(sent_by_process(-6));
        assert!(sent_by_process(0));
        assert!(!sent_by_process(-2));
        assert!(!sent_by_process(0x80));
    }
}

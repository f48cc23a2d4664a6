use super::*;
use crate::cpython::{Layout, Version};
use crate::memory::FakeMemory;

fn snap(m: FakeMemory) -> Snapshot {
    Snapshot::for_test(m, Layout::builtin(Version::new(3, 12, 1)).unwrap())
}

fn pollfds(entries: &[(i32, u16)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (fd, ev) in entries {
        out.extend_from_slice(&fd.to_le_bytes());
        out.extend_from_slice(&ev.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
    }
    out
}

#[test]
fn one_fd_polled() {
    let mut m = FakeMemory::new();
    m.put(0x1000, &pollfds(&[(7, 1)]));
    m.put(0x2000, &pollfds(&[(7, 4), (-1, 1), (7, 4)]));
    m.put(0x3000, &pollfds(&[(7, 1), (8, 1)]));
    m.put(0x4000, &pollfds(&[(9, 5)]));
    m.put(0x5000, &pollfds(&[(-1, 1), (-5, 4)]));
    m.put(0x6000, &pollfds(&[(3, 0x40)]));
    m.put(0x7000, &pollfds(&[(0, 0)]));
    let s = snap(m);
    assert_eq!(poll_fd(&s, 0x1000, 1), Some((7, Some(Dir::In))));
    assert_eq!(poll_fd(&s, 0x2000, 3), Some((7, Some(Dir::Out))));
    assert_eq!(poll_fd(&s, 0x3000, 2), None);
    assert_eq!(poll_fd(&s, 0x4000, 1), Some((9, None)));
    assert_eq!(poll_fd(&s, 0x5000, 2), None);
    assert_eq!(poll_fd(&s, 0x6000, 1), Some((3, Some(Dir::In))));
    // Zeros (a stack page gcore could not read): no wait on fd 0.
    assert_eq!(poll_fd(&s, 0x7000, 1), None);
}

#[test]
fn corrupt_polls_are_bounded() {
    let mut m = FakeMemory::new();
    m.put(0x1000, &pollfds(&[(7, 1)]));
    let s = snap(m);
    // No entries, absurd counts, a count past the mapped array, wild pointers.
    for (at, n) in [
        (0x1000, 0),
        (0x1000, 2),
        (0x1000, MAX_POLL_FDS + 1),
        (0x1000, u64::MAX),
        (0x1000, 1 << 61),
        (0, 1),
        (u64::MAX - 3, 1),
        (u64::MAX, u64::MAX),
        (0xdead_0000, 1),
    ] {
        assert_eq!(poll_fd(&s, at, n), None, "{at:#x} {n}");
    }
}

fn call(nr: u64, args: &[u64]) -> Syscall {
    let mut a = [0u64; 6];
    a[..args.len()].copy_from_slice(args);
    Syscall { nr, args: a }
}

#[test]
fn what_calls_say() {
    let mut m = FakeMemory::new();
    m.put(0x1000, &pollfds(&[(5, 4)]));
    let s = snap(m);
    let x86 = |nr, args: &[u64]| call_says(Arch::X86_64, &s, call(nr, args));
    let arm = |nr, args: &[u64]| call_says(Arch::Aarch64, &s, call(nr, args));
    let fd = |fd, dir, socket| CallSays::Fd { fd, dir, socket };
    // x86-64: read 0, write 1, poll 7, recvfrom 45, connect 42, wait4 61, futex 202,
    // restart_syscall 219, waitid 247, accept4 288.
    assert_eq!(x86(0, &[3]), fd(3, Some(Dir::In), false));
    assert_eq!(x86(1, &[4]), fd(4, Some(Dir::Out), false));
    assert_eq!(x86(45, &[7]), fd(7, Some(Dir::In), true));
    assert_eq!(x86(42, &[7]), fd(7, Some(Dir::Connect), true));
    assert_eq!(x86(288, &[3]), fd(3, Some(Dir::Accept), true));
    // The fd is an int: the upper half of the register is not part of it; -1 is none.
    assert_eq!(
        x86(0, &[0xdead_0000_0000_0003]),
        fd(3, Some(Dir::In), false)
    );
    assert_eq!(x86(0, &[0xffff_ffff]), CallSays::Other);
    assert_eq!(x86(0, &[u64::MAX]), CallSays::Other);
    assert_eq!(x86(7, &[0x1000, 1]), fd(5, Some(Dir::Out), false));
    assert_eq!(x86(7, &[0x1000, 2]), CallSays::Polls);
    assert_eq!(x86(7, &[0xdead_0000, u64::MAX]), CallSays::Polls);
    assert_eq!(x86(219, &[]), CallSays::Polls);
    assert_eq!(x86(61, &[4300]), CallSays::Child(Some(4300)));
    assert_eq!(x86(61, &[u64::MAX]), CallSays::Child(None));
    assert_eq!(x86(61, &[0]), CallSays::Child(None));
    assert_eq!(x86(61, &[(-4300i64) as u64]), CallSays::Child(None));
    assert_eq!(x86(247, &[P_PID, 4300]), CallSays::Child(Some(4300)));
    assert_eq!(x86(247, &[0, 4300]), CallSays::Child(None));
    assert_eq!(x86(247, &[P_PID, u64::MAX]), CallSays::Child(None));
    assert_eq!(x86(202, &[0x1000]), CallSays::Other);
    assert_eq!(x86(1 << 20, &[3]), CallSays::Other);
    // arm64's generic table: read 63, ppoll 73, wait4 260.
    assert_eq!(arm(63, &[3]), fd(3, Some(Dir::In), false));
    assert_eq!(arm(73, &[0x1000, 1]), fd(5, Some(Dir::Out), false));
    assert_eq!(arm(260, &[77]), CallSays::Child(Some(77)));
}

#[test]
fn families_and_tables() {
    assert!(family_has_table(1, "unix"));
    assert!(family_has_table(2, "tcp") && family_has_table(2, "udp"));
    assert!(family_has_table(10, "tcp6") && family_has_table(10, "udp6"));
    assert!(!family_has_table(2, "tcp6") && !family_has_table(10, "tcp"));
    assert!(!family_has_table(1, "tcp") && !family_has_table(16, "unix"));
}

#[test]
fn directions_by_kind() {
    assert_eq!(Dir::In.name(WaitKind::Socket), Some(Direction::Recv));
    assert_eq!(Dir::Out.name(WaitKind::Socket), Some(Direction::Send));
    assert_eq!(Dir::Accept.name(WaitKind::Socket), Some(Direction::Accept));
    assert_eq!(Dir::In.name(WaitKind::Pipe), Some(Direction::Read));
    assert_eq!(Dir::Out.name(WaitKind::File), Some(Direction::Write));
    assert_eq!(Dir::Connect.name(WaitKind::Fd), None);
    assert_eq!(Dir::of_method("recv_into"), Some(Dir::In));
    assert_eq!(Dir::of_method("sendall"), Some(Dir::Out));
    assert_eq!(Dir::of_method("connect_ex"), Some(Dir::Connect));
    assert_eq!(Dir::of_method("_accept"), Some(Dir::Accept));
    assert_eq!(Dir::of_method("close"), None);
}

//! What the system call tables of every architecture share: from Linux 5.1 on, each new call
//! has one number on all of them (424 `pidfd_send_signal` on; include/uapi/asm-generic/unistd.h
//! and arch/x86/entry/syscalls/syscall_64.tbl of Linux 6.1 agree).

/// The name of `nr` in `table` (sorted by number), else among the shared numbers.
pub fn name(table: &[(u16, &'static str)], nr: u64) -> Option<&'static str> {
    let nr = u16::try_from(nr).ok()?;
    let find = |t: &[(u16, &'static str)]| {
        t.binary_search_by_key(&nr, |&(n, _)| n)
            .ok()
            .map(|i| t[i].1)
    };
    find(table).or_else(|| find(UNIFIED))
}

/// (number, name), sorted by number.
const UNIFIED: &[(u16, &str)] = &[
    (424, "pidfd_send_signal"),
    (425, "io_uring_setup"),
    (426, "io_uring_enter"),
    (427, "io_uring_register"),
    (428, "open_tree"),
    (429, "move_mount"),
    (430, "fsopen"),
    (431, "fsconfig"),
    (432, "fsmount"),
    (433, "fspick"),
    (434, "pidfd_open"),
    (435, "clone3"),
    (436, "close_range"),
    (437, "openat2"),
    (438, "pidfd_getfd"),
    (439, "faccessat2"),
    (440, "process_madvise"),
    (441, "epoll_pwait2"),
    (442, "mount_setattr"),
    (443, "quotactl_fd"),
    (444, "landlock_create_ruleset"),
    (445, "landlock_add_rule"),
    (446, "landlock_restrict_self"),
    (447, "memfd_secret"),
    (448, "process_mrelease"),
    (449, "futex_waitv"),
    (450, "set_mempolicy_home_node"),
];

#[cfg(test)]
mod tests {
    #[test]
    fn sorted() {
        assert!(super::UNIFIED.windows(2).all(|w| w[0].0 < w[1].0));
    }
}

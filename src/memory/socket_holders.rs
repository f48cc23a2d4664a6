//! Which processes of this machine hold a socket: the scan of every `/proc/PID/fd` that `ss -p`
//! does, so that a wait on a local peer names the process at the other end. Live and local
//! only, as the rest of [`crate::memory::proc_fds`].

use std::collections::HashMap;

/// Most processes whose fds [`socket_holders`] looks through (`pid_max` is 32768 by default).
pub const MAX_HOLDER_PROCESSES: usize = 1 << 15;
/// Most fd links [`socket_holders`] reads, all processes together. Each `readlink` of
/// `/proc/PID/fd/N` costs the kernel 3 to 20 µs (60,000 links: 0.18 to 0.26 s on an idle
/// 2-core machine, 0.8 to 1.5 s while a build ran): this bounds one stop's scan to about a
/// second.
pub const MAX_HOLDER_FDS: usize = 1 << 16;
/// Most processes kept as holders of one socket (a socket inherited across `fork`).
pub const MAX_HOLDERS_PER_SOCKET: usize = 8;
/// The processes of this machine that hold each socket, by inode: what `ss -p` shows, from
/// the `socket:[INODE]` links of every `/proc/PID/fd` ([`socket_holders`]).
#[derive(Clone, Debug, Default)]
pub struct SocketHolders {
    by_inode: HashMap<u64, Vec<u32>>,
    /// Processes whose fds were read.
    pub processes: usize,
    /// Fd links read.
    pub fds: usize,
    /// Processes whose fds could not be read (another user's, without the right to; gone).
    pub unreadable: usize,
    /// What cut the scan short ([`MAX_HOLDER_PROCESSES`], [`MAX_HOLDER_FDS`]), or why /proc
    /// could not be listed; None when every process was looked at.
    pub cut: Option<String>,
}

impl SocketHolders {
    /// The processes that hold socket `inode`, lowest pid first ([`MAX_HOLDERS_PER_SOCKET`] at
    /// most); empty when none of those scanned does.
    pub fn of(&self, inode: u64) -> &[u32] {
        self.by_inode.get(&inode).map_or(&[], Vec::as_slice)
    }

    /// Adds that process `pid` holds socket `inode`.
    pub fn add(&mut self, inode: u64, pid: u32) {
        let pids = self.by_inode.entry(inode).or_default();
        if pids.len() < MAX_HOLDERS_PER_SOCKET && !pids.contains(&pid) {
            pids.push(pid);
            pids.sort_unstable();
        }
    }
}

/// Every socket of every process of this machine, by inode, from `/proc/*/fd/*`, the way
/// `ss -p` finds a socket's process: bounded by [`MAX_HOLDER_PROCESSES`] and
/// [`MAX_HOLDER_FDS`] (`cut` says where it stopped). Socket inodes are unique on the machine,
/// whatever the network namespace, so a process that holds the inode holds that socket. What
/// it shows is as of the scan: processes run on while it reads.
pub fn socket_holders() -> SocketHolders {
    let mut h = SocketHolders::default();
    let procs = match std::fs::read_dir("/proc") {
        Ok(d) => d,
        Err(e) => {
            h.cut = Some(format!("/proc: {e}"));
            return h;
        }
    };
    for entry in procs.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if h.processes == MAX_HOLDER_PROCESSES {
            h.cut = Some(format!("at {MAX_HOLDER_PROCESSES} processes"));
            break;
        }
        if h.fds >= MAX_HOLDER_FDS {
            h.cut = Some(format!("at {MAX_HOLDER_FDS} fds"));
            break;
        }
        h.processes += 1;
        let dir = format!("/proc/{pid}/fd");
        let Ok(fds) = std::fs::read_dir(&dir) else {
            h.unreadable += 1;
            continue;
        };
        for fd in fds.flatten() {
            if h.fds >= MAX_HOLDER_FDS {
                h.cut = Some(format!("at {MAX_HOLDER_FDS} fds"));
                break;
            }
            h.fds += 1;
            let Ok(target) = std::fs::read_link(fd.path()) else {
                continue;
            };
            let bytes = target.as_os_str().as_encoded_bytes();
            if let Some(inode) = bytes
                .strip_prefix(b"socket:[")
                .and_then(|b| b.strip_suffix(b"]"))
                .and_then(|b| std::str::from_utf8(b).ok())
                .and_then(|b| b.parse::<u64>().ok())
            {
                h.add(inode, pid);
            }
        }
        if h.cut.is_some() {
            break;
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::proc_fds::{comm, fd_link, FdLink};

    #[test]
    fn socket_holders_of_this_process() {
        // A socket pair of ours: both inodes held by this process, found by the scan.
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        use std::os::fd::AsRawFd;
        let me = std::process::id();
        let inode = |fd: i32| match fd_link(me, i64::from(fd)).unwrap() {
            FdLink::Socket(i) => i,
            other => panic!("{other:?}"),
        };
        let h = socket_holders();
        assert!(h.cut.is_none(), "{:?}", h.cut);
        assert!(h.processes >= 1 && h.fds >= 2);
        assert_eq!(h.of(inode(a.as_raw_fd())), &[me]);
        assert_eq!(h.of(inode(b.as_raw_fd())), &[me]);
        assert_eq!(h.of(0), &[] as &[u32]);
        let mut h = SocketHolders::default();
        for pid in (0..20).rev() {
            h.add(7, pid);
        }
        h.add(7, 0);
        assert_eq!(h.of(7), &[12, 13, 14, 15, 16, 17, 18, 19]);
        assert!(comm(me).is_ok_and(|c| !c.is_empty() && !c.contains('\n')));
        assert!(comm(u32::MAX).is_err());
    }
}

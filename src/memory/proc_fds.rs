//! What `/proc` says of a live local process's file descriptors and children: what an fd is
//! (`/proc/PID/fd/FD`), a socket's two ends (`/proc/PID/net/{tcp,tcp6,udp,udp6,unix}`), a
//! process's parent and command line (`/proc/PID/status`, `/proc/PID/cmdline`). Only for a
//! process of this machine, read as it runs: never for a core, whose pids may name other
//! processes now.
//!
//! Every read is bounded ([`MAX_NET_TABLE_BYTES`], [`MAX_NET_TABLE_LINES`],
//! [`MAX_CMDLINE_BYTES`], ...) and every parser takes any text without panicking: a line it
//! cannot read is skipped. A failure is a one-line `String` that the caller puts in the
//! report's `errors` (a vanished fd or process, a /proc that cannot be read).
//!
//! | file | format (Linux) |
//! | --- | --- |
//! | `/proc/PID/fd/FD` | a link: `socket:[INODE]`, `pipe:[INODE]`, `anon_inode:[eventfd]` (or `anon_inode:inotify`), a path (fs/proc/fd.c, `d_path`) |
//! | `/proc/PID/net/tcp`, `udp` | `sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...`; addresses `%08X:%04X`, the IPv4 address as the host-order `u32` of its network-order bytes (little-endian here), the port a plain number (net/ipv4/tcp_ipv4.c `get_tcp4_sock`, udp.c `udp4_format_sock`) |
//! | `/proc/PID/net/tcp6`, `udp6` | the same with `%08X%08X%08X%08X:%04X`: the four `s6_addr32` words, each host-order (net/ipv6/tcp_ipv6.c `get_tcp6_sock`) |
//! | `/proc/PID/net/unix` | `Num RefCount Protocol Flags Type St Inode [Path]`; an abstract name starts with `@` (its NULs printed as `@`), an unnamed socket has no path (net/unix/af_unix.c `unix_seq_show`) |
//! | `/proc/PID/cmdline` | the arguments, each NUL-terminated |
//!
//! A socket's addresses are asked of the kernel first, about a copy of its fd
//! ([`socket_names`]: `pidfd_getfd`, `getsockname`, `getpeername`); the tables are where that
//! cannot be done (a kernel before 5.6). The net tables are those of the process's network
//! namespace (a container's own). A unix
//! socket's peer is not in them: the kernel's socket diagnosis (`NETLINK_SOCK_DIAG`,
//! net/unix/diag.c) names it, for our own namespace only ([`crate::memory::unix_diag::unix_peer`]).
//!
//! ```no_run
//! use pyunwind::memory::proc_fds::{fd_link, FdLink, NetTables};
//! let tables = NetTables::read(1234);
//! if let Ok(FdLink::Socket(inode)) = fd_link(1234, 7) {
//!     let ends = tables.get(inode);
//!     println!("{:?}", ends.map(|e| (&e.local, &e.peer)));
//! }
//! ```

use std::collections::HashMap;
use std::io::Read;
use std::net::{Ipv4Addr, Ipv6Addr};

/// Most bytes read of one net table (a host with 100,000 connections has about 15 MB of
/// `tcp`); the rest is not read, and sockets past it are not found.
pub const MAX_NET_TABLE_BYTES: u64 = 32 << 20;
/// Most lines of one net table parsed.
pub const MAX_NET_TABLE_LINES: usize = 1 << 18;
/// Most bytes of a command line kept (`ps` shows 4096 by default, too).
pub const MAX_CMDLINE_BYTES: u64 = 4096;
/// Most bytes of an fd's link target kept (PATH_MAX).
pub const MAX_LINK_BYTES: usize = 4096;
/// Most bytes of a `/proc/PID/status` read.
const MAX_STATUS_BYTES: u64 = 64 << 10;
/// Most bytes of one `children` file read, and most children looked at.
const MAX_CHILDREN_BYTES: u64 = 64 << 10;
const MAX_CHILDREN: usize = 4096;
/// Most threads of a process whose children are looked through.
const MAX_TASKS: usize = 1 << 14;

/// What an fd is, from its `/proc/PID/fd/FD` link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FdLink {
    /// `socket:[INODE]`.
    Socket(u64),
    /// `pipe:[INODE]` (a FIFO opened by path is a `Path`).
    Pipe(u64),
    /// `anon_inode:...` (an eventfd, an epoll fd, ...): what follows the colon.
    AnonInode(String),
    /// An absolute path: a file, a device, a FIFO; ` (deleted)` kept as the kernel writes it.
    Path(String),
    /// Anything else (`net:[...]`, `mnt:[...]` of namespace files, a future kind).
    Other(String),
}

impl FdLink {
    /// The link a `readlink` gave.
    pub fn parse(text: &str) -> FdLink {
        let inode =
            |rest: &str| -> Option<u64> { rest.strip_prefix('[')?.strip_suffix(']')?.parse().ok() };
        if let Some(i) = text.strip_prefix("socket:").and_then(inode) {
            return FdLink::Socket(i);
        }
        if let Some(i) = text.strip_prefix("pipe:").and_then(inode) {
            return FdLink::Pipe(i);
        }
        if let Some(rest) = text.strip_prefix("anon_inode:") {
            return FdLink::AnonInode(rest.to_string());
        }
        if text.starts_with('/') {
            return FdLink::Path(text.to_string());
        }
        FdLink::Other(text.to_string())
    }
}

/// What `/proc/PID/fd/FD` links to; an error (one line) when it cannot be read: no such fd
/// (closed since), no such process, no access.
pub fn fd_link(pid: u32, fd: i64) -> Result<FdLink, String> {
    if !(0..=i64::from(i32::MAX)).contains(&fd) {
        return Err(format!("fd {fd} is no file descriptor"));
    }
    let path = format!("/proc/{pid}/fd/{fd}");
    match std::fs::read_link(&path) {
        Ok(target) => {
            let bytes = target.as_os_str().as_encoded_bytes();
            let bytes = &bytes[..bytes.len().min(MAX_LINK_BYTES)];
            Ok(FdLink::parse(&String::from_utf8_lossy(bytes)))
        }
        Err(e) => Err(format!("{path}: {e}")),
    }
}

/// A socket's two ends, as its net table shows them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SocketEnds {
    /// `"127.0.0.1:5432"`, `"[::1]:80"`, a unix socket's path (`"@name"` abstract); None
    /// for an unbound or unnamed socket.
    pub local: Option<String>,
    /// The same for the other end; None when it has none (listening, unconnected UDP) or the
    /// table does not show it (unix sockets: `/proc/net/unix` names each socket's own path).
    pub peer: Option<String>,
    /// The `st` column: TCP's state (`0x0A` LISTEN, `0x01` ESTABLISHED, `0x02` SYN_SENT),
    /// unix's `SS_*` (`0x01` unconnected, `0x03` connected).
    pub state: Option<u8>,
    /// The table it was found in: `tcp`, `tcp6`, `udp`, `udp6`, `unix`.
    pub table: &'static str,
}

impl SocketEnds {
    /// A TCP socket that listens (TCP_LISTEN), or a unix one that does (`__SO_ACCEPTCON`
    /// among its flags is not kept: an unconnected stream socket with a path, read as such).
    pub fn listening(&self) -> bool {
        matches!(self.table, "tcp" | "tcp6") && self.state == Some(0x0A)
    }
}

/// The net tables of one process, by socket inode; read once per stop.
#[derive(Clone, Debug, Default)]
pub struct NetTables {
    by_inode: HashMap<u64, SocketEnds>,
    /// TCP sockets with both ends, by (local, peer), IPv4-mapped addresses as IPv4
    /// ([`inet_canonical`]): the other end of a connection on this host is the socket whose
    /// ends are the swapped pair.
    /// The value: (inode, `st`); inode 0 for a connection no process holds (one the kernel
    /// completed that waits in its listener's backlog, or one being torn down).
    by_ends: HashMap<(std::net::SocketAddr, std::net::SocketAddr), (u64, Option<u8>)>,
    /// The tables that could not be read, each with why (IPv6 off, no /proc, no access).
    pub unreadable: Vec<String>,
    /// The tables that were cut at [`MAX_NET_TABLE_BYTES`] or [`MAX_NET_TABLE_LINES`].
    pub cut: Vec<&'static str>,
}

/// The tables, in the order they are looked through.
pub const TABLES: [&str; 5] = ["tcp", "tcp6", "udp", "udp6", "unix"];

impl NetTables {
    /// `/proc/PID/net/{tcp,tcp6,udp,udp6,unix}`.
    pub fn read(pid: u32) -> NetTables {
        let mut t = NetTables::default();
        for name in TABLES {
            t.read_table(pid, name);
        }
        t
    }

    /// `/proc/PID/net/NAME` alone (one of [`TABLES`]).
    pub fn read_one(pid: u32, name: &'static str) -> NetTables {
        let mut t = NetTables::default();
        t.read_table(pid, name);
        t
    }

    fn read_table(&mut self, pid: u32, name: &'static str) {
        let path = format!("/proc/{pid}/net/{name}");
        match read_bounded(&path, MAX_NET_TABLE_BYTES) {
            Ok((text, full)) => {
                if full || self.add(name, &text) {
                    self.cut.push(name);
                }
            }
            Err(e) => self.unreadable.push(format!("{name}: {e}")),
        }
    }

    /// Adds the lines of table `name` (one of `tcp`, `tcp6`, `udp`, `udp6`, `unix`); true when
    /// it was cut at [`MAX_NET_TABLE_LINES`]. A line that does not parse is skipped; the first
    /// entry of an inode wins (a listening unix socket and the sockets it accepted share no
    /// inode, but two tables never list one socket).
    pub fn add(&mut self, name: &str, text: &str) -> bool {
        let Some(table) = TABLES.iter().copied().find(|t| *t == name) else {
            return false;
        };
        let mut lines = text.lines();
        // The header.
        lines.next();
        for (n, line) in lines.enumerate() {
            if n == MAX_NET_TABLE_LINES {
                return true;
            }
            let parsed = if table == "unix" {
                parse_unix_line(line)
            } else {
                parse_inet_line(line, table.ends_with('6'))
            };
            if let Some((inode, mut ends)) = parsed {
                ends.table = table;
                if table.starts_with("tcp") {
                    let canonical = |a: &Option<String>| a.as_deref().and_then(inet_canonical);
                    if let (Some(l), Some(p)) = (canonical(&ends.local), canonical(&ends.peer)) {
                        // A socket with an inode wins over a torn-down one of the same ends.
                        let e = self.by_ends.entry((l, p)).or_insert((inode, ends.state));
                        if e.0 == 0 {
                            *e = (inode, ends.state);
                        }
                    }
                }
                // Inode 0: no fd names it (not accepted yet, or being torn down).
                if inode != 0 {
                    self.by_inode.entry(inode).or_insert(ends);
                }
            }
        }
        false
    }

    /// The socket with this inode, when a table lists it.
    pub fn get(&self, inode: u64) -> Option<&SocketEnds> {
        self.by_inode.get(&inode)
    }

    /// The TCP socket whose own address is `local` and whose peer is `peer` (inet addresses
    /// as the tables write them; IPv4-mapped ones match their IPv4 form).
    /// Its inode (0 where no process holds it) and TCP state (`0x01` ESTABLISHED).
    pub fn tcp_with_ends(&self, local: &str, peer: &str) -> Option<(u64, Option<u8>)> {
        let key = (inet_canonical(local)?, inet_canonical(peer)?);
        self.by_ends.get(&key).copied()
    }

    /// The inodes of the listening TCP sockets that take connections to `addr` (an inet
    /// address as the tables write it): bound to its port, on its address or on the
    /// unspecified one (`0.0.0.0`, `[::]`, which a dual-stack socket takes IPv4 on too).
    pub fn tcp_listeners_of(&self, addr: &str) -> Vec<u64> {
        let Some(to) = inet_canonical(addr) else {
            return Vec::new();
        };
        let mut found: Vec<u64> = self
            .by_inode
            .iter()
            .filter(|(_, e)| e.listening())
            .filter(|(_, e)| {
                e.local
                    .as_deref()
                    .and_then(inet_canonical)
                    .is_some_and(|l| {
                        l.port() == to.port() && (l.ip() == to.ip() || l.ip().is_unspecified())
                    })
            })
            .map(|(&i, _)| i)
            .collect();
        found.sort_unstable();
        found
    }

    pub fn len(&self) -> usize {
        self.by_inode.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_inode.is_empty()
    }
}

/// A live socket's own and peer addresses ([`socket_names`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SocketNames {
    pub local: Option<String>,
    pub peer: Option<String>,
    /// `sa_family` of its own address: `AF_UNIX` 1, `AF_INET` 2, `AF_INET6` 10.
    pub family: i32,
}

/// The addresses of socket `inode`, fd `fd` of live process `pid`, asked of the kernel about
/// a copy of the fd (`pidfd_getfd`, Linux 5.6+: the access that reading the process's memory
/// needs; the process is neither stopped nor changed) with `getsockname` and `getpeername`:
/// exact, where the net tables cost a walk of the kernel's connection hash. The copy must be
/// that socket (its inode), else the fd was closed and reused. A peer it has not (not
/// connected, a listening socket) is None, as an unnamed unix socket's address is.
pub fn socket_names(pid: u32, fd: i64, inode: u64) -> Result<SocketNames, String> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let err = |what: &str| format!("fd {fd}: {what}: {}", std::io::Error::last_os_error());
    let target_fd = i32::try_from(fd).map_err(|_| format!("fd {fd}: not a descriptor"))?;
    let pid = libc::pid_t::try_from(pid).map_err(|_| format!("pid {pid}: not a pid"))?;
    // SAFETY: plain system calls on integers; each fd they return is owned right away.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if pidfd < 0 {
        return Err(err("pidfd_open"));
    }
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as i32) };
    let copy = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), target_fd, 0) };
    if copy < 0 {
        return Err(err("pidfd_getfd"));
    }
    let copy = unsafe { OwnedFd::from_raw_fd(copy as i32) };
    // SAFETY: `st` is written by fstat before it is read.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(copy.as_raw_fd(), &mut st) } != 0 {
        return Err(err("fstat"));
    }
    if st.st_ino != inode {
        return Err(format!(
            "fd {fd} is socket {} now, not socket {inode}: it was closed and reused",
            st.st_ino
        ));
    }
    let name = |peer: bool| -> Result<Option<(i32, Option<String>)>, String> {
        // SAFETY: the kernel writes at most `len` bytes of `addr`.
        let mut addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        let p = &mut addr as *mut libc::sockaddr_storage as *mut libc::sockaddr;
        let rc = unsafe {
            if peer {
                libc::getpeername(copy.as_raw_fd(), p, &mut len)
            } else {
                libc::getsockname(copy.as_raw_fd(), p, &mut len)
            }
        };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::ENOTCONN) if peer => Ok(None),
                _ => Err(format!(
                    "fd {fd}: get{}name: {e}",
                    if peer { "peer" } else { "sock" }
                )),
            };
        }
        let len = (len as usize).min(std::mem::size_of::<libc::sockaddr_storage>());
        // SAFETY: sockaddr_storage is plain bytes, `len` of them written.
        let bytes = unsafe { std::slice::from_raw_parts(&addr as *const _ as *const u8, len) };
        Ok(Some((i32::from(addr.ss_family), sockaddr_text(bytes))))
    };
    let (family, local) = name(false)?.unwrap_or((0, None));
    let peer = name(true)?.and_then(|p| p.1);
    Ok(SocketNames {
        local,
        peer,
        family,
    })
}

/// A `struct sockaddr`'s bytes as the net tables' text gives it: `127.0.0.1:5432`,
/// `[::1]:80`, a unix path, `@name` for an abstract one (its NULs as `@`, as
/// `/proc/net/unix` prints them); None for an unnamed unix socket, the unspecified address
/// with port 0, or a family other than those.
pub fn sockaddr_text(bytes: &[u8]) -> Option<String> {
    let family = u16::from_ne_bytes(bytes.get(..2)?.try_into().ok()?);
    let port = |b: &[u8]| Some(u16::from_be_bytes(b.get(2..4)?.try_into().ok()?));
    match i32::from(family) {
        libc::AF_INET => {
            let ip = Ipv4Addr::from(<[u8; 4]>::try_from(bytes.get(4..8)?).ok()?);
            let port = port(bytes)?;
            (!(ip.is_unspecified() && port == 0)).then(|| format!("{ip}:{port}"))
        }
        libc::AF_INET6 => {
            let ip = Ipv6Addr::from(<[u8; 16]>::try_from(bytes.get(8..24)?).ok()?);
            let port = port(bytes)?;
            (!(ip.is_unspecified() && port == 0)).then(|| format!("[{ip}]:{port}"))
        }
        libc::AF_UNIX => {
            let path = bytes.get(2..)?;
            match path.first() {
                None => None,
                Some(0) => Some(format!(
                    "@{}",
                    String::from_utf8_lossy(&path[1..]).replace('\0', "@")
                )),
                Some(_) => {
                    let end = path.iter().position(|&b| b == 0).unwrap_or(path.len());
                    Some(String::from_utf8_lossy(&path[..end]).into_owned())
                }
            }
        }
        _ => None,
    }
}

/// A file's first `max` bytes as text (lossy), and whether it had more.
fn read_bounded(path: &str, max: u64) -> Result<(String, bool), String> {
    let bytes = read_bounded_bytes(path, max)?;
    let full = bytes.len() as u64 > max;
    let bytes = &bytes[..bytes.len().min(max as usize)];
    Ok((String::from_utf8_lossy(bytes).into_owned(), full))
}

/// At most `max + 1` bytes of a file (the extra byte says it had more).
fn read_bounded_bytes(path: &str, max: u64) -> Result<Vec<u8>, String> {
    let f = std::fs::File::open(path).map_err(|e| format!("{path}: {e}"))?;
    let mut out = Vec::new();
    f.take(max.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|e| format!("{path}: {e}"))?;
    Ok(out)
}

/// One line of `tcp`, `tcp6`, `udp` or `udp6`: (inode, ends).
pub fn parse_inet_line(line: &str, v6: bool) -> Option<(u64, SocketEnds)> {
    let mut words = line.split_whitespace();
    let slot = words.next()?;
    if !slot.ends_with(':') {
        return None;
    }
    let local = parse_inet_address(words.next()?, v6)?;
    let remote = parse_inet_address(words.next()?, v6)?;
    let state = u8::from_str_radix(words.next()?, 16).ok()?;
    // tx:rx, tr:when, retrnsmt, uid, timeout, then the inode.
    let inode = words.nth(5)?.parse().ok()?;
    Some((
        inode,
        SocketEnds {
            local,
            peer: remote,
            state: Some(state),
            table: "",
        },
    ))
}

/// `0100007F:1F90` (v4) or `00000000000000000000000001000000:0050` (v6) as
/// `"127.0.0.1:8080"`, `"[::1]:80"`; Some(None) for the all-zero address and port (no end);
/// None when it does not parse.
pub fn parse_inet_address(text: &str, v6: bool) -> Option<Option<String>> {
    let (addr, port) = text.split_once(':')?;
    if port.len() != 4 {
        return None;
    }
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |s: &str| -> Option<[u8; 4]> {
        if s.len() != 8 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        // Each word is the host-order value of four network-order bytes (little-endian
        // hosts: every target pyunwind reads live).
        Some(u32::from_str_radix(s, 16).ok()?.to_le_bytes())
    };
    let (text, zero) = if v6 {
        if addr.len() != 32 || !addr.is_ascii() {
            return None;
        }
        let mut bytes = [0u8; 16];
        for i in 0..4 {
            bytes[4 * i..4 * i + 4].copy_from_slice(&word(&addr[8 * i..8 * i + 8])?);
        }
        let ip = Ipv6Addr::from(bytes);
        (format!("[{ip}]:{port}"), ip.is_unspecified())
    } else {
        let ip = Ipv4Addr::from(word(addr)?);
        (format!("{ip}:{port}"), ip.is_unspecified())
    };
    Some((!(zero && port == 0)).then_some(text))
}

/// One line of `unix`: (inode, ends): `local` its path, `peer` None (the table does not say).
pub fn parse_unix_line(line: &str) -> Option<(u64, SocketEnds)> {
    // Num: RefCount Protocol Flags Type St Inode [Path]; the path may hold spaces.
    let mut rest = line.trim_start();
    let mut fields = [""; 7];
    for f in &mut fields {
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        *f = &rest[..end];
        rest = rest[end..].trim_start();
    }
    if !fields[0].ends_with(':') {
        return None;
    }
    for f in &fields[1..6] {
        if f.is_empty() || !f.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
    }
    let state = u8::from_str_radix(fields[5], 16).ok();
    let inode = fields[6].parse().ok()?;
    let path = rest.trim_end_matches(['\r', '\n']);
    Some((
        inode,
        SocketEnds {
            local: (!path.is_empty()).then(|| path.to_string()),
            peer: None,
            state,
            table: "",
        },
    ))
}

/// A process's command line: its arguments space-joined, cut at [`MAX_CMDLINE_BYTES`]; an
/// error when it cannot be read or is empty (a zombie, a kernel thread).
pub fn cmdline(pid: u32) -> Result<String, String> {
    let path = format!("/proc/{pid}/cmdline");
    let bytes = read_bounded_bytes(&path, MAX_CMDLINE_BYTES)?;
    parse_cmdline(&bytes).ok_or_else(|| format!("{path}: empty (the process has exited)"))
}

/// NUL-separated arguments, space-joined, at most [`MAX_CMDLINE_BYTES`] bytes of them; None
/// when there are none.
pub fn parse_cmdline(bytes: &[u8]) -> Option<String> {
    let bytes = &bytes[..bytes.len().min(MAX_CMDLINE_BYTES as usize)];
    let bytes = bytes.strip_suffix(&[0]).unwrap_or(bytes);
    if bytes.is_empty() {
        return None;
    }
    let words: Vec<String> = bytes
        .split(|&b| b == 0)
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect();
    Some(words.join(" "))
}

/// A field of `/proc/PID/status` (`PPid:`, `NSpid:`): its words.
fn status_field(status: &str, name: &str) -> Option<Vec<u64>> {
    let v = status.lines().find_map(|l| l.strip_prefix(name))?;
    v.split_whitespace().map(|w| w.parse().ok()).collect()
}

/// The process that `child` (a pid in the pid namespace of process `parent`, as a `wait4`
/// argument names it) is, as this machine's /proc numbers it: a child of `parent` whose
/// innermost pid (`NSpid`'s last) is `child`. The same pid when both share our namespace;
/// otherwise found among `/proc/PARENT/task/*/children`. An error when no child of `parent`
/// has that pid (it was reaped, or it is no child: never another process of that number).
pub fn child_process(parent: u32, child: i64) -> Result<u32, String> {
    let child_u = u32::try_from(child).map_err(|_| format!("pid {child} is no process"))?;
    let is_child = |candidate: u32| -> bool {
        let Ok((status, _)) = read_bounded(&format!("/proc/{candidate}/status"), MAX_STATUS_BYTES)
        else {
            return false;
        };
        let ppid = status_field(&status, "PPid:");
        let inner = status_field(&status, "NSpid:")
            .and_then(|v| v.last().copied())
            .unwrap_or(u64::from(candidate));
        ppid.as_deref() == Some(&[u64::from(parent)]) && inner == u64::from(child_u)
    };
    if is_child(child_u) {
        return Ok(child_u);
    }
    let tasks = std::fs::read_dir(format!("/proc/{parent}/task"))
        .map_err(|e| format!("/proc/{parent}/task: {e}"))?;
    for task in tasks.take(MAX_TASKS).flatten() {
        let path = task.path().join("children");
        let Some(path) = path.to_str() else { continue };
        let Ok((text, _)) = read_bounded(path, MAX_CHILDREN_BYTES) else {
            continue;
        };
        for c in text
            .split_whitespace()
            .take(MAX_CHILDREN)
            .filter_map(|w| w.parse::<u32>().ok())
        {
            if c != child_u && is_child(c) {
                return Ok(c);
            }
        }
    }
    Err(format!(
        "process {parent} has no child {child} (it exited and was reaped)"
    ))
}

/// Most bytes of `/proc/PID/comm` read (the kernel's `TASK_COMM_LEN` is 16).
const MAX_COMM_BYTES: u64 = 64;

/// A process's command name, `/proc/PID/comm` (what `ss -p` and `top` show: the executable's
/// name, at most 15 bytes, or what the process set with `prctl(PR_SET_NAME)`); an error when
/// it cannot be read (the process is gone).
pub fn comm(pid: u32) -> Result<String, String> {
    let path = format!("/proc/{pid}/comm");
    let (text, _) = read_bounded(&path, MAX_COMM_BYTES)?;
    let name = text.strip_suffix('\n').unwrap_or(&text);
    if name.is_empty() {
        return Err(format!("{path}: empty"));
    }
    Ok(name.to_string())
}

/// An inet address as the net tables and [`sockaddr_text`] write it (`"127.0.0.1:5432"`,
/// `"[::1]:80"`), with an IPv4-mapped IPv6 address as its IPv4 one: a client of 127.0.0.1 is
/// listed in `tcp` and the server's end, accepted on a dual-stack `[::]`, in `tcp6` as
/// `[::ffff:127.0.0.1]`. None for anything else (a unix path).
pub fn inet_canonical(addr: &str) -> Option<std::net::SocketAddr> {
    let a: std::net::SocketAddr = addr.parse().ok()?;
    Some(std::net::SocketAddr::new(a.ip().to_canonical(), a.port()))
}

/// Whether an inet address (as [`inet_canonical`] takes it) is on the loopback
/// (127.0.0.0/8, `::1`, `::ffff:127.0.0.0/104`).
pub fn is_loopback(addr: &str) -> bool {
    inet_canonical(addr).is_some_and(|a| a.ip().is_loopback())
}

#[cfg(test)]
mod tests;

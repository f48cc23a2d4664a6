//! Who is at the other end of a unix socket: the kernel's socket diagnosis
//! (`NETLINK_SOCK_DIAG`, net/unix/diag.c) names the peer's inode, which `/proc/PID/net/unix`
//! does not ([`unix_peer`]), and the listening sockets with the connections waiting in their
//! queues, not accepted yet ([`unix_listeners`]). It answers for the caller's network
//! namespace only ([`same_net_namespace`]). Every reply is bounded ([`MAX_DIAG_REPLY_BYTES`],
//! [`MAX_DIAG_REPLIES`]; a dump by [`MAX_LISTENERS`], [`MAX_ICONS`]) and parsed from any bytes
//! without panicking. The request and reply layouts: include/uapi/linux/unix_diag.h; what the
//! kernel puts in them: net/unix/diag.c.

use std::collections::HashMap;

/// Whether process `pid` is in this process's network namespace (`/proc/PID/ns/net` names
/// the same one as ours): only then does the kernel's socket diagnosis, which answers for the
/// caller's namespace, speak of its sockets.
pub fn same_net_namespace(pid: u32) -> bool {
    let ns = |p: &str| std::fs::read_link(format!("/proc/{p}/ns/net")).ok();
    let theirs = ns(&pid.to_string());
    theirs.is_some() && theirs == ns("self")
}

/// `NETLINK_SOCK_DIAG` (<linux/netlink.h>), `SOCK_DIAG_BY_FAMILY` (<linux/sock_diag.h>).
const NETLINK_SOCK_DIAG: i32 = 4;
const SOCK_DIAG_BY_FAMILY: u16 = 20;
/// <linux/netlink.h>: `NLM_F_REQUEST`, `NLM_F_DUMP` (`NLM_F_ROOT | NLM_F_MATCH`),
/// `NLMSG_ERROR`, `NLMSG_DONE`; `sizeof(struct nlmsghdr)`.
const NLM_F_REQUEST: u16 = 1;
const NLM_F_DUMP: u16 = 0x300;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLMSG_HDR: usize = 16;
/// include/uapi/linux/unix_diag.h: `UDIAG_SHOW_PEER`, `UDIAG_SHOW_ICONS`, the attributes
/// `UNIX_DIAG_PEER`, `UNIX_DIAG_ICONS` and `UNIX_DIAG_SHUTDOWN`, `sizeof(struct
/// unix_diag_msg)`.
const UDIAG_SHOW_PEER: u32 = 0x4;
const UDIAG_SHOW_ICONS: u32 = 0x8;
const UNIX_DIAG_PEER: u16 = 2;
const UNIX_DIAG_ICONS: u16 = 3;
const UNIX_DIAG_SHUTDOWN: u16 = 6;
const UNIX_DIAG_MSG: usize = 16;
/// `TCP_LISTEN` (include/net/tcp_states.h), the `sk_state` of a listening unix socket.
const TCP_LISTEN: u32 = 10;
/// `SHUTDOWN_MASK` (include/net/sock.h: `RCV_SHUTDOWN | SEND_SHUTDOWN`).
pub const SHUTDOWN_MASK: u8 = 3;
/// The reply to one socket's query: its message and a few attributes.
const MAX_DIAG_REPLY_BYTES: usize = 8192;
/// Most replies read before the one for the asked socket (a netlink socket of our own gets
/// only those).
const MAX_DIAG_REPLIES: usize = 16;
/// One datagram of a dump: the kernel fills each up to 32 KiB at most (net/netlink/af_netlink.c
/// `netlink_dump`: `max_recvmsg_len`, capped at `SKB_WITH_OVERHEAD(32768)`).
const MAX_DUMP_DATAGRAM_BYTES: usize = 1 << 16;
/// Most listening unix sockets [`unix_listeners`] reads (a busy host has hundreds).
pub const MAX_LISTENERS: usize = 1 << 14;
/// Most pending connections [`unix_listeners`] reads, all listeners together (a listener's
/// queue is at most `net.core.somaxconn`, 4096 by default).
pub const MAX_ICONS: usize = 1 << 16;
/// Most datagrams of one dump: [`MAX_LISTENERS`] messages and [`MAX_ICONS`] icons fill about
/// 40, each of up to 32 KiB; a kernel that sends more is cut there.
const MAX_DUMP_DATAGRAMS: usize = 256;

/// What the kernel's `unix_diag` says of a unix socket's other end ([`unix_peer`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UnixPeer {
    /// The inode of the socket at the other end; None when there is no other end (a listening
    /// or unconnected socket). 0 when the other end has no inode (net/unix/diag.c
    /// `sk_diag_dump_peer` gives `sock_i_ino(peer)`, 0 for a socket no file holds): a
    /// connection its listener has not accepted yet, whose other end is the kernel's embryo
    /// socket in the listener's queue ([`unix_listeners`]), or one whose other end was closed.
    pub inode: Option<u64>,
    /// The socket's own `sk_shutdown` (`UNIX_DIAG_SHUTDOWN`, every reply of the kernels that
    /// have it): [`SHUTDOWN_MASK`] once its other end is closed (net/unix/af_unix.c
    /// `unix_release_sock` sets it on the peer of a closed stream socket).
    pub shutdown: Option<u8>,
}

/// A netlink socket of the kernel's socket diagnosis, with a receive timeout.
fn diag_socket() -> Result<std::os::fd::OwnedFd, String> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    // SAFETY: socket takes no pointers; a descriptor it returns is ours to own.
    let raw = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            NETLINK_SOCK_DIAG,
        )
    };
    if raw < 0 {
        return Err(format!("sock_diag: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: `raw` is a descriptor just opened, owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let timeout = libc::timeval {
        tv_sec: 1,
        tv_usec: 0,
    };
    // SAFETY: the option value is a timeval of the size given.
    unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&timeout as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        );
    }
    Ok(fd)
}

/// Sends `request` on diag socket `fd`.
fn send_request(fd: &std::os::fd::OwnedFd, request: &[u8]) -> Result<(), String> {
    use std::os::fd::AsRawFd;
    // SAFETY: the buffer is `request`, of the length given.
    let sent = unsafe { libc::send(fd.as_raw_fd(), request.as_ptr().cast(), request.len(), 0) };
    if sent != request.len() as isize {
        return Err(format!("sock_diag: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

/// One datagram from diag socket `fd` into `buf`: its length.
fn receive(fd: &std::os::fd::OwnedFd, buf: &mut [u8]) -> Result<usize, String> {
    use std::os::fd::AsRawFd;
    // SAFETY: `buf` is writable for its whole length.
    let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n <= 0 {
        return Err(format!("sock_diag: {}", std::io::Error::last_os_error()));
    }
    Ok(n as usize)
}

/// The other end of unix socket `inode`, as the kernel's `unix_diag` (Linux 3.3+,
/// net/unix/diag.c: an exact query by inode, no cookie) says it for this process's network
/// namespace. An error when the kernel cannot be asked or does not know the socket.
pub fn unix_peer(inode: u64) -> Result<UnixPeer, String> {
    let ino = u32::try_from(inode).map_err(|_| format!("socket {inode}: no unix inode"))?;
    let fd = diag_socket()?;
    send_request(&fd, &unix_diag_request(ino))?;
    let mut buf = vec![0u8; MAX_DIAG_REPLY_BYTES];
    for _ in 0..MAX_DIAG_REPLIES {
        let n = receive(&fd, &mut buf)?;
        if let Some(answer) = parse_unix_diag_reply(&buf[..n], ino) {
            return answer;
        }
    }
    Err(format!("sock_diag: no answer for socket {inode}"))
}

/// `struct nlmsghdr` + `struct unix_diag_req` asking for socket `ino`'s peer.
fn unix_diag_request(ino: u32) -> Vec<u8> {
    diag_request(NLM_F_REQUEST, u32::MAX, ino, UDIAG_SHOW_PEER)
}

/// `struct nlmsghdr` (flags `flags`) + `struct unix_diag_req` (include/uapi/linux/unix_diag.h)
/// for the sockets whose state's bit is in `states`, socket `ino` (0: any), showing `show`.
fn diag_request(flags: u16, states: u32, ino: u32, show: u32) -> Vec<u8> {
    let mut m = Vec::with_capacity(NLMSG_HDR + 24);
    m.extend_from_slice(&((NLMSG_HDR + 24) as u32).to_ne_bytes());
    m.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    m.extend_from_slice(&flags.to_ne_bytes());
    m.extend_from_slice(&1u32.to_ne_bytes()); // seq
    m.extend_from_slice(&0u32.to_ne_bytes()); // pid: the kernel
    m.push(libc::AF_UNIX as u8); // sdiag_family
    m.push(0); // sdiag_protocol
    m.extend_from_slice(&0u16.to_ne_bytes()); // pad
    m.extend_from_slice(&states.to_ne_bytes()); // udiag_states
    m.extend_from_slice(&ino.to_ne_bytes());
    m.extend_from_slice(&show.to_ne_bytes());
    // udiag_cookie: INET_DIAG_NOCOOKIE (no cookie checked).
    m.extend_from_slice(&u32::MAX.to_ne_bytes());
    m.extend_from_slice(&u32::MAX.to_ne_bytes());
    m
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(
        b.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

/// One netlink message of a datagram: its type and its bytes (header included).
enum Message<'a> {
    Msg(u16, &'a [u8]),
    /// A length that does not fit: the rest of the datagram is not read.
    Bad,
}

/// The netlink messages of datagram `buf`, each length checked before it is read.
fn messages(buf: &[u8]) -> impl Iterator<Item = Message<'_>> {
    let mut at = 0;
    std::iter::from_fn(move || {
        if at + NLMSG_HDR > buf.len() {
            return None;
        }
        let (Some(len), Some(kind)) = (u32_at(buf, at), u16_at(buf, at + 4)) else {
            at = buf.len();
            return Some(Message::Bad);
        };
        let len = len as usize;
        if len < NLMSG_HDR || len > buf.len() - at {
            at = buf.len();
            return Some(Message::Bad);
        }
        let msg = &buf[at..at + len];
        at += (len + 3) & !3;
        Some(Message::Msg(kind, msg))
    })
}

/// The attributes (type, payload) of a `unix_diag_msg` message `msg`, up to the first whose
/// length does not fit.
fn attributes(msg: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    let mut a = NLMSG_HDR + UNIX_DIAG_MSG;
    std::iter::from_fn(move || {
        let alen = u16_at(msg, a)? as usize;
        let atype = u16_at(msg, a + 2)?;
        if alen < 4 || alen > msg.len() - a {
            return None;
        }
        let payload = &msg[a + 4..a + alen];
        a += (alen + 3) & !3;
        Some((atype, payload))
    })
}

/// The error an `NLMSG_ERROR` message `msg` carries.
fn netlink_error(msg: &[u8], what: &str) -> String {
    let errno = u32_at(msg, NLMSG_HDR).map_or(0, |e| (e as i32).unsigned_abs());
    format!(
        "sock_diag: {what}: {}",
        std::io::Error::from_raw_os_error(errno as i32)
    )
}

/// The answer one datagram of replies gives about socket `ino`: Some(Ok) from its
/// `unix_diag_msg`, Some(Err) for an error reply, None when it says nothing of it. Any bytes
/// are taken: lengths are checked before each read.
pub fn parse_unix_diag_reply(buf: &[u8], ino: u32) -> Option<Result<UnixPeer, String>> {
    for m in messages(buf) {
        let Message::Msg(kind, msg) = m else {
            return None;
        };
        match kind {
            NLMSG_ERROR => return Some(Err(netlink_error(msg, &format!("socket {ino}")))),
            NLMSG_DONE => return Some(Err(format!("sock_diag: socket {ino}: not found"))),
            SOCK_DIAG_BY_FAMILY if u32_at(msg, NLMSG_HDR + 4) == Some(ino) => {
                let mut peer = UnixPeer::default();
                for (atype, payload) in attributes(msg) {
                    match atype {
                        UNIX_DIAG_PEER => peer.inode = u32_at(payload, 0).map(u64::from),
                        UNIX_DIAG_SHUTDOWN => peer.shutdown = payload.first().copied(),
                        _ => {}
                    }
                }
                return Some(Ok(peer));
            }
            _ => {}
        }
    }
    None
}

/// The listening unix sockets of this process's network namespace and the connections
/// waiting in their queues, not accepted yet ([`unix_listeners`]).
#[derive(Clone, Debug, Default)]
pub struct UnixListeners {
    /// The listening socket whose queue holds each connecting socket, by the connecting
    /// socket's inode.
    by_icon: HashMap<u64, u64>,
    /// Listening sockets read.
    pub listeners: usize,
    /// Pending connections read.
    pub icons: usize,
    /// What cut the dump short ([`MAX_LISTENERS`], [`MAX_ICONS`], [`MAX_DUMP_DATAGRAMS`]), or
    /// why it failed; None when the kernel said it was done.
    pub cut: Option<String>,
}

impl UnixListeners {
    /// The inode of the listening socket in whose queue connecting socket `inode` waits, not
    /// accepted yet.
    pub fn listener_of(&self, inode: u64) -> Option<u64> {
        self.by_icon.get(&inode).copied()
    }
}

/// What one datagram of a dump said.
#[derive(Debug, PartialEq, Eq)]
enum Dumped {
    /// More datagrams follow.
    More,
    /// `NLMSG_DONE`: every socket was sent.
    Done,
    /// A bound was reached, or the datagram was bad: why.
    Cut(String),
}

/// Every listening unix socket of this process's network namespace with its queue of
/// connections not accepted yet: one dump of the kernel's `unix_diag` with
/// `UDIAG_SHOW_ICONS`, which lists, for each listener, the inode of each connecting socket
/// in its queue (net/unix/diag.c `sk_diag_dump_icons`: for each skb of the listener's receive
/// queue, `unix_sk(skb->sk)->peer`, the socket that called `connect`). Bounded by
/// [`MAX_LISTENERS`], [`MAX_ICONS`] and [`MAX_DUMP_DATAGRAMS`]; `cut` says where it stopped.
pub fn unix_listeners() -> UnixListeners {
    let mut l = UnixListeners::default();
    let fd = match diag_socket() {
        Ok(fd) => fd,
        Err(e) => {
            l.cut = Some(e);
            return l;
        }
    };
    let request = diag_request(
        NLM_F_REQUEST | NLM_F_DUMP,
        1 << TCP_LISTEN,
        0,
        UDIAG_SHOW_ICONS,
    );
    if let Err(e) = send_request(&fd, &request) {
        l.cut = Some(e);
        return l;
    }
    let mut buf = vec![0u8; MAX_DUMP_DATAGRAM_BYTES];
    for _ in 0..MAX_DUMP_DATAGRAMS {
        let n = match receive(&fd, &mut buf) {
            Ok(n) => n,
            Err(e) => {
                l.cut = Some(e);
                return l;
            }
        };
        match parse_listeners(&buf[..n], &mut l) {
            Dumped::More => {}
            Dumped::Done => return l,
            Dumped::Cut(why) => {
                l.cut = Some(why);
                return l;
            }
        }
    }
    l.cut = Some(format!("at {MAX_DUMP_DATAGRAMS} datagrams"));
    l
}

/// Adds the listeners of one datagram of the dump to `l`. Any bytes are taken.
fn parse_listeners(buf: &[u8], l: &mut UnixListeners) -> Dumped {
    for m in messages(buf) {
        let Message::Msg(kind, msg) = m else {
            return Dumped::Cut("a reply of a bad length".to_string());
        };
        match kind {
            NLMSG_ERROR => return Dumped::Cut(netlink_error(msg, "listening sockets")),
            NLMSG_DONE => return Dumped::Done,
            SOCK_DIAG_BY_FAMILY => {
                let Some(listener) = u32_at(msg, NLMSG_HDR + 4) else {
                    return Dumped::Cut("a reply of a bad length".to_string());
                };
                if l.listeners == MAX_LISTENERS {
                    return Dumped::Cut(format!("at {MAX_LISTENERS} listening sockets"));
                }
                l.listeners += 1;
                for (_, icons) in attributes(msg).filter(|(t, _)| *t == UNIX_DIAG_ICONS) {
                    for icon in icons.chunks_exact(4) {
                        if l.icons == MAX_ICONS {
                            return Dumped::Cut(format!("at {MAX_ICONS} pending connections"));
                        }
                        l.icons += 1;
                        let inode = u32_at(icon, 0).map_or(0, u64::from);
                        // 0: the connecting socket was closed meanwhile.
                        if inode != 0 {
                            l.by_icon.insert(inode, u64::from(listener));
                        }
                    }
                }
            }
            _ => {}
        }
    }
    Dumped::More
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::proc_fds::{fd_link, FdLink, NetTables};

    /// The peer inode alone of socket `inode`.
    fn unix_peer_inode(inode: u64) -> Result<Option<u64>, String> {
        unix_peer(inode).map(|p| p.inode)
    }

    #[test]
    fn unix_peers() {
        use std::os::fd::AsRawFd;
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let pid = std::process::id();
        let inode = |fd: i32| match fd_link(pid, fd.into()) {
            Ok(FdLink::Socket(i)) => i,
            other => panic!("{other:?}"),
        };
        let (ia, ib) = (inode(a.as_raw_fd()), inode(b.as_raw_fd()));
        assert_eq!(unix_peer_inode(ia), Ok(Some(ib)));
        assert_eq!(unix_peer_inode(ib), Ok(Some(ia)));
        assert!(same_net_namespace(pid));
        assert!(!same_net_namespace(u32::MAX));
        // A listening socket has no peer; no socket has inode 0 (or a number past 32 bits).
        let dir = std::env::temp_dir().join(format!("pyunwind-unix-{pid}"));
        let _ = std::fs::remove_file(&dir);
        let l = std::os::unix::net::UnixListener::bind(&dir).unwrap();
        assert_eq!(unix_peer_inode(inode(l.as_raw_fd())), Ok(None));
        // A client's peer is the socket the server accepted, named with the listener's path.
        let c = std::os::unix::net::UnixStream::connect(&dir).unwrap();
        let (s, _) = l.accept().unwrap();
        assert_eq!(
            unix_peer_inode(inode(c.as_raw_fd())),
            Ok(Some(inode(s.as_raw_fd())))
        );
        let t = NetTables::read(pid);
        assert_eq!(
            t.get(inode(s.as_raw_fd())).and_then(|e| e.local.clone()),
            dir.to_str().map(str::to_string)
        );
        // A connection not accepted yet: its other end, the listener's embryo socket, has no
        // inode; the dump of the listeners names the listener whose queue holds it, by the
        // client's inode. Once the server closes its end, the client is shut down both ways.
        let pending = std::os::unix::net::UnixStream::connect(&dir).unwrap();
        let (ip, il) = (inode(pending.as_raw_fd()), inode(l.as_raw_fd()));
        assert_eq!(
            unix_peer(ip),
            Ok(UnixPeer {
                inode: Some(0),
                shutdown: Some(0)
            })
        );
        let abstract_name = format!("\0pyunwind-unix-{pid}");
        let abs = bind_abstract(&abstract_name);
        let pending_abs = connect_abstract(&abstract_name);
        let listeners = unix_listeners();
        assert!(listeners.cut.is_none(), "{:?}", listeners.cut);
        assert!(listeners.listeners >= 2 && listeners.icons >= 2);
        assert_eq!(listeners.listener_of(ip), Some(il));
        assert_eq!(
            listeners.listener_of(inode(pending_abs.as_raw_fd())),
            Some(inode(abs.as_raw_fd()))
        );
        assert_eq!(listeners.listener_of(inode(c.as_raw_fd())), None);
        drop(s);
        assert_eq!(
            unix_peer(inode(c.as_raw_fd())),
            Ok(UnixPeer {
                inode: Some(0),
                shutdown: Some(SHUTDOWN_MASK)
            })
        );
        std::fs::remove_file(&dir).unwrap();
        assert!(unix_peer_inode(0).is_err());
        assert!(unix_peer_inode(1 << 40).is_err());
    }

    /// A unix listener on abstract address `name` (its leading NUL included).
    fn bind_abstract(name: &str) -> std::os::unix::net::UnixListener {
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(&name.as_bytes()[1..]);
        std::os::unix::net::UnixListener::bind_addr(&addr.unwrap()).unwrap()
    }

    fn connect_abstract(name: &str) -> std::os::unix::net::UnixStream {
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(&name.as_bytes()[1..]);
        std::os::unix::net::UnixStream::connect_addr(&addr.unwrap()).unwrap()
    }

    #[test]
    fn diag_replies_of_any_bytes() {
        let msg = |kind: u16, body: &[u8]| {
            let mut m = ((NLMSG_HDR + body.len()) as u32).to_ne_bytes().to_vec();
            m.extend_from_slice(&kind.to_ne_bytes());
            m.extend_from_slice(&[0u8; 10]);
            m.extend_from_slice(body);
            m
        };
        let diag = |ino: u32, attrs: &[u8]| {
            let mut b = vec![1u8, 1, 1, 0];
            b.extend_from_slice(&ino.to_ne_bytes());
            b.extend_from_slice(&[0xff; 8]);
            b.extend_from_slice(attrs);
            msg(SOCK_DIAG_BY_FAMILY, &b)
        };
        let peer_attr = |peer: u32| {
            let mut a = 8u16.to_ne_bytes().to_vec();
            a.extend_from_slice(&UNIX_DIAG_PEER.to_ne_bytes());
            a.extend_from_slice(&peer.to_ne_bytes());
            a
        };
        let peer = |inode: Option<u64>| {
            Some(Ok(UnixPeer {
                inode,
                shutdown: None,
            }))
        };
        assert_eq!(
            parse_unix_diag_reply(&diag(7, &peer_attr(9)), 7),
            peer(Some(9))
        );
        assert_eq!(
            parse_unix_diag_reply(&diag(7, &peer_attr(0)), 7),
            peer(Some(0))
        );
        let mut shut = peer_attr(0);
        shut.extend_from_slice(&5u16.to_ne_bytes());
        shut.extend_from_slice(&UNIX_DIAG_SHUTDOWN.to_ne_bytes());
        shut.extend_from_slice(&[3, 0, 0, 0]);
        assert_eq!(
            parse_unix_diag_reply(&diag(7, &shut), 7),
            Some(Ok(UnixPeer {
                inode: Some(0),
                shutdown: Some(3)
            }))
        );
        assert_eq!(parse_unix_diag_reply(&diag(7, &[]), 7), peer(None));
        assert_eq!(parse_unix_diag_reply(&diag(8, &peer_attr(9)), 7), None);
        assert!(matches!(
            parse_unix_diag_reply(&msg(NLMSG_ERROR, &(-2i32).to_ne_bytes()), 7),
            Some(Err(_))
        ));
        assert!(matches!(
            parse_unix_diag_reply(&msg(NLMSG_DONE, &[]), 7),
            Some(Err(_))
        ));
        // Lengths that lie: a message longer than the datagram, shorter than its header, an
        // attribute of length 0 or past its message; truncated datagrams.
        let mut long = diag(7, &peer_attr(9));
        long[..4].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert_eq!(parse_unix_diag_reply(&long, 7), None);
        let mut short = diag(7, &peer_attr(9));
        short[..4].copy_from_slice(&3u32.to_ne_bytes());
        assert_eq!(parse_unix_diag_reply(&short, 7), None);
        let mut zero = peer_attr(9);
        zero[..2].copy_from_slice(&0u16.to_ne_bytes());
        assert_eq!(parse_unix_diag_reply(&diag(7, &zero), 7), peer(None));
        let mut past = peer_attr(9);
        past[..2].copy_from_slice(&500u16.to_ne_bytes());
        assert_eq!(parse_unix_diag_reply(&diag(7, &past), 7), peer(None));
        let full = diag(7, &peer_attr(9));
        for cut in 0..full.len() {
            let _ = parse_unix_diag_reply(&full[..cut], 7);
        }
        assert_eq!(parse_unix_diag_reply(&[], 7), None);
        assert_eq!(unix_diag_request(5).len(), NLMSG_HDR + 24);
    }

    #[test]
    fn listener_dumps_of_any_bytes() {
        let listener = |ino: u32, icons: &[u32]| {
            let mut body = vec![1u8, 1, 10, 0];
            body.extend_from_slice(&ino.to_ne_bytes());
            body.extend_from_slice(&[0xff; 8]);
            body.extend_from_slice(&((4 + 4 * icons.len()) as u16).to_ne_bytes());
            body.extend_from_slice(&UNIX_DIAG_ICONS.to_ne_bytes());
            for i in icons {
                body.extend_from_slice(&i.to_ne_bytes());
            }
            let mut m = ((NLMSG_HDR + body.len()) as u32).to_ne_bytes().to_vec();
            m.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
            m.extend_from_slice(&[0u8; 10]);
            m.extend_from_slice(&body);
            m
        };
        let done = {
            let mut m = (NLMSG_HDR as u32).to_ne_bytes().to_vec();
            m.extend_from_slice(&NLMSG_DONE.to_ne_bytes());
            m.extend_from_slice(&[0u8; 10]);
            m
        };
        let mut l = UnixListeners::default();
        let mut two = listener(5, &[11, 0, 12]);
        two.extend(listener(6, &[]));
        assert_eq!(parse_listeners(&two, &mut l), Dumped::More);
        assert_eq!(parse_listeners(&done, &mut l), Dumped::Done);
        assert_eq!((l.listeners, l.icons), (2, 3));
        assert_eq!((l.listener_of(11), l.listener_of(12)), (Some(5), Some(5)));
        assert_eq!((l.listener_of(0), l.listener_of(5)), (None, None));
        // The bounds: listeners, then icons, all datagrams together.
        let mut l = UnixListeners::default();
        let one = listener(5, &[]);
        let many: Vec<u8> = one.iter().copied().cycle().take(one.len() * 1000).collect();
        let mut said = Dumped::More;
        for _ in 0..=MAX_LISTENERS / 1000 {
            said = parse_listeners(&many, &mut l);
        }
        assert!(matches!(said, Dumped::Cut(_)), "{said:?}");
        assert_eq!(l.listeners, MAX_LISTENERS);
        let mut l = UnixListeners::default();
        let icons: Vec<u32> = (1..=16000).collect();
        let big = listener(5, &icons);
        let said: Vec<Dumped> = (0..5).map(|_| parse_listeners(&big, &mut l)).collect();
        assert!(matches!(said[4], Dumped::Cut(_)), "{said:?}");
        assert_eq!(l.icons, MAX_ICONS);
        // Lengths that lie, truncated datagrams: cut, never a panic.
        let mut l = UnixListeners::default();
        let full = listener(5, &[11, 12]);
        for cut in 0..full.len() {
            let _ = parse_listeners(&full[..cut], &mut l);
        }
        let mut long = full.clone();
        long[..4].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert!(matches!(parse_listeners(&long, &mut l), Dumped::Cut(_)));
        let mut attr_past = full.clone();
        attr_past[NLMSG_HDR + UNIX_DIAG_MSG..][..2].copy_from_slice(&900u16.to_ne_bytes());
        let mut l = UnixListeners::default();
        assert_eq!(parse_listeners(&attr_past, &mut l), Dumped::More);
        assert_eq!((l.listeners, l.icons), (1, 0));
    }
}

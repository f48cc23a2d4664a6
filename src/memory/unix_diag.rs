//! Who is at the other end of a unix socket: the kernel's socket diagnosis
//! (`NETLINK_SOCK_DIAG`, net/unix/diag.c) names the peer's inode, which `/proc/PID/net/unix`
//! does not. It answers for the caller's network namespace only ([`same_net_namespace`]).
//! Every reply is bounded ([`MAX_DIAG_REPLY_BYTES`], [`MAX_DIAG_REPLIES`]) and parsed from any
//! bytes without panicking.

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
/// <linux/netlink.h>: `NLM_F_REQUEST`, `NLMSG_ERROR`, `NLMSG_DONE`; `sizeof(struct
/// nlmsghdr)`.
const NLM_F_REQUEST: u16 = 1;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLMSG_HDR: usize = 16;
/// <linux/unix_diag.h>: `UDIAG_SHOW_PEER`, the `UNIX_DIAG_PEER` attribute, `sizeof(struct
/// unix_diag_msg)`.
const UDIAG_SHOW_PEER: u32 = 0x4;
const UNIX_DIAG_PEER: u16 = 2;
const UNIX_DIAG_MSG: usize = 16;
/// The reply to one socket's query: its message and a few attributes.
const MAX_DIAG_REPLY_BYTES: usize = 8192;
/// Most replies read before the one for the asked socket (a netlink socket of our own gets
/// only those).
const MAX_DIAG_REPLIES: usize = 16;

/// The inode of the socket at the other end of unix socket `inode`, as the kernel's
/// `unix_diag` (Linux 3.3+, net/unix/diag.c: an exact query by inode, no cookie) says it for
/// this process's network namespace; None when it has no peer. An error when the kernel
/// cannot be asked or does not know the socket.
pub fn unix_peer_inode(inode: u64) -> Result<Option<u64>, String> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let ino = u32::try_from(inode).map_err(|_| format!("socket {inode}: no unix inode"))?;
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
    let request = unix_diag_request(ino);
    // SAFETY: the buffer is `request`, of the length given.
    let sent = unsafe { libc::send(fd.as_raw_fd(), request.as_ptr().cast(), request.len(), 0) };
    if sent != request.len() as isize {
        return Err(format!("sock_diag: {}", std::io::Error::last_os_error()));
    }
    let mut buf = vec![0u8; MAX_DIAG_REPLY_BYTES];
    for _ in 0..MAX_DIAG_REPLIES {
        // SAFETY: `buf` is writable for its whole length.
        let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n <= 0 {
            return Err(format!("sock_diag: {}", std::io::Error::last_os_error()));
        }
        if let Some(answer) = parse_unix_diag_reply(&buf[..n as usize], ino) {
            return answer;
        }
    }
    Err(format!("sock_diag: no answer for socket {inode}"))
}

/// `struct nlmsghdr` + `struct unix_diag_req` asking for socket `ino`'s peer.
fn unix_diag_request(ino: u32) -> Vec<u8> {
    let mut m = Vec::with_capacity(NLMSG_HDR + 24);
    m.extend_from_slice(&((NLMSG_HDR + 24) as u32).to_ne_bytes());
    m.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    m.extend_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    m.extend_from_slice(&1u32.to_ne_bytes()); // seq
    m.extend_from_slice(&0u32.to_ne_bytes()); // pid: the kernel
    m.push(libc::AF_UNIX as u8); // sdiag_family
    m.push(0); // sdiag_protocol
    m.extend_from_slice(&0u16.to_ne_bytes()); // pad
    m.extend_from_slice(&u32::MAX.to_ne_bytes()); // udiag_states: any
    m.extend_from_slice(&ino.to_ne_bytes());
    m.extend_from_slice(&UDIAG_SHOW_PEER.to_ne_bytes());
    // udiag_cookie: INET_DIAG_NOCOOKIE (no cookie checked).
    m.extend_from_slice(&u32::MAX.to_ne_bytes());
    m.extend_from_slice(&u32::MAX.to_ne_bytes());
    m
}

/// The answer one datagram of replies gives about socket `ino`: Some(Ok(peer)) from its
/// `unix_diag_msg` (None without a `UNIX_DIAG_PEER`), Some(Err) for an error reply, None when
/// it says nothing of it. Any bytes are taken: lengths are checked before each read.
pub fn parse_unix_diag_reply(buf: &[u8], ino: u32) -> Option<Result<Option<u64>, String>> {
    let u16_at = |b: &[u8], at: usize| -> Option<u16> {
        Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
    };
    let u32_at = |b: &[u8], at: usize| -> Option<u32> {
        Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
    };
    let mut at = 0;
    while at + NLMSG_HDR <= buf.len() {
        let len = u32_at(buf, at)? as usize;
        let kind = u16_at(buf, at + 4)?;
        if len < NLMSG_HDR || len > buf.len() - at {
            return None;
        }
        let msg = &buf[at..at + len];
        match kind {
            NLMSG_ERROR => {
                let errno = u32_at(msg, NLMSG_HDR).map_or(0, |e| (e as i32).unsigned_abs());
                return Some(Err(format!(
                    "sock_diag: socket {ino}: {}",
                    std::io::Error::from_raw_os_error(errno as i32)
                )));
            }
            NLMSG_DONE => return Some(Err(format!("sock_diag: socket {ino}: not found"))),
            SOCK_DIAG_BY_FAMILY if u32_at(msg, NLMSG_HDR + 4) == Some(ino) => {
                let mut a = NLMSG_HDR + UNIX_DIAG_MSG;
                while a + 4 <= msg.len() {
                    let alen = u16_at(msg, a)? as usize;
                    let atype = u16_at(msg, a + 2)?;
                    if alen < 4 || alen > msg.len() - a {
                        break;
                    }
                    if atype == UNIX_DIAG_PEER && alen >= 8 {
                        let peer = u32_at(msg, a + 4)?;
                        return Some(Ok((peer != 0).then_some(u64::from(peer))));
                    }
                    a += (alen + 3) & !3;
                }
                return Some(Ok(None));
            }
            _ => {}
        }
        at += (len + 3) & !3;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::proc_fds::{fd_link, FdLink, NetTables};

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
        std::fs::remove_file(&dir).unwrap();
        assert!(unix_peer_inode(0).is_err());
        assert!(unix_peer_inode(1 << 40).is_err());
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
        assert_eq!(
            parse_unix_diag_reply(&diag(7, &peer_attr(9)), 7),
            Some(Ok(Some(9)))
        );
        assert_eq!(parse_unix_diag_reply(&diag(7, &[]), 7), Some(Ok(None)));
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
        assert_eq!(parse_unix_diag_reply(&diag(7, &zero), 7), Some(Ok(None)));
        let mut past = peer_attr(9);
        past[..2].copy_from_slice(&500u16.to_ne_bytes());
        assert_eq!(parse_unix_diag_reply(&diag(7, &past), 7), Some(Ok(None)));
        let full = diag(7, &peer_attr(9));
        for cut in 0..full.len() {
            let _ = parse_unix_diag_reply(&full[..cut], 7);
        }
        assert_eq!(parse_unix_diag_reply(&[], 7), None);
        assert_eq!(unix_diag_request(5).len(), NLMSG_HDR + 24);
    }
}

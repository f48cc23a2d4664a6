//! The process at a socket's other end (`peer_process`): which process of this machine holds
//! the peer socket of a loopback TCP connection or a unix socket, for a live local target.

use super::{net_tables, Ends};
use crate::memory::unix_diag::{self, UnixPeer, SHUTDOWN_MASK};
use crate::memory::{proc_fds, socket_holders};
use crate::model::PeerProcess;
use crate::session::{once, Session};

/// TCP_ESTABLISHED, the `st` of a connected socket in /proc/net/tcp (include/net/tcp_states.h).
const TCP_ESTABLISHED: u8 = 0x01;

/// The process of this machine at the other end of socket `inode` (fd `fd` of live process
/// `pid`, whose ends are `ends`), found the way `ss -p` finds it: the process whose
/// `/proc/PID/fd` holds the peer socket's inode ([`socket_holders::socket_holders`], scanned
/// once per stop). The peer socket of a TCP connection on the loopback is the row of the
/// target's `net/tcp` or `net/tcp6` whose ends are this socket's, swapped; a unix socket's is
/// the one the kernel's `unix_diag` names. Other sockets (a remote peer, UDP, none) have none,
/// and say nothing. A connection the peer has not accepted yet (TCP: ESTABLISHED, no inode, in
/// its listener's backlog; unix: in the queue of the listener the kernel names,
/// [`unix_other`]) is the process's that holds that listener, the one that would accept it.
/// Where the peer socket or its one process is not found: None and why.
pub(super) fn peer_process(
    session: &Session,
    pid: u32,
    fd: i64,
    inode: u64,
    ends: &Ends,
) -> (Option<PeerProcess>, Option<String>) {
    // Where the other end waits in a listener's queue, the process named is the listener's.
    let mut pending = false;
    let other = match ends.family {
        Some(1) => match unix_other(session, pid, fd, inode) {
            Ok((other, in_queue)) => {
                pending = in_queue;
                other
            }
            Err(why) => return (None, why),
        },
        Some(2 | 10) => {
            let (Some(local), Some(peer)) = (ends.local.as_deref(), ends.peer.as_deref()) else {
                return (None, None);
            };
            if !proc_fds::is_loopback(peer) {
                return (None, None);
            }
            let tables = net_tables(session, pid, None);
            // tcp and tcp6 (an IPv4 client of a dual-stack server is in both).
            let tcp = [tables.table(0), tables.table(1)];
            if !tcp.iter().any(|t| t.get(inode).is_some()) {
                // Not a TCP socket (a connected UDP one), or one the tables do not list.
                return (None, None);
            }
            match tcp.iter().find_map(|t| t.tcp_with_ends(peer, local)) {
                Some((other, _)) if other != 0 => other,
                // ESTABLISHED with no inode: a connection the kernel completed that waits in
                // its listener's backlog, which no process has accepted yet: the process that
                // will is the one holding that listener, where exactly one takes the address.
                Some((_, Some(TCP_ESTABLISHED))) => {
                    let listeners: Vec<u64> =
                        tcp.iter().flat_map(|t| t.tcp_listeners_of(peer)).collect();
                    match listeners[..] {
                        [one] => {
                            pending = true;
                            one
                        }
                        _ => {
                            return (
                                None,
                                Some(format!(
                                    "fd {fd}: its other end, {peer}, is a connection not accepted yet, and {} listening sockets take connections to it",
                                    listeners.len()
                                )),
                            )
                        }
                    }
                }
                Some(_) => {
                    return (
                        None,
                        Some(format!(
                            "fd {fd}: its other end, {peer}, is held by no process (it is being closed)"
                        )),
                    )
                }
                None => {
                    return (
                        None,
                        Some(format!(
                            "fd {fd}: no socket of /proc/{pid}/net/{{tcp,tcp6}} is the other end of {local} -> {peer} (closed, or the tables were cut)"
                        )),
                    )
                }
            }
        }
        _ => return (None, None),
    };
    let holders = once(&session.socket_holders, socket_holders::socket_holders);
    let what = if pending {
        format!("its other end is not accepted yet: the listening socket whose queue holds it, socket {other},")
    } else {
        format!("its peer, socket {other},")
    };
    match holders.of(other) {
        [] => {
            let mut why = format!(
                "fd {fd}: {what} is in none of the fds of the {} processes read",
                holders.processes
            );
            if holders.unreadable > 0 {
                why.push_str(&format!(" ({} could not be read)", holders.unreadable));
            }
            if let Some(cut) = &holders.cut {
                why.push_str(&format!(" (the scan of /proc/*/fd stopped {cut})"));
            }
            (None, Some(why))
        }
        // A scan cut short saw this one holder; it holds the socket, but another process past
        // the cut may hold it too: say so.
        &[holder] => match proc_fds::comm(holder) {
            Ok(command) => (
                Some(PeerProcess {
                    pid: holder,
                    command,
                }),
                holders.cut.as_ref().map(|cut| {
                    format!(
                        "fd {fd}: {what} is held by process {holder}; the scan of /proc/*/fd stopped {cut}: another process past it may hold the socket too"
                    )
                }),
            ),
            Err(e) => (None, Some(format!("fd {fd}: its peer's process: {e}"))),
        },
        several => {
            let pids: Vec<String> = several.iter().map(u32::to_string).collect();
            (
                None,
                Some(format!(
                    "fd {fd}: {what} is held by {} processes ({}): none is named",
                    several.len(),
                    pids.join(", ")
                )),
            )
        }
    }
}

/// The socket at the other end of unix socket `inode` (fd `fd` of process `pid`), as the
/// kernel's `unix_diag` names it, and whether it is the listener in whose queue a connection
/// not accepted yet waits. Err: no such socket, with why (None: there is none to name, a
/// listening or unconnected socket).
///
/// A connection not accepted yet has an other end with no inode (the listener's embryo socket,
/// net/unix/af_unix.c `unix_stream_connect`), as has one whose other end was closed. The dump
/// of the listeners' queues (`UDIAG_SHOW_ICONS`, net/unix/diag.c `sk_diag_dump_icons`), made
/// once per stop and only for such a socket, tells them apart: a socket in a listener's queue
/// waits for that listener. One in none is closed where the kernel shut it down both ways
/// (`unix_release_sock` does so to the peer of a closed stream socket): an error says so.
fn unix_other(
    session: &Session,
    pid: u32,
    fd: i64,
    inode: u64,
) -> Result<(u64, bool), Option<String>> {
    if !unix_diag::same_net_namespace(pid) {
        return Err(Some(format!(
            "fd {fd}: unix socket {inode}: the process at its other end is not shown (another network namespace)"
        )));
    }
    match unix_diag::unix_peer(inode) {
        Ok(UnixPeer {
            inode: Some(0),
            shutdown,
        }) => {
            let listeners = once(&session.unix_listeners, unix_diag::unix_listeners);
            if let Some(listener) = listeners.listener_of(inode) {
                return Ok((listener, true));
            }
            Err(Some(match (&listeners.cut, shutdown) {
                (Some(cut), _) => format!(
                    "fd {fd}: unix socket {inode}: its other end has no inode, and the queues of the listening sockets were not all read ({cut})"
                ),
                (None, Some(SHUTDOWN_MASK)) => format!(
                    "fd {fd}: unix socket {inode}: its other end was closed: no process holds it"
                ),
                (None, _) => format!(
                    "fd {fd}: unix socket {inode}: its other end has no inode and is in the queue of none of the {} listening sockets read (it connected or closed meanwhile)",
                    listeners.listeners
                ),
            }))
        }
        Ok(UnixPeer {
            inode: Some(other), ..
        }) => Ok((other, false)),
        Ok(UnixPeer { inode: None, .. }) => Err(None),
        Err(e) => Err(Some(format!("fd {fd}: its peer's process: {e}"))),
    }
}

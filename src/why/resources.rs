//! Waits on the outside world: what a thread blocked in a system call, with no Python-level
//! wait to explain it, waits on — a socket, a pipe, a file, a descriptor of a kind the source
//! cannot tell, or a child process. One entry point, [`outside_wait`].
//!
//! Where each field comes from (docs/report.md, "Waits on the outside world"):
//!
//! - The system call's arguments (a core's NT_PRSTATUS, live /proc/PID/task/TID/syscall, the
//!   debugger's registers: [`super::state`]):
//!   - `read`, `readv`, `pread64`, `preadv`, `preadv2`, `recvfrom`, `recvmsg`, `recvmmsg`,
//!     `write`, `writev`, `pwrite64`, `pwritev`, `pwritev2`, `sendfile` (its `out_fd`),
//!     `sendto`, `sendmsg`, `sendmmsg`,
//!     `connect`, `accept`, `accept4`: the fd is the first argument; the `recv*`, `sendto`,
//!     `sendm*`, `connect` and `accept*` calls only work on sockets.
//!   - `poll`, `ppoll`: the `struct pollfd` array (first argument, `nfds` the second) read
//!     from the target's memory, taken when it names one fd (one entry, or all entries the
//!     same fd); its events say the direction (`POLLIN` reads, `POLLOUT` writes).
//!   - `wait4`: the pid is the first argument (`-1`, any child, and a process group give
//!     none); `waitid`: with `P_PID` the second.
//! - The Python socket object (any source): the innermost Python frame's value stack shows a
//!   call of a `_socket.socket` method ([`Snapshot::socket_calls`]); its `sock_fd` is the fd,
//!   the method the direction. A socket with a timeout polls before it reads: the object
//!   says `socket` where the call alone says `poll`. Failing that, a call on one fd made in a
//!   method of a socket (its `self`, or the socket it wraps, has that fd: `ssl.SSLSocket`
//!   reads through OpenSSL) is on that socket.
//! - /proc, for a live local process only (`SourceKind::Live`, or the debugger's memory of a
//!   local process, which the frontends give a pid): `/proc/PID/fd/FD` says what the fd is
//!   (socket, pipe, file), the net tables a socket's ends (read once per stop, kept in the
//!   session), `/proc/CHILD/cmdline` a child's command. A failure leaves the field null and
//!   adds an error; a link that contradicts the call or the object (the fd was closed and
//!   reused) gives no address; a thread that left its call while /proc was read gives none.
//!   Never for a core: its pids and fds may name other things on this machine now.
//! - The process at a socket's other end (`peer_process`, live, [`peer_process()`]): for a
//!   loopback TCP connection or a unix socket, the process whose `/proc/PID/fd` holds the peer
//!   socket's inode, as `ss -p` finds it; `/proc/*/fd` is scanned once per stop, bounded
//!   ([`socket_holders::socket_holders`]), only when a wait's peer is on this host.
//!
//! Without /proc an fd that nothing shows the kind of is kind `fd`.

use crate::arch::Arch;
use crate::cpython::sockets::{method_direction, SOCKET_METHODS};
use crate::cpython::{FrameItem, PyFrame, Snapshot};
use crate::memory::proc_fds::{self, FdLink, NetTables, SocketEnds};
use crate::memory::unix_diag;
use crate::memory::{proc_syscall, ProcSyscall};
use crate::model::{Direction, ErrorReport, FrameKind, ThreadReport, WaitKind, Waiting, WaitsOn};
use crate::session::{once, Session};
use crate::target::SourceKind;

use super::state::Syscall;

mod peer_process;
use peer_process::peer_process;

/// Most `struct pollfd` entries read of one `poll`.
const MAX_POLL_FDS: u64 = 64;
/// `sizeof(struct pollfd)`: `int fd; short events; short revents;`.
const POLLFD_SIZE: u64 = 8;
/// <asm-generic/poll.h> (x86-64 and arm64 alike): the events that read and those that write.
const POLL_READ: u16 = 0x0001 | 0x0002 | 0x0040 | 0x0080; // POLLIN POLLPRI POLLRDNORM POLLRDBAND
const POLL_WRITE: u16 = 0x0004 | 0x0100 | 0x0200; // POLLOUT POLLWRNORM POLLWRBAND
/// `waitid`'s idtype `P_PID` (<linux/wait.h>).
const P_PID: u64 = 1;

/// Which way a wait goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dir {
    In,
    Out,
    Connect,
    Accept,
}

impl Dir {
    fn of_method(method: &str) -> Option<Dir> {
        Some(match method_direction(method)? {
            Direction::Recv => Dir::In,
            Direction::Send => Dir::Out,
            Direction::Connect => Dir::Connect,
            Direction::Accept => Dir::Accept,
            Direction::Read | Direction::Write => return None,
        })
    }

    /// The report's `direction` for a wait of kind `kind`.
    fn name(self, kind: WaitKind) -> Option<Direction> {
        match (kind == WaitKind::Socket, self) {
            (true, Dir::In) => Some(Direction::Recv),
            (true, Dir::Out) => Some(Direction::Send),
            (true, Dir::Connect) => Some(Direction::Connect),
            (true, Dir::Accept) => Some(Direction::Accept),
            (false, Dir::In) => Some(Direction::Read),
            (false, Dir::Out) => Some(Direction::Write),
            (false, _) => None,
        }
    }
}

/// What a system call's arguments say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CallSays {
    /// A call on one fd; `socket`: a call only sockets take.
    Fd {
        fd: i64,
        dir: Option<Dir>,
        socket: bool,
    },
    /// A poll-like call whose descriptors are not one fd (or cannot be read).
    Polls,
    /// `wait4`/`waitid`: the child, None for any.
    Child(Option<i64>),
    /// Nothing this module knows.
    Other,
}

/// (name, direction, socket only) of the calls whose first argument is the fd.
const FD_CALLS: &[(&str, Option<Dir>, bool)] = &[
    ("read", Some(Dir::In), false),
    ("readv", Some(Dir::In), false),
    ("pread64", Some(Dir::In), false),
    ("preadv", Some(Dir::In), false),
    ("preadv2", Some(Dir::In), false),
    ("write", Some(Dir::Out), false),
    ("writev", Some(Dir::Out), false),
    ("pwrite64", Some(Dir::Out), false),
    ("pwritev", Some(Dir::Out), false),
    ("pwritev2", Some(Dir::Out), false),
    // sendfile(out_fd, in_fd, ...): what it waits to write to (`socket.sendfile()`).
    ("sendfile", Some(Dir::Out), false),
    ("recvfrom", Some(Dir::In), true),
    ("recvmsg", Some(Dir::In), true),
    ("recvmmsg", Some(Dir::In), true),
    ("sendto", Some(Dir::Out), true),
    ("sendmsg", Some(Dir::Out), true),
    ("sendmmsg", Some(Dir::Out), true),
    ("connect", Some(Dir::Connect), true),
    ("accept", Some(Dir::Accept), true),
    ("accept4", Some(Dir::Accept), true),
];

/// Calls that wait on several descriptors at once (a socket with a timeout polls its fd), and
/// `restart_syscall`: a `poll` with a timeout that a stop interrupted (a debugger's, gcore's)
/// goes on as that call, which has no arguments of its own.
const POLL_CALLS: &[&str] = &["poll", "ppoll", "select", "pselect6", "restart_syscall"];

/// A wait for child `pid` in system call `call`: its command line, live, while `t` still
/// waits in that call.
fn child_on(
    session: &Session,
    t: &ThreadReport,
    call: Syscall,
    pid: Option<i64>,
    errors: &mut Vec<ErrorReport>,
) -> WaitsOn {
    let mut command = None;
    if let (Some(parent), Some(child)) = (live_pid(session), pid) {
        command = match proc_fds::child_process(parent, child).and_then(proc_fds::cmdline) {
            Ok(c) => Some(c),
            Err(e) => {
                errors.push(problem(t, &format!("child {child}: {e}")));
                None
            }
        };
        if command.is_some() && !still_in(session, t, call, errors) {
            command = None;
        }
    }
    WaitsOn::Child { pid, command }
}

/// What the wait of `t`, blocked in system call `call`, is on: kind `socket`, `pipe`,
/// `file`, `fd` or `child`, with [`WaitsOn`]'s fields, `frame` the index in `t.frames` of
/// its innermost Python frame (the one making the C call) and `owner` null; and what could
/// not be read (/proc lookups that failed: `address` 0). None when neither the call nor a
/// socket object shows such a wait (a `futex`, a `clock_nanosleep`, a poll over several
/// descriptors). For `--why`'s threads with no Python-level wait, whatever the source.
pub fn outside_wait(
    session: &Session,
    t: &ThreadReport,
    call: Syscall,
) -> (Option<Waiting>, Vec<ErrorReport>) {
    let mut errors = Vec::new();
    let Some(frame) = t.frames.iter().position(|f| f.kind == FrameKind::Python) else {
        return (None, errors);
    };
    let snap = &session.snap;
    let says = call_says(session.target.arch, snap, call);
    let live = live_pid(session);
    let waiting = |kind, on| Waiting {
        kind,
        object: None,
        type_name: None,
        owner: None,
        frame,
        on: Some(on),
    };
    if let CallSays::Child(pid) = says {
        let on = child_on(session, t, call, pid, &mut errors);
        return (Some(waiting(WaitKind::Child, on)), errors);
    }
    // The socket the innermost frame calls a method of, if any; else, for a call on one fd,
    // the socket that frame is a method of, when it has that fd (an `ssl.SSLSocket` reads
    // through OpenSSL, whose `read` shows no socket method).
    let innermost = innermost_frame(session, t);
    let object = innermost.and_then(|p| {
        socket_call(snap, p).or_else(|| match says {
            CallSays::Fd { fd, .. } => self_socket(snap, p).filter(|o| o.fd == Some(fd)),
            _ => None,
        })
    });
    let (fd, dir, socket_evidence, object) = match (says, object) {
        (CallSays::Fd { fd, dir, .. }, Some(o)) if o.fd == Some(fd) => {
            (fd, o.dir.or(dir), true, Some(o))
        }
        // The call names another fd than the object: the call is what blocks.
        (CallSays::Fd { fd, dir, socket }, _) => (fd, dir, socket, None),
        (CallSays::Polls, Some(o)) => match o.fd {
            Some(fd) => (fd, o.dir, true, Some(o)),
            None => return (None, errors),
        },
        // A poll of one fd: that is the socket's when the object's fd is the same.
        (CallSays::Other | CallSays::Polls | CallSays::Child(_), _) => return (None, errors),
    };
    let mut kind = if socket_evidence {
        WaitKind::Socket
    } else {
        WaitKind::Fd
    };
    let (mut local, mut peer, mut path) = (None, None, None);
    let mut by = None;
    if let Some(pid) = live {
        match proc_fds::fd_link(pid, fd) {
            Ok(FdLink::Socket(inode)) => {
                kind = WaitKind::Socket;
                let tables = net_tables(session, pid, object.map(|o| o.family));
                let ends = socket_ends(pid, fd, inode, &tables);
                (local, peer) = (ends.local.clone(), ends.peer.clone());
                errors.extend(ends.problem.as_ref().map(|e| problem(t, e)));
                let (pp, e) = peer_process(session, pid, fd, inode, &ends);
                by = pp;
                errors.extend(e.map(|e| problem(t, &e)));
                // The socket object's family must be the socket's: else the fd is another
                // socket now.
                if let (Some(o), Some(family)) = (object, ends.family) {
                    if o.family != family {
                        (local, peer, by) = (None, None, None);
                        errors.push(problem(
                            t,
                            &format!(
                                "fd {fd} is a family {family} socket now, not the family {} socket its object names: it was closed and reused",
                                o.family
                            ),
                        ));
                    }
                }
            }
            Ok(link @ (FdLink::Pipe(_) | FdLink::Path(_))) if socket_evidence => {
                errors.push(problem(
                    t,
                    &format!(
                        "fd {fd} is {} now, not the socket {}: it was closed and reused",
                        link_words(&link),
                        if object.is_some() {
                            "its socket object names"
                        } else {
                            "the system call takes"
                        }
                    ),
                ));
            }
            Ok(FdLink::Pipe(_)) => kind = WaitKind::Pipe,
            Ok(FdLink::Path(p)) => {
                kind = WaitKind::File;
                path = Some(p);
            }
            Ok(FdLink::AnonInode(_) | FdLink::Other(_)) => {}
            Err(e) => errors.push(problem(t, &e)),
        }
        if (local.is_some() || peer.is_some() || path.is_some() || kind != WaitKind::Fd)
            && !still_in(session, t, call, &mut errors)
        {
            (local, peer, path, by) = (None, None, None, None);
            kind = if socket_evidence {
                WaitKind::Socket
            } else {
                WaitKind::Fd
            };
        }
    }
    let direction = dir.and_then(|d| d.name(kind));
    let on = if kind == WaitKind::Socket {
        WaitsOn::Socket {
            fd: Some(fd),
            direction,
            local,
            peer,
            peer_process: by,
        }
    } else {
        WaitsOn::Fd {
            fd: Some(fd),
            direction,
            path,
        }
    };
    let mut w = waiting(kind, on);
    if let Some(o) = object {
        w.object = Some(o.object);
        w.type_name = snap.type_of(o.object).ok().map(|t| t.name.clone());
    }
    (Some(w), errors)
}

/// Fills in the `local` and `peer` of `w`, a wait on a socket whose fd memory showed (a
/// gevent greenlet's cooperative socket), from /proc where the target is a live local
/// process; what could not be read, as errors. Nothing changes for other sources or kinds.
pub fn socket_addresses(session: &Session, w: &mut Waiting) -> Vec<ErrorReport> {
    let mut errors = Vec::new();
    let Some(pid) = live_pid(session) else {
        return errors;
    };
    let Some(WaitsOn::Socket {
        fd: Some(fd),
        local,
        peer,
        peer_process: by,
        ..
    }) = w.on.as_mut()
    else {
        return errors;
    };
    let what = |e: String| ErrorReport {
        address: 0,
        what: format!("socket {:#x}: {e}", w.object.unwrap_or(0)),
    };
    match proc_fds::fd_link(pid, *fd) {
        Ok(FdLink::Socket(inode)) => {
            let ends = socket_ends(pid, *fd, inode, &net_tables(session, pid, None));
            let (pp, e) = peer_process(session, pid, *fd, inode, &ends);
            (*local, *peer, *by) = (ends.local, ends.peer, pp);
            errors.extend(ends.problem.map(what));
            errors.extend(e.map(what));
        }
        Ok(link) => errors.push(what(format!(
            "fd {fd} is {} now, not the socket its object names: it was closed and reused",
            link_words(&link)
        ))),
        Err(e) => errors.push(what(e)),
    }
    errors
}

/// The pid of the target when it is a live process of this machine, whose /proc may be read.
fn live_pid(session: &Session) -> Option<u32> {
    match session.target.kind {
        SourceKind::Live | SourceKind::Debugger => session.target.pid,
        SourceKind::Core => None,
    }
}

/// The net tables of process `pid`, each read when first looked through, once per stop.
struct Tables<'a> {
    session: &'a Session,
    pid: u32,
    /// The tables the socket can be in (its object's family), else all, in
    /// [`proc_fds::TABLES`]' order.
    only: Option<i32>,
}

impl<'a> Tables<'a> {
    fn table(&self, i: usize) -> &'a NetTables {
        let (s, pid) = (self.session, self.pid);
        once(&s.net_tables[i], || {
            NetTables::read_one(pid, proc_fds::TABLES[i])
        })
    }

    /// The tables to look through, read as they are reached.
    fn each(&self) -> impl Iterator<Item = &'a NetTables> + '_ {
        (0..proc_fds::TABLES.len())
            .filter(|&i| {
                self.only
                    .is_none_or(|f| family_has_table(f, proc_fds::TABLES[i]))
            })
            .map(|i| self.table(i))
    }

    /// The socket with this inode, from the first table that lists it.
    fn get(&self, inode: u64) -> Option<&'a SocketEnds> {
        self.each().find_map(|t| t.get(inode))
    }

    /// The unix table alone (a unix socket's peer).
    fn unix(&self) -> &'a NetTables {
        self.table(proc_fds::TABLES.len() - 1)
    }
}

/// The net tables of process `pid`, for a socket of `family` where its object says.
fn net_tables(session: &Session, pid: u32, family: Option<i32>) -> Tables<'_> {
    Tables {
        session,
        pid,
        only: family,
    }
}

/// An error entry of thread `t`.
fn problem(t: &ThreadReport, what: &str) -> ErrorReport {
    ErrorReport {
        address: 0,
        what: format!("thread {}: {what}", crate::session::report::thread_label(t)),
    }
}

fn link_words(link: &FdLink) -> String {
    match link {
        FdLink::Socket(i) => format!("socket {i}"),
        FdLink::Pipe(i) => format!("pipe {i}"),
        FdLink::Path(p) => format!("the file {p}"),
        FdLink::AnonInode(a) => format!("anon_inode:{a}"),
        FdLink::Other(o) => o.clone(),
    }
}

/// A socket's two ends, its family, and what went wrong finding them.
struct Ends {
    local: Option<String>,
    peer: Option<String>,
    /// `AF_UNIX` 1, `AF_INET` 2, `AF_INET6` 10, where known.
    family: Option<i32>,
    problem: Option<String>,
}

/// The two ends of socket `inode`, fd `fd` of live process `pid`: from a copy of the fd
/// ([`proc_fds::socket_names`]: exact, and no walk of the kernel's tables), else from the net
/// tables (a kernel before 5.6, a process we may read but not copy an fd of), where a unix
/// socket's peer comes from the kernel's socket diagnosis.
fn socket_ends(pid: u32, fd: i64, inode: u64, tables: &Tables) -> Ends {
    let copied = match proc_fds::socket_names(pid, fd, inode) {
        Ok(names) => {
            return Ends {
                local: names.local,
                peer: names.peer,
                family: Some(names.family),
                problem: None,
            }
        }
        Err(e) => e,
    };
    let Some(ends) = tables.get(inode) else {
        return Ends {
            local: None,
            peer: None,
            family: None,
            problem: Some(format!(
                "{}; {copied}",
                not_in_tables(pid, fd, inode, tables)
            )),
        };
    };
    let mut peer = ends.peer.clone();
    let mut problem = None;
    if ends.table == "unix" {
        if !unix_diag::same_net_namespace(pid) {
            problem = Some(format!(
                "fd {fd}: unix socket {inode}: its peer is not shown (another network namespace)"
            ));
        } else {
            // A connection not accepted yet: its peer's name is the listener's, whose queue
            // holds it (net/unix/af_unix.c `unix_stream_connect` gives the embryo socket the
            // listener's address).
            let other = match unix_diag::unix_peer(inode) {
                Ok(p) if p.inode == Some(0) => Ok(once(
                    &tables.session.unix_listeners,
                    unix_diag::unix_listeners,
                )
                .listener_of(inode)),
                Ok(p) => Ok(p.inode),
                Err(e) => Err(e),
            };
            match other {
                Ok(Some(other)) => match tables.unix().get(other) {
                    Some(e) => peer = e.local.clone(),
                    None => {
                        problem = Some(format!(
                            "fd {fd}: the peer of unix socket {inode}, socket {other}, is not in /proc/{pid}/net/unix"
                        ))
                    }
                },
                Ok(None) => {}
                Err(e) => problem = Some(format!("fd {fd}: {e}")),
            }
        }
    }
    Ends {
        local: ends.local.clone(),
        peer,
        family: table_family(ends.table),
        problem,
    }
}

/// The family of the sockets net table `table` lists.
fn table_family(table: &str) -> Option<i32> {
    match table {
        "unix" => Some(1),
        "tcp" | "udp" => Some(2),
        "tcp6" | "udp6" => Some(10),
        _ => None,
    }
}

/// Whether a socket of family `family` (`AF_UNIX` 1, `AF_INET` 2, `AF_INET6` 10) is listed
/// in net table `table`; any other family is in none of them.
fn family_has_table(family: i32, table: &str) -> bool {
    match family {
        1 => table == "unix",
        2 => matches!(table, "tcp" | "udp"),
        10 => matches!(table, "tcp6" | "udp6"),
        _ => false,
    }
}

/// Why a socket's addresses are missing: its inode is in none of the tables.
fn not_in_tables(pid: u32, fd: i64, inode: u64, tables: &Tables) -> String {
    let names: Vec<&str> = proc_fds::TABLES
        .iter()
        .copied()
        .filter(|n| tables.only.is_none_or(|f| family_has_table(f, n)))
        .collect();
    let mut s = format!(
        "fd {fd}: socket {inode} is in none of /proc/{pid}/net/{{{}}}",
        names.join(",")
    );
    let unreadable: Vec<String> = tables.each().flat_map(|t| t.unreadable.clone()).collect();
    if !unreadable.is_empty() {
        s.push_str(&format!(" ({})", unreadable.join("; ")));
    }
    let cut: Vec<&str> = tables.each().flat_map(|t| t.cut.clone()).collect();
    if !cut.is_empty() {
        s.push_str(&format!(" ({} cut at the size limit)", cut.join(", ")));
    }
    s
}

/// How many times, 1 ms apart, a thread that `pid --native`'s stop found in a call is looked
/// for back in it (see [`still_in`]).
const BACK_IN_CALL_TRIES: u32 = 50;

/// Whether thread `t` of a live process is still in `call` after /proc was read (a process
/// read live is not stopped: a call that ended may have freed its fd or reaped its child). An
/// error says so when it is not. Other sources are stopped: always true.
///
/// A call that `pid --native`'s stop found (its registers) was interrupted by that stop: the
/// thread goes back into it when it is next scheduled, which on a busy machine can be
/// milliseconds later (/proc shows it running until then), and the kernel resumes a call
/// that counts its time left (poll, a futex wait with a timeout, nanosleep) as
/// `restart_syscall`.
fn still_in(
    session: &Session,
    t: &ThreadReport,
    call: Syscall,
    errors: &mut Vec<ErrorReport>,
) -> bool {
    if session.target.kind != SourceKind::Live {
        return true;
    }
    let (Some(pid), Some(lwp)) = (session.target.pid, t.native_id) else {
        return true;
    };
    let stopped = session.stopped_syscall(lwp).is_some();
    let restart = |nr: u64| session.target.arch.syscall_name(nr) == Some("restart_syscall");
    for _ in 0..if stopped { BACK_IN_CALL_TRIES } else { 1 } {
        match proc_syscall(pid, lwp) {
            Some(ProcSyscall::In { nr, args }) if nr == call.nr && args == call.args => {
                return true
            }
            Some(ProcSyscall::In { nr, .. }) if stopped && restart(nr) => return true,
            Some(ProcSyscall::Running) if stopped => {
                std::thread::sleep(std::time::Duration::from_millis(1))
            }
            _ => break,
        }
    }
    errors.push(problem(
        t,
        "left its system call while /proc was read: what it waited on is not given",
    ));
    false
}

/// What `call`'s arguments say (a call of `arch`; `snap` for a poll's array).
fn call_says(arch: Arch, snap: &Snapshot, call: Syscall) -> CallSays {
    let Some(name) = arch.syscall_name(call.nr) else {
        return CallSays::Other;
    };
    if let Some(&(_, dir, socket)) = FD_CALLS.iter().find(|c| c.0 == name) {
        // The kernel reads an fd as an int.
        let fd = call.args[0] as u32 as i32;
        return if fd >= 0 {
            CallSays::Fd {
                fd: i64::from(fd),
                dir,
                socket,
            }
        } else {
            CallSays::Other
        };
    }
    match name {
        "poll" | "ppoll" => {
            poll_fd(snap, call.args[0], call.args[1]).map_or(CallSays::Polls, |(fd, dir)| {
                CallSays::Fd {
                    fd,
                    dir,
                    socket: false,
                }
            })
        }
        n if POLL_CALLS.contains(&n) => CallSays::Polls,
        "wait4" => {
            let pid = i64::from(call.args[0] as u32 as i32);
            CallSays::Child((pid > 0).then_some(pid))
        }
        "waitid" => {
            let id = i64::from(call.args[1] as u32 as i32);
            CallSays::Child((call.args[0] as u32 as u64 == P_PID && id > 0).then_some(id))
        }
        _ => CallSays::Other,
    }
}

/// The one fd a `poll` of `nfds` entries at `fds` waits on, and its direction (None when it
/// waits to read and write both); None when the array names several fds, none, no events, or
/// more than [`MAX_POLL_FDS`] entries, or cannot be read.
fn poll_fd(snap: &Snapshot, fds: u64, nfds: u64) -> Option<(i64, Option<Dir>)> {
    if nfds == 0 || nfds > MAX_POLL_FDS {
        return None;
    }
    let len = nfds * POLLFD_SIZE;
    let bytes = snap.mem.read_vec(fds, len, len).ok()?;
    let mut one: Option<i32> = None;
    let mut events = 0u16;
    for e in bytes.chunks_exact(POLLFD_SIZE as usize) {
        let fd = i32::from_le_bytes([e[0], e[1], e[2], e[3]]);
        // A negative fd is an entry poll skips.
        if fd < 0 {
            continue;
        }
        if one.is_some_and(|f| f != fd) {
            return None;
        }
        one = Some(fd);
        events |= u16::from_le_bytes([e[4], e[5]]);
    }
    // No events at all: an entry only errors wake, or zeros where a core lacks the page (gdb
    // 13's gcore writes a thread stack it failed to read as zeros): not a wait on that fd.
    if events == 0 {
        return None;
    }
    let dir = match (events & POLL_READ != 0, events & POLL_WRITE != 0) {
        (true, false) => Some(Dir::In),
        (false, true) => Some(Dir::Out),
        _ => None,
    };
    Some((i64::from(one?), dir))
}

/// The innermost Python frame of the decoded thread of `t`, when it is the report's first
/// Python frame.
fn innermost_frame<'a>(session: &'a Session, t: &ThreadReport) -> Option<&'a PyFrame> {
    let d = session
        .threads()
        .iter()
        .find(|d| Some(d.info.addr) == t.thread_state && Some(d.info.thread_id) == t.thread_id)?;
    let FrameItem::Python(p) = d.walk.items.first()? else {
        return None;
    };
    let first = t.frames.iter().find(|f| f.kind == FrameKind::Python)?;
    (first.address == Some(p.addr)).then_some(p)
}

/// A socket method the frame `p` is calling.
#[derive(Clone, Copy, Debug)]
struct ObjectSays {
    /// The socket object the program called (a `socket.socket`).
    object: u64,
    /// Its `sock_fd`; None once closed.
    fd: Option<i64>,
    /// Its `sock_family`.
    family: i32,
    dir: Option<Dir>,
}

/// The call of a socket method on `p`'s value stack (the lowest: the live one), and what
/// its socket says.
fn socket_call(snap: &Snapshot, p: &PyFrame) -> Option<ObjectSays> {
    let slots = snap.own_value_stack(p, None);
    let methods: Vec<&str> = SOCKET_METHODS.iter().map(|m| m.0).collect();
    let call = snap.socket_calls(&slots, &methods).into_iter().next()?;
    let sock = snap.socket_object(call.sock).ok()?;
    Some(ObjectSays {
        object: call.sock,
        fd: sock.fd,
        family: sock.family,
        dir: Dir::of_method(&call.method),
    })
}

/// The socket `p` is a method of (its `self`, or the real socket it wraps), with no
/// direction: the call says it.
fn self_socket(snap: &Snapshot, p: &PyFrame) -> Option<ObjectSays> {
    let this = snap.local_object(p, "self").ok()??;
    let sock = snap.socket_object(snap.real_socket(this)?).ok()?;
    Some(ObjectSays {
        object: this,
        fd: sock.fd,
        family: sock.family,
        dir: None,
    })
}

#[cfg(test)]
mod tests;

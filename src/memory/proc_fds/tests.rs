use super::*;

const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0000000000000000 100 0 0 10 0
   1: 0100007F:9CBA 0100007F:1538 01 00000000:00000000 00:00000000 00000000  1000        0 4243 1 0000000000000000 20 4 30 10 -1
";
const TCP6: &str = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:0050 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 5000 1 0000000000000000 100 0 0 10 0
   1: 0000000000000000FFFF00000100007F:C350 0000000000000000FFFF00000100007F:0050 01 00000000:00000000 00:00000000 00000000     0        0 5001 1 0000000000000000 100 0 0 10 0
   2: B80D0120000000000000000001000000:0016 B80D0120000000000000000002000000:D431 01 00000000:00000000 00:00000000 00000000     0        0 5002 1 0000000000000000 100 0 0 10 0
";
const UNIX: &str = "Num       RefCount Protocol Flags    Type St Inode Path
0000000000000000: 00000002 00000000 00010000 0001 01 6000 /run/dbus/system_bus_socket
0000000000000000: 00000003 00000000 00000000 0001 03 6001
0000000000000000: 00000002 00000000 00010000 0001 01 6002 @/tmp/.X11-unix/X0
0000000000000000: 00000002 00000000 00010000 0001 01 6003 /tmp/with space.sock
";

#[test]
fn the_other_end_of_a_connection_is_the_swapped_pair() {
    let mut t = NetTables::default();
    assert!(!t.add("tcp", TCP));
    assert!(!t.add("tcp6", TCP6));
    // 127.0.0.1:40122 -> 127.0.0.1:5432 (inode 4243): its other end would be listed as
    // 127.0.0.1:5432 -> 127.0.0.1:40122; asked the other way round, it is 4243.
    assert_eq!(
        t.tcp_with_ends("127.0.0.1:40122", "127.0.0.1:5432"),
        Some((4243, Some(1)))
    );
    assert_eq!(t.tcp_with_ends("127.0.0.1:5432", "127.0.0.1:40122"), None);
    // tcp6's IPv4-mapped connection 127.0.0.1:50000 -> 127.0.0.1:80 (inode 5001), found
    // by the IPv4 form its peer in `tcp` has, and by its own.
    assert_eq!(
        t.tcp_with_ends("127.0.0.1:50000", "127.0.0.1:80"),
        Some((5001, Some(1)))
    );
    assert_eq!(
        t.tcp_with_ends("[::ffff:127.0.0.1]:50000", "[::ffff:127.0.0.1]:80"),
        Some((5001, Some(1)))
    );
    // Who takes a connection to 127.0.0.1:8080: the listener bound there; to port 80,
    // tcp6's `[::1]:80` listener is not on 127.0.0.1; none on 5432.
    assert_eq!(t.tcp_listeners_of("127.0.0.1:8080"), vec![4242]);
    assert_eq!(t.tcp_listeners_of("[::1]:80"), vec![5000]);
    assert_eq!(t.tcp_listeners_of("127.0.0.1:80"), Vec::<u64>::new());
    assert_eq!(t.tcp_listeners_of("127.0.0.1:5432"), Vec::<u64>::new());
    // A completed connection no process has accepted yet (inode 0) is found, as such.
    let mut q = NetTables::default();
    q.add(
        "tcp",
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 77 1 0000000000000000 100 0 0 10 0
   1: 0100007F:1F90 0100007F:9CBA 01 00000000:00000000 00:00000000 00000000  1000        0 0 1 0000000000000000 20 4 30 10 -1
",
    );
    assert_eq!(
        q.tcp_with_ends("127.0.0.1:8080", "127.0.0.1:40122"),
        Some((0, Some(1)))
    );
    assert_eq!(q.get(0), None);
    assert_eq!(q.tcp_listeners_of("127.0.0.1:8080"), vec![77]);
    // A listening socket has no peer: no pair; nor do unix paths.
    assert_eq!(t.tcp_with_ends("127.0.0.1:8080", "0.0.0.0:0"), None);
    assert_eq!(t.tcp_with_ends("/run/a.sock", "/run/b.sock"), None);
    assert!(is_loopback("127.0.0.1:5432"));
    assert!(is_loopback("127.3.2.1:1"));
    assert!(is_loopback("[::1]:80"));
    assert!(is_loopback("[::ffff:127.0.0.1]:80"));
    assert!(!is_loopback("10.0.0.5:5432"));
    assert!(!is_loopback("[2001:db8::1]:22"));
    assert!(!is_loopback("/run/app.sock"));
    assert!(!is_loopback("@name"));
}

#[test]
fn fd_links() {
    assert_eq!(FdLink::parse("socket:[123]"), FdLink::Socket(123));
    assert_eq!(FdLink::parse("pipe:[9]"), FdLink::Pipe(9));
    assert_eq!(
        FdLink::parse("anon_inode:[eventfd]"),
        FdLink::AnonInode("[eventfd]".into())
    );
    assert_eq!(
        FdLink::parse("/tmp/x (deleted)"),
        FdLink::Path("/tmp/x (deleted)".into())
    );
    for odd in [
        "socket:[]",
        "socket:[x]",
        "socket:123",
        "pipe:[-1]",
        "net:[4026531840]",
        "",
    ] {
        assert!(matches!(FdLink::parse(odd), FdLink::Other(_)), "{odd:?}");
    }
    assert!(fd_link(std::process::id(), -1).is_err());
    assert!(fd_link(std::process::id(), 1 << 40).is_err());
    assert!(fd_link(std::process::id(), 1_000_000).is_err());
}

#[test]
fn own_fds_are_read() {
    use std::os::fd::AsRawFd;
    let mut fds = [0i32; 2];
    // SAFETY: pipe writes two descriptors into the array it is given.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    let pid = std::process::id();
    let links = (fd_link(pid, fds[0].into()), fd_link(pid, fds[1].into()));
    // SAFETY: both are ours, closed once.
    unsafe {
        libc::close(fds[0]);
        libc::close(fds[1]);
    }
    let (Ok(FdLink::Pipe(a)), Ok(FdLink::Pipe(b))) = links else {
        panic!("not pipes: {links:?}");
    };
    assert_eq!(a, b);
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let FdLink::Socket(inode) = fd_link(pid, l.as_raw_fd().into()).unwrap() else {
        panic!("not a socket");
    };
    let t = NetTables::read(pid);
    let e = t.get(inode).expect("listening socket in /proc/net/tcp");
    assert_eq!(e.local.as_deref(), Some(&*format!("127.0.0.1:{port}")));
    assert_eq!(e.peer, None);
    assert!(e.listening());
}

#[test]
fn inet_tables() {
    let mut t = NetTables::default();
    assert!(!t.add("tcp", TCP));
    assert!(!t.add("tcp6", TCP6));
    let e = t.get(4242).unwrap();
    assert_eq!(
        (e.local.as_deref(), e.peer.as_deref(), e.table),
        (Some("127.0.0.1:8080"), None, "tcp")
    );
    assert!(e.listening());
    let e = t.get(4243).unwrap();
    assert_eq!(
        (e.local.as_deref(), e.peer.as_deref(), e.state),
        (Some("127.0.0.1:40122"), Some("127.0.0.1:5432"), Some(1))
    );
    assert!(!e.listening());
    assert_eq!(t.get(5000).unwrap().local.as_deref(), Some("[::1]:80"));
    let e = t.get(5001).unwrap();
    assert_eq!(
        (e.local.as_deref(), e.peer.as_deref()),
        (
            Some("[::ffff:127.0.0.1]:50000"),
            Some("[::ffff:127.0.0.1]:80")
        )
    );
    let e = t.get(5002).unwrap();
    assert_eq!(
        (e.local.as_deref(), e.peer.as_deref()),
        (Some("[2001:db8::1]:22"), Some("[2001:db8::2]:54321"))
    );
    assert_eq!(t.len(), 5);
}

#[test]
fn unix_table() {
    let mut t = NetTables::default();
    t.add("unix", UNIX);
    assert_eq!(
        t.get(6000).unwrap().local.as_deref(),
        Some("/run/dbus/system_bus_socket")
    );
    assert_eq!(t.get(6001).unwrap().local, None);
    assert_eq!(t.get(6001).unwrap().state, Some(3));
    assert_eq!(
        t.get(6002).unwrap().local.as_deref(),
        Some("@/tmp/.X11-unix/X0")
    );
    assert_eq!(
        t.get(6003).unwrap().local.as_deref(),
        Some("/tmp/with space.sock")
    );
    assert!(t.get(6003).unwrap().peer.is_none());
    assert!(!t.get(6000).unwrap().listening());
}

#[test]
fn garbage_lines_are_skipped() {
    let garbage = [
        "",
        "   ",
        "0:",
        "0: 0100007F:1F90",
        "0: 0100007F:1F90 00000000:0000 0A",
        "0: 0100007G:1F90 00000000:0000 0A 0:0 0:0 0 0 0 77",
        "0: 0100007F:1F9 00000000:0000 0A 0:0 0:0 0 0 0 77",
        "0: 100007F:1F90 00000000:0000 0A 0:0 0:0 0 0 0 77",
        "0: 0100007F 00000000:0000 0A 0:0 0:0 0 0 0 77",
        "0: 0100007F:1F90 00000000:0000 ZZ 0:0 0:0 0 0 0 77",
        "0: 0100007F:1F90 00000000:0000 0A 0:0 0:0 0 0 0 -5",
        "0: 0100007F:1F90 00000000:0000 0A 0:0 0:0 0 0 0 99999999999999999999999",
        "0: +100007F:1F90 00000000:0000 0A 0:0 0:0 0 0 0 77",
        "x 0100007F:1F90 00000000:0000 0A 0:0 0:0 0 0 0 77",
        "0: 0100007F:1F90 00000000:0000 0A 0:0 0:0 0 0 0 0",
        "0: ééééééé:1F90 00000000:0000 0A 0:0 0:0 0 0 0 77",
        "\u{0}\u{0}\u{0}",
    ];
    let mut t = NetTables::default();
    let text = format!("header\n{}\n", garbage.join("\n"));
    t.add("tcp", &text);
    t.add("udp", &text);
    assert!(t.is_empty(), "{:?}", t.get(77));
    // v6: each of the four words must be 8 hex digits; a multibyte char is no digit.
    let v6 = "header\n 0: 0000000000000000000000000100000:0050 00000000000000000000000000000000:0000 0A 0:0 0:0 0 0 0 88\n 0: 000000000000000000000000010000é0:0050 00000000000000000000000000000000:0000 0A 0:0 0:0 0 0 0 88\n";
    t.add("tcp6", v6);
    assert!(t.is_empty());
    let unix =
        "h\n0000: 1 2 3 4 5\n0000: 1 2 3 4 5 x /p\n0000 1 2 3 4 5 6 /p\n0000: 1 2 3 4 ZZ 6 /p\n";
    t.add("unix", unix);
    assert!(t.is_empty());
    // A table of another name adds nothing.
    t.add("raw", TCP);
    assert!(t.is_empty());
}

#[test]
fn huge_tables_are_cut() {
    let line = "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1 1\n";
    let text = format!("header\n{}", line.repeat(MAX_NET_TABLE_LINES + 10));
    let mut t = NetTables::default();
    assert!(t.add("tcp", &text));
    assert_eq!(t.len(), 1);
    // A file longer than its cap is read up to it.
    let dir = std::env::temp_dir().join(format!("pyunwind-proc-fds-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("big");
    std::fs::write(&f, vec![b'a'; 10_000]).unwrap();
    let (text, full) = read_bounded(f.to_str().unwrap(), 100).unwrap();
    assert_eq!((text.len(), full), (100, true));
    let (text, full) = read_bounded(f.to_str().unwrap(), 10_000).unwrap();
    assert_eq!((text.len(), full), (10_000, false));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn command_lines() {
    assert_eq!(
        parse_cmdline(b"sleep\x001000\x00").as_deref(),
        Some("sleep 1000")
    );
    assert_eq!(parse_cmdline(b"a\x00\x00b").as_deref(), Some("a  b"));
    assert_eq!(parse_cmdline(b""), None);
    assert_eq!(parse_cmdline(b"\x00"), None);
    assert_eq!(
        parse_cmdline(b"\xff\xfe").as_deref(),
        Some("\u{fffd}\u{fffd}")
    );
    let long = vec![b'x'; 100_000];
    assert_eq!(
        parse_cmdline(&long).map(|s| s.len()),
        Some(MAX_CMDLINE_BYTES as usize)
    );
    let me = cmdline(std::process::id()).unwrap();
    assert!(!me.is_empty());
    assert!(cmdline(u32::MAX).is_err());
}

#[test]
fn children_are_checked() {
    let mut c = std::process::Command::new("sleep")
        .arg("100")
        .spawn()
        .unwrap();
    let me = std::process::id();
    assert_eq!(child_process(me, c.id().into()), Ok(c.id()));
    // Until it has exec'd, the child's command line is its parent's.
    let mut command = Err(String::new());
    for _ in 0..200 {
        command = cmdline(c.id());
        if command.as_deref() == Ok("sleep 100") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(command.as_deref(), Ok("sleep 100"));
    // Not a child of ours: pid 1, a negative or absurd pid.
    assert!(child_process(me, 1).is_err());
    assert!(child_process(me, -1).is_err());
    assert!(child_process(me, 1 << 40).is_err());
    c.kill().unwrap();
    c.wait().unwrap();
    assert!(child_process(me, c.id().into()).is_err());
}
#[test]
fn sockaddrs_read_as_the_net_tables_print_them() {
    let mut v4 = vec![0u8; 16];
    v4[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
    v4[2..4].copy_from_slice(&5432u16.to_be_bytes());
    v4[4..8].copy_from_slice(&[127, 0, 0, 1]);
    assert_eq!(sockaddr_text(&v4).as_deref(), Some("127.0.0.1:5432"));
    let mut any = v4.clone();
    any[2..8].fill(0);
    assert_eq!(sockaddr_text(&any), None);
    let mut v6 = vec![0u8; 28];
    v6[..2].copy_from_slice(&(libc::AF_INET6 as u16).to_ne_bytes());
    v6[2..4].copy_from_slice(&80u16.to_be_bytes());
    v6[23] = 1;
    assert_eq!(sockaddr_text(&v6).as_deref(), Some("[::1]:80"));
    let unix = |p: &[u8]| {
        let mut b = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
        b.extend_from_slice(p);
        sockaddr_text(&b)
    };
    assert_eq!(unix(b"/tmp/s.sock\0").as_deref(), Some("/tmp/s.sock"));
    assert_eq!(unix(b"\0name\0x").as_deref(), Some("@name@x"));
    assert_eq!(unix(b""), None);
    for bad in [&[][..], &[2u8][..], &v4[..5], &v6[..20]] {
        assert_eq!(sockaddr_text(bad), None);
    }
}

#[test]
fn a_socket_of_our_own_is_named_by_a_copy_of_its_fd() {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::MetadataExt;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let fd = client.as_raw_fd();
    let inode = std::fs::metadata(format!("/proc/self/fd/{fd}"))
        .unwrap()
        .ino();
    let names = socket_names(std::process::id(), fd.into(), inode).unwrap();
    assert_eq!(names.local, Some(client.local_addr().unwrap().to_string()));
    assert_eq!(names.peer, Some(listener.local_addr().unwrap().to_string()));
    assert_eq!(names.family, libc::AF_INET);
    // Another inode: the fd was reused.
    assert!(socket_names(std::process::id(), fd.into(), inode + 1).is_err());
}

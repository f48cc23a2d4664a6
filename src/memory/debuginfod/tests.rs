//! Unit tests of the debuginfod client, against servers on 127.0.0.1 in this process.

use super::*;
use std::io::BufRead;
use std::net::TcpListener;

fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<PathBuf> {
    let map: HashMap<String, PathBuf> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), PathBuf::from(v)))
        .collect();
    move |k| map.get(k).cloned()
}

#[test]
fn no_urls_is_off_and_the_cache_follows_elfutils_defaults() {
    assert_eq!(Config::from_vars(vars(&[("HOME", "/h")]), false), None);
    assert_eq!(
        Config::from_vars(vars(&[("HOME", "/h"), ("DEBUGINFOD_URLS", " ")]), false),
        None
    );
    let c = Config::from_vars(
        vars(&[
            ("HOME", "/h"),
            (
                "DEBUGINFOD_URLS",
                "https://a.example/ ima:enforcing  http://127.0.0.1:8002",
            ),
        ]),
        false,
    )
    .unwrap();
    assert_eq!(c.urls, ["https://a.example", "http://127.0.0.1:8002"]);
    assert_eq!(c.cache, PathBuf::from("/h/.cache/debuginfod_client"));
    assert_eq!(c.timeout, Some(Duration::from_secs(90)));
    assert_eq!((c.max_time, c.max_size), (None, MAX_DOWNLOAD_BYTES));
    let c = Config::from_vars(
        vars(&[
            ("HOME", "/h"),
            ("XDG_CACHE_HOME", "/x"),
            ("DEBUGINFOD_URLS", "http://s"),
            ("DEBUGINFOD_TIMEOUT", "0"),
            ("DEBUGINFOD_MAXTIME", "30"),
            ("DEBUGINFOD_MAXSIZE", "1000"),
        ]),
        false,
    )
    .unwrap();
    assert_eq!(c.cache, PathBuf::from("/x/debuginfod_client"));
    assert_eq!(c.timeout, None);
    assert_eq!(c.max_time, Some(Duration::from_secs(30)));
    assert_eq!(c.max_size, 1000);
    let c = Config::from_vars(
        vars(&[
            ("XDG_CACHE_HOME", "/x"),
            ("DEBUGINFOD_CACHE_PATH", "/c"),
            ("DEBUGINFOD_URLS", "http://s"),
            ("DEBUGINFOD_TIMEOUT", "7"),
        ]),
        false,
    )
    .unwrap();
    assert_eq!(c.cache, PathBuf::from("/c"));
    assert_eq!(c.timeout, Some(Duration::from_secs(7)));
}

#[test]
fn names_of_a_live_process_s_files_lead_back_to_the_mapped_path() {
    assert_eq!(
        shown_name("/proc/12/root/usr/lib/libc.so.6"),
        "/usr/lib/libc.so.6"
    );
    assert_eq!(shown_name("/usr/bin/python3.11"), "/usr/bin/python3.11");
}

/// A server on 127.0.0.1 that answers each connection with `respond(path)`, or never
/// (None: it reads the request and holds the connection open).
fn serve(respond: impl Fn(&str) -> Option<Vec<u8>> + Send + 'static) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let mut line = String::new();
            let mut reader = std::io::BufReader::new(conn.try_clone().unwrap());
            let _ = reader.read_line(&mut line);
            let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
            loop {
                let mut h = String::new();
                if reader.read_line(&mut h).map_or(true, |n| n == 0) || h == "\r\n" {
                    break;
                }
            }
            match respond(&path) {
                Some(bytes) => {
                    let _ = conn.write_all(&bytes);
                }
                None => held.push(conn),
            }
        }
    });
    url
}

fn ok(body: &[u8]) -> Vec<u8> {
    let mut r = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

const NOT_FOUND: &[u8] =
    b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

/// This test program's own file and build-id (the linker gives it one).
fn an_elf() -> (Vec<u8>, Vec<u8>) {
    let exe = std::env::current_exe().unwrap();
    let id = file_build_id(&exe).expect("the test binary has a build-id");
    (std::fs::read(&exe).unwrap(), id)
}

fn client(urls: &[&str], cache: &Path, timeout_s: u64) -> Client {
    Client::new(Config {
        urls: urls.iter().map(|u| u.to_string()).collect(),
        cache: cache.to_path_buf(),
        timeout: Some(Duration::from_secs(timeout_s)),
        max_time: None,
        max_size: MAX_DOWNLOAD_BYTES,
        progress: false,
    })
}

fn temp_cache(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pyunwind-debuginfod-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn a_fetched_file_is_checked_cached_read_only_and_fetched_once() {
    let (elf, id) = an_elf();
    let asked = Arc::new(AtomicU64::new(0));
    let counter = asked.clone();
    let want = format!("/buildid/{}/debuginfo", hex(&id));
    let url = serve(move |path| {
        counter.fetch_add(1, Ordering::SeqCst);
        Some(if path == want {
            ok(&elf)
        } else {
            NOT_FOUND.to_vec()
        })
    });
    let cache = temp_cache("hit");
    let c = client(&[&url], &cache, 10);
    let path = c
        .fetch(&id, Artifact::Debuginfo, "/usr/lib/libx.so")
        .unwrap();
    assert_eq!(path, cache.join(hex(&id)).join("debuginfo"));
    assert_eq!(file_build_id(&path).as_deref(), Some(&id[..]));
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o400);
    // Nothing else is left in the build-id's directory.
    assert_eq!(
        std::fs::read_dir(path.parent().unwrap()).unwrap().count(),
        1
    );
    assert_eq!(c.fetch(&id, Artifact::Debuginfo, "/x").unwrap(), path);
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    // A new run finds it in the cache without asking.
    let c = client(&[&url], &cache, 10);
    assert_eq!(c.fetch(&id, Artifact::Debuginfo, "/x").unwrap(), path);
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    // A missing one is asked for once per run.
    let other = [1u8; 20];
    let e = c.fetch(&other, Artifact::Executable, "/x").unwrap_err();
    assert_eq!(e, format!("{url}: not found (404)"));
    assert_eq!(c.fetch(&other, Artifact::Executable, "/x").unwrap_err(), e);
    assert_eq!(asked.load(Ordering::SeqCst), 2);
    // And leaves no record in the shared cache.
    assert!(!cache.join(hex(&other)).join("executable").exists());
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn a_file_of_another_build_is_discarded_and_the_next_server_asked() {
    let (elf, id) = an_elf();
    let wrong_id = [7u8; 20];
    let liar = serve(move |_| Some(ok(&elf)));
    let not_elf = serve(|_| Some(ok(b"not an ELF file")));
    let cache = temp_cache("wrong");
    let c = client(&[&liar, &not_elf], &cache, 10);
    let e = c.fetch(&wrong_id, Artifact::Debuginfo, "/x").unwrap_err();
    assert_eq!(
        e,
        format!(
            "{liar}: served a file with build-id {} (another build): discarded; \
             {not_elf}: served a file that is not an ELF file with a build-id: discarded",
            hex(&id)
        )
    );
    let dir = cache.join(hex(&wrong_id));
    assert_eq!(
        std::fs::read_dir(&dir).map_or(0, |d| d.count()),
        0,
        "{dir:?}"
    );
    // A wrong file already in the cache is removed, and the servers asked.
    let good = serve({
        let (elf, _) = an_elf();
        move |_| Some(ok(&elf))
    });
    let target = cache.join(hex(&[9u8; 20])).join("debuginfo");
    std::fs::create_dir_all(target.parent().unwrap()).unwrap();
    std::fs::copy(std::env::current_exe().unwrap(), &target).unwrap();
    let c = client(&[&good], &cache, 10);
    let e = c.fetch(&[9u8; 20], Artifact::Debuginfo, "/x").unwrap_err();
    assert!(e.starts_with("the cached "), "{e}");
    assert!(!target.exists());
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn a_server_that_does_not_answer_costs_one_timeout_per_run() {
    let hang = serve(|_| None);
    let cache = temp_cache("hang");
    let c = client(&[&hang], &cache, 1);
    let e = c.fetch(&[1u8; 20], Artifact::Debuginfo, "/x").unwrap_err();
    assert_eq!(
        e,
        format!("{hang}: no answer within 1 s (DEBUGINFOD_TIMEOUT)")
    );
    let e = c.fetch(&[2u8; 20], Artifact::Debuginfo, "/x").unwrap_err();
    assert_eq!(
        e,
        format!(
            "{hang}: not asked (no answer within 1 s (DEBUGINFOD_TIMEOUT) earlier in this run)"
        )
    );
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn a_server_that_trickles_costs_one_timeout() {
    // 1 KiB every 100 ms, up to 300 KiB (30 s): never a read timeout, far too slow. The
    // server says how many KiB it wrote before the client hung up: the work the trickle cost,
    // counted rather than timed.
    const KIB: usize = 300;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let slow = format!("http://{}", listener.local_addr().unwrap());
    let server = std::thread::spawn(move || {
        let Ok((mut conn, _)) = listener.accept() else {
            return 0;
        };
        let mut req = [0u8; 1024];
        let _ = std::io::Read::read(&mut conn, &mut req);
        let head = "HTTP/1.1 200 OK\r\nContent-Length: 100000000\r\n\r\n";
        let _ = conn.write_all(head.as_bytes());
        for sent in 0..KIB {
            if conn.write_all(&[0u8; 1024]).is_err() {
                return sent;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        KIB
    });
    let cache = temp_cache("slow");
    let e = client(&[&slow], &cache, 1)
        .fetch(&[4u8; 20], Artifact::Debuginfo, "/x")
        .unwrap_err();
    assert_eq!(
        e,
        format!("{slow}: slower than 100 KiB/s for 1 s (DEBUGINFOD_TIMEOUT)")
    );
    // The client hung up: the server's writes failed long before it had sent everything
    // (about a second's 10 KiB, plus what the socket buffers took after the hang-up).
    let sent = server.join().unwrap();
    assert!(sent < KIB / 2, "{sent} KiB sent");
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn a_failed_query_elfutils_recorded_is_not_repeated_within_cache_miss_s() {
    let cache = temp_cache("miss");
    let id = [3u8; 20];
    let target = cache.join(hex(&id)).join("debuginfo");
    std::fs::create_dir_all(target.parent().unwrap()).unwrap();
    std::fs::write(&target, b"").unwrap();
    let c = client(&["http://127.0.0.1:9"], &cache, 1);
    let e = c.fetch(&id, Artifact::Debuginfo, "/x").unwrap_err();
    assert!(e.starts_with("not found: a failed query 0 s ago"), "{e}");
    // cache_miss_s = 0: the record has expired, and the (closed) server is asked.
    std::fs::write(cache.join("cache_miss_s"), "0\n").unwrap();
    std::thread::sleep(Duration::from_millis(1100));
    let c = client(&["http://127.0.0.1:9"], &cache, 1);
    let e = c.fetch(&id, Artifact::Debuginfo, "/x").unwrap_err();
    assert!(e.starts_with("http://127.0.0.1:9: "), "{e}");
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn a_file_over_maxsize_is_not_downloaded() {
    let (elf, id) = an_elf();
    let url = serve(move |_| Some(ok(&elf)));
    let cache = temp_cache("size");
    let mut config = client(&[&url], &cache, 10).config;
    config.max_size = 1000;
    let e = Client::new(config)
        .fetch(&id, Artifact::Executable, "/x")
        .unwrap_err();
    assert!(
        e.contains("over the limit of 1000 (DEBUGINFOD_MAXSIZE)"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&cache);
}

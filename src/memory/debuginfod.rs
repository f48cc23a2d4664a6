//! A debuginfod client: what a module lacks, fetched by build-id over HTTP from the servers
//! every major distribution runs (`GET <server>/buildid/<hex>/debuginfo`, `.../executable`),
//! into the cache gdb and elfutils share.
//!
//! Used by the command line only: in gdb and lldb the debugger owns debug info, with its own
//! client, settings and prompts (gdb asks before it enables debuginfod), so the library fetches
//! nothing there.
//!
//! | variable | here |
//! | --- | --- |
//! | `DEBUGINFOD_URLS` | the servers, space-separated, asked in order; unset or empty: off |
//! | `DEBUGINFOD_CACHE_PATH` | the cache; default `$XDG_CACHE_HOME/debuginfod_client`, else `~/.cache/debuginfod_client` |
//! | `DEBUGINFOD_TIMEOUT` | seconds (default 90) to resolve and connect, for the response's headers, and for each read of its body, which must also average 100 KiB/s over each such period; 0 or less: none |
//! | `DEBUGINFOD_MAXTIME` | seconds a whole download may take; unset or 0: no limit |
//! | `DEBUGINFOD_MAXSIZE` | the largest file downloaded, in bytes; unset or 0: [`MAX_DOWNLOAD_BYTES`] |
//!
//! The cache holds `<cache>/<hex>/debuginfo` and `<cache>/<hex>/executable`, as elfutils
//! writes them: a download goes to a temporary file beside its name, is checked, made
//! read-only and renamed into place, so gdb, elfutils and other runs of ours never see half a
//! file. A file whose build-id is not the one asked for is never used or kept (a wrong one
//! found in the cache is removed). An empty file is elfutils' record of a failed query: within
//! its `cache_miss_s` (default 600 s) the servers are not asked again. We write no such record
//! (a time-out is not an absence), and ask for one build-id at most once per run, whatever the
//! answer: the many modules and processes of one run that share a file share its fetch.
//!
//! A server that cannot be reached, or that does not answer within the timeout, is not asked
//! again in the run: a dead server costs one timeout, not one per module.
//!
//! ```no_run
//! use pyunwind::memory::debuginfod::{Artifact, Client, Config};
//! if let Some(config) = Config::from_env() {
//!     let client = Client::new(config);
//!     let id = [0xc5u8, 0x61, 0xf3, 0xaa];
//!     match client.fetch(&id, Artifact::Debuginfo, "/usr/bin/python3.11") {
//!         Ok(path) => println!("debug file at {}", path.display()),
//!         Err(why) => println!("{}", why),
//!     }
//! }
//! ```

use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use object::Object;

use super::hex;
use super::mapped::FileBytes;

/// `DEBUGINFOD_TIMEOUT`'s default, as elfutils'.
pub const DEFAULT_TIMEOUT_SECONDS: u64 = 90;
/// The largest file fetched when `DEBUGINFOD_MAXSIZE` sets no smaller limit: the debug file of
/// a big C++ library (libtorch's) is a few GiB; a server streaming without end stops here.
pub const MAX_DOWNLOAD_BYTES: u64 = 32 << 30;
/// The longest build-id asked for (elfutils' limit): the id comes from the target's files.
const MAX_BUILD_ID_BYTES: usize = 64;
/// elfutils' default for how long a failed query it recorded stands.
const DEFAULT_CACHE_MISS_SECONDS: u64 = 600;
/// How often the progress line is redrawn.
const PROGRESS_INTERVAL: Duration = Duration::from_millis(200);
/// The body is copied to the cache file in pieces of this size.
const COPY_CHUNK_BYTES: usize = 256 << 10;
/// The slowest download kept going, averaged over each `DEBUGINFOD_TIMEOUT` seconds (elfutils
/// asks curl for the same): a server that trickles costs one timeout, as one that is silent.
const MIN_BYTES_PER_SECOND: u64 = 100 << 10;

/// What is fetched for a build-id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Artifact {
    /// The separate debug file (symbols, DWARF, `.debug_frame`).
    Debuginfo,
    /// The executable or shared library itself (a core's file that is missing here).
    Executable,
}

impl Artifact {
    /// The name in URLs and in the cache.
    pub fn name(self) -> &'static str {
        match self {
            Artifact::Debuginfo => "debuginfo",
            Artifact::Executable => "executable",
        }
    }
}

/// The client's settings, from the environment as elfutils reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub urls: Vec<String>,
    pub cache: PathBuf,
    /// None: no timeout (`DEBUGINFOD_TIMEOUT` of 0 or less).
    pub timeout: Option<Duration>,
    pub max_time: Option<Duration>,
    pub max_size: u64,
    /// Whether to draw a progress line on stderr (it is a terminal).
    pub progress: bool,
}

impl Config {
    /// From the environment; None when `DEBUGINFOD_URLS` names no server.
    pub fn from_env() -> Option<Config> {
        // SAFETY: isatty only inspects the descriptor.
        let tty = unsafe { libc::isatty(2) } == 1;
        Config::from_vars(|k| std::env::var_os(k).map(PathBuf::from), tty)
    }

    /// From the variables `var` gives (unit tests pass their own).
    pub fn from_vars(var: impl Fn(&str) -> Option<PathBuf>, progress: bool) -> Option<Config> {
        let text = |k: &str| var(k).and_then(|v| v.to_str().map(str::to_string));
        // Newer elfutils allow policy tags (`ima:enforcing`) among the URLs: not servers.
        let urls: Vec<String> = text("DEBUGINFOD_URLS")?
            .split_ascii_whitespace()
            .filter(|u| u.contains("://"))
            .map(|u| u.trim_end_matches('/').to_string())
            .collect();
        if urls.is_empty() {
            return None;
        }
        let nonempty = |k: &str| var(k).filter(|v| !v.as_os_str().is_empty());
        let cache = nonempty("DEBUGINFOD_CACHE_PATH")
            .or_else(|| nonempty("XDG_CACHE_HOME").map(|d| d.join("debuginfod_client")))
            .or_else(|| nonempty("HOME").map(|h| h.join(".cache").join("debuginfod_client")))?;
        let number = |k: &str| text(k).and_then(|v| v.trim().parse::<i64>().ok());
        let seconds = |v: i64| (v > 0).then(|| Duration::from_secs(v as u64));
        let timeout = match number("DEBUGINFOD_TIMEOUT") {
            Some(v) => seconds(v),
            None => Some(Duration::from_secs(DEFAULT_TIMEOUT_SECONDS)),
        };
        let max_size = number("DEBUGINFOD_MAXSIZE")
            .filter(|&v| v > 0)
            .map_or(MAX_DOWNLOAD_BYTES, |v| (v as u64).min(MAX_DOWNLOAD_BYTES));
        Some(Config {
            urls,
            cache,
            timeout,
            max_time: number("DEBUGINFOD_MAXTIME").and_then(seconds),
            max_size,
            progress,
        })
    }
}

/// A fetch's outcome: the file in the cache, or why there is none (one line, naming each
/// server's answer).
pub type Fetched = std::result::Result<PathBuf, String>;

/// A fetch of one (build-id, artifact), made by the first to ask; the others wait for it.
type Once = Arc<OnceLock<Fetched>>;

/// One run's client: its settings, the HTTP agent, and what was fetched or refused so far.
pub struct Client {
    config: Config,
    agent: ureq::Agent,
    fetched: Mutex<HashMap<(Vec<u8>, Artifact), Once>>,
    /// Servers that could not be reached or did not answer in time, and why.
    down: Mutex<HashMap<String, String>>,
    /// Held while a progress line is drawn, so that two downloads do not mix theirs.
    stderr: Mutex<()>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// A unique suffix for this process's temporary files.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

impl Client {
    pub fn new(config: Config) -> Client {
        let t = config.timeout;
        let agent = ureq::Agent::config_builder()
            .timeout_resolve(t)
            .timeout_connect(t)
            .timeout_send_request(t)
            .timeout_recv_response(t)
            .timeout_per_read(t)
            .timeout_per_write(t)
            .timeout_global(config.max_time)
            .user_agent(concat!("pyunwind/", env!("CARGO_PKG_VERSION")))
            .build()
            .new_agent();
        Client {
            config,
            agent,
            fetched: Mutex::new(HashMap::new()),
            down: Mutex::new(HashMap::new()),
            stderr: Mutex::new(()),
        }
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// `what` for build-id `id`, from the cache or the servers, checked against `id`; once
    /// per run for each (id, what): later calls get the first one's outcome. `module` names
    /// the file in the progress line.
    pub fn fetch(&self, id: &[u8], what: Artifact, module: &str) -> Fetched {
        let cell = {
            let mut fetched = self.fetched.lock().unwrap_or_else(|e| e.into_inner());
            fetched.entry((id.to_vec(), what)).or_default().clone()
        };
        cell.get_or_init(|| self.fetch_once(id, what, module))
            .clone()
    }

    fn fetch_once(&self, id: &[u8], what: Artifact, module: &str) -> Fetched {
        if id.is_empty() || id.len() > MAX_BUILD_ID_BYTES {
            return Err(format!("a build-id of {} bytes is not asked for", id.len()));
        }
        let dir = self.config.cache.join(hex(id));
        let target = dir.join(what.name());
        let mut notes = Vec::new();
        match cached(&target, id) {
            Cached::Hit => return Ok(target),
            Cached::Miss(age) => {
                return Err(format!(
                    "not found: a failed query {age} s ago is recorded in the cache ({}; see cache_miss_s)",
                    target.display()
                ))
            }
            Cached::Wrong(got) => {
                // Another build's file under this id: it must not name anything.
                let _ = std::fs::remove_file(&target);
                notes.push(format!(
                    "the cached {} had build-id {got} and was removed",
                    target.display()
                ));
            }
            Cached::Absent => {}
        }
        for url in &self.config.urls {
            let down = self
                .down
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(url)
                .cloned();
            if let Some(why) = down {
                notes.push(format!("{url}: not asked ({why} earlier in this run)"));
                continue;
            }
            match self.download(url, id, what, &dir, &target, module) {
                Ok(()) => return Ok(target),
                Err(Failure { why, down }) => {
                    if down {
                        self.down
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .insert(url.clone(), why.clone());
                    }
                    notes.push(format!("{url}: {why}"));
                }
            }
        }
        Err(notes.join("; "))
    }

    /// One server's copy of `what`, downloaded into the cache at `target` once checked.
    fn download(
        &self,
        url: &str,
        id: &[u8],
        what: Artifact,
        dir: &Path,
        target: &Path,
        module: &str,
    ) -> Result<(), Failure> {
        let address = format!("{url}/buildid/{}/{}", hex(id), what.name());
        let response = self
            .agent
            .get(&address)
            .call()
            .map_err(|e| self.failure(e))?;
        let announced = response
            .headers()
            .get("x-debuginfod-size")
            .and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok())
            .or_else(|| response.body().content_length());
        if let Some(size) = announced.filter(|&s| s > self.config.max_size) {
            return Err(Failure::file(format!(
                "the file is {size} bytes, over the limit of {} (DEBUGINFOD_MAXSIZE)",
                self.config.max_size
            )));
        }
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| Failure::file(format!("cannot make {}: {e}", dir.display())))?;
        let temp = dir.join(format!(
            "{}.pyunwind-{}-{}",
            what.name(),
            std::process::id(),
            TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)
            .map_err(|e| Failure::file(format!("cannot write {}: {e}", temp.display())))?;
        let body = response.into_body().into_reader();
        let copied = self.copy(body, file, announced, what, module, url);
        let checked = copied.and_then(|()| {
            let got = file_build_id(&temp);
            if got.as_deref() == Some(id) {
                return Ok(());
            }
            Err(Failure::file(match got {
                Some(got) => format!(
                    "served a file with build-id {} (another build): discarded",
                    hex(&got)
                ),
                None => "served a file that is not an ELF file with a build-id: discarded".into(),
            }))
        });
        let placed = checked.and_then(|()| {
            // Read-only, as elfutils leaves its cache files; then in place at once.
            let _ = std::fs::set_permissions(&temp, std::fs::Permissions::from_mode(0o400));
            std::fs::rename(&temp, target)
                .map_err(|e| Failure::file(format!("cannot rename into {}: {e}", target.display())))
        });
        if placed.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        placed
    }

    /// Copies the body into `out`, at most the size limit, drawing the progress line.
    fn copy(
        &self,
        mut body: impl Read,
        mut out: std::fs::File,
        announced: Option<u64>,
        what: Artifact,
        module: &str,
        url: &str,
    ) -> Result<(), Failure> {
        let mut buf = vec![0u8; COPY_CHUNK_BYTES];
        let mut total: u64 = 0;
        let mut drawn = Instant::now();
        let mut shown = false;
        // Bytes received since the start of the current timeout period.
        let mut period = (Instant::now(), 0u64);
        let result = loop {
            let n = match body.read(&mut buf) {
                Ok(0) => break Ok(()),
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => break Err(self.read_failure(e)),
            };
            total += n as u64;
            period.1 += n as u64;
            if let Some(t) = self.config.timeout {
                if period.0.elapsed() >= t {
                    if period.1 < MIN_BYTES_PER_SECOND.saturating_mul(t.as_secs()) {
                        break Err(Failure::down(format!(
                            "slower than 100 KiB/s for {} s (DEBUGINFOD_TIMEOUT)",
                            t.as_secs()
                        )));
                    }
                    period = (Instant::now(), 0);
                }
            }
            if total > self.config.max_size {
                break Err(Failure::file(format!(
                    "the file is over the limit of {} bytes (DEBUGINFOD_MAXSIZE)",
                    self.config.max_size
                )));
            }
            if let Err(e) = out.write_all(&buf[..n]) {
                break Err(Failure::file(format!("writing the cache: {e}")));
            }
            if self.config.progress && drawn.elapsed() >= PROGRESS_INTERVAL {
                drawn = Instant::now();
                shown = true;
                self.draw(&progress_line(what, module, url, total, announced));
            }
        };
        if shown {
            // The line is erased: what was fetched is in the report.
            self.draw("");
        }
        result.and_then(|()| {
            out.sync_all()
                .map_err(|e| Failure::file(format!("writing the cache: {e}")))
        })
    }

    fn draw(&self, line: &str) {
        let _held = self.stderr.lock().unwrap_or_else(|e| e.into_inner());
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r{line}\x1b[K");
        let _ = err.flush();
    }

    /// An error of the request (before the body): a status is the server's answer about
    /// this file; anything else says the server is down or too slow.
    fn failure(&self, e: ureq::Error) -> Failure {
        match e {
            ureq::Error::StatusCode(404) => Failure::file("not found (404)".into()),
            ureq::Error::StatusCode(code) => Failure::file(format!("HTTP status {code}")),
            ureq::Error::Timeout(_) => Failure::down(self.no_answer()),
            ureq::Error::Io(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                Failure::down(self.no_answer())
            }
            other => Failure::down(other.to_string()),
        }
    }

    /// An error while the body was read: a stall past the timeout, or a broken connection.
    fn read_failure(&self, e: std::io::Error) -> Failure {
        let timed_out = e.kind() == std::io::ErrorKind::TimedOut
            || e.get_ref()
                .and_then(|inner| inner.downcast_ref::<ureq::Error>())
                .is_some_and(|u| matches!(u, ureq::Error::Timeout(_)));
        if timed_out {
            Failure::down(self.no_answer())
        } else {
            Failure::down(format!("the download broke off: {e}"))
        }
    }

    fn no_answer(&self) -> String {
        match self.config.timeout {
            Some(t) => format!("no answer within {} s (DEBUGINFOD_TIMEOUT)", t.as_secs()),
            None => "no answer within DEBUGINFOD_MAXTIME".into(),
        }
    }
}

/// Why one server gave nothing, and whether to ask it again in this run.
struct Failure {
    why: String,
    down: bool,
}

impl Failure {
    fn file(why: String) -> Failure {
        Failure { why, down: false }
    }
    fn down(why: String) -> Failure {
        Failure { why, down: true }
    }
}

/// What the cache holds at a path.
#[derive(Debug, PartialEq, Eq)]
enum Cached {
    Absent,
    /// The file, with the build-id asked for.
    Hit,
    /// A failed query recorded this many seconds ago, within `cache_miss_s`.
    Miss(u64),
    /// A file of another build-id (hex), or not ELF ("none").
    Wrong(String),
}

fn cached(target: &Path, id: &[u8]) -> Cached {
    let Ok(meta) = std::fs::metadata(target) else {
        return Cached::Absent;
    };
    if meta.len() == 0 {
        let age = meta
            .modified()
            .ok()
            .and_then(|m| SystemTime::now().duration_since(m).ok())
            .map_or(0, |d| d.as_secs());
        let window = target
            .parent()
            .and_then(Path::parent)
            .and_then(|cache| std::fs::read_to_string(cache.join("cache_miss_s")).ok())
            .and_then(|s| s.trim().parse::<u64>().ok())
            .unwrap_or(DEFAULT_CACHE_MISS_SECONDS);
        // An expired record is left for elfutils to replace: we write none.
        return if age <= window {
            Cached::Miss(age)
        } else {
            Cached::Absent
        };
    }
    match file_build_id(target) {
        Some(got) if got == id => Cached::Hit,
        Some(got) => Cached::Wrong(hex(&got)),
        None => Cached::Wrong("none".into()),
    }
}

/// The GNU build-id of the ELF file at `path`.
fn file_build_id(path: &Path) -> Option<Vec<u8>> {
    let data = FileBytes::open(path.to_str()?).ok()?;
    let obj = object::File::parse(data.bytes()).ok()?;
    obj.build_id().ok().flatten().map(<[u8]>::to_vec)
}

/// `pyunwind: debuginfod: the debuginfo of libc.so.6 from HOST: 2.1 of 4.0 MiB`, cut to the
/// terminal's width (a line that wraps cannot be redrawn in place).
fn progress_line(what: Artifact, module: &str, url: &str, done: u64, total: Option<u64>) -> String {
    let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
    let size = match total {
        Some(t) if t > 0 => format!("{:.1} of {:.1} MiB", mib(done), mib(t)),
        _ => format!("{:.1} MiB", mib(done)),
    };
    let name = Path::new(module)
        .file_name()
        .map_or(module.into(), |n| n.to_string_lossy());
    let host = url.split_once("://").map_or(url, |(_, rest)| rest);
    let line = format!(
        "pyunwind: debuginfod: the {} of {name} from {host}: {size}",
        what.name()
    );
    line.chars()
        .take(terminal_width().saturating_sub(1))
        .collect()
}

fn terminal_width() -> usize {
    // SAFETY: TIOCGWINSZ fills the winsize it is given, nothing else.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    let got = unsafe { libc::ioctl(2, libc::TIOCGWINSZ, &mut ws) };
    if got == 0 && ws.ws_col > 0 {
        ws.ws_col as usize
    } else {
        80
    }
}

/// The error entry of a module whose `what` could not be fetched: one line naming the module,
/// its build-id and each server's answer.
pub fn problem(module: &str, id: &[u8], what: Artifact, why: &str) -> String {
    format!(
        "debuginfod: no {} for {module} (build-id {}): {why}",
        what.name(),
        hex(id)
    )
}

/// What could not be fetched for one target, one line per module (shared by its file lookup
/// and its modules' debug files, reported with the target's errors).
#[derive(Debug, Default)]
pub struct Problems(Mutex<Vec<String>>);

impl Problems {
    pub fn add(&self, line: String) {
        let mut lines = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if !lines.contains(&line) {
            lines.push(line);
        }
    }

    pub fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The name a module is known by in the target, for messages: `/proc/PID/map_files/…` and
/// `/proc/PID/root/…` (how a live process's files are opened) lead back to the mapped path.
pub fn shown_name(path: &str) -> String {
    let Some(rest) = path.strip_prefix("/proc/") else {
        return path.to_string();
    };
    if rest.contains("/map_files/") {
        if let Ok(link) = std::fs::read_link(path) {
            return link.display().to_string();
        }
    }
    match rest.split_once("/root/") {
        Some((pid, inner)) if pid.bytes().all(|b| b.is_ascii_digit()) => format!("/{inner}"),
        _ => path.to_string(),
    }
}

#[cfg(test)]
mod tests;

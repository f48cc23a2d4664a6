"""`pyunwind pid|core --native` with debuginfod, against Debian's own server.

The `debuginfod` package (elfutils 0.188), started here on a free port, scans (-F) the .debs
of the installed python3.11-dbg, libc6-dbg and python3.11-minimal, unpacked at exactly the
installed versions by tools/debuginfod-tree.sh. The CLI is pointed at an empty debug-file
directory and a cache of the test's own (DEBUGINFOD_CACHE_PATH), so the server is what is
tested. The target is Debian's stripped /usr/bin/python3.11 running
tests/scenarios/native_mix.py (frames in python3.11, libc, _ctypes and libffi, whose debug file
is in none of the packages: a 404).

References: the same CLI with the unpacked tree as its debug-file directory (the debug files
"installed"), and with nothing (no debug files, no debuginfod). debuginfod 0.188 has no option
to listen on one address: it listens on the port on every interface, and the tests only ever
connect to 127.0.0.1. The misbehaving servers (404 for everything, one that never answers, one
that serves a file of another build) are small http.server doubles in this process.
"""

import filecmp
import http.server
import json
import os
import pathlib
import re
import shutil
import socket
import stat
import subprocess
import tempfile
import threading
import time
import urllib.request

import pytest

from harness import Interp, Scenario, cli_path, interpreters, mapped_files, repo_root, run

TIMEOUT = 120
# How long the server may take to scan the tree (about 80 MB; seconds on an idle machine).
SCAN_SECONDS = 180
# DEBUGINFOD_TIMEOUT for the servers that misbehave.
BAD_TIMEOUT_S = 3


def _tree():
    rc, out, err = run(["bash", repo_root() / "tools" / "debuginfod-tree.sh"], 600)
    assert rc == 0, "tools/debuginfod-tree.sh failed:\n%s" % err
    tree = pathlib.Path(out.strip().splitlines()[-1])
    assert (tree / "usr" / "lib" / "debug" / ".build-id").is_dir(), tree
    return tree


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _metrics(url):
    with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
        text = r.read().decode()
    return {m.group(1): float(m.group(2))
            for m in re.finditer(r"^(\S+) (\S+)$", text, re.M)}


class Debuginfod:
    """Debian's debuginfod serving `tree` on 127.0.0.1:<free port>, until stop()."""

    def __init__(self, tree):
        if shutil.which("debuginfod") is None:
            raise AssertionError("debuginfod is not installed (tools/test-env.sh installs it)")
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix="pyunwind-debuginfod-"))
        self.port = _free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.log = open(self.dir / "log", "wb")
        self.proc = subprocess.Popen(
            ["debuginfod", "-p", str(self.port), "-d", str(self.dir / "db.sqlite"), "-F",
             "-t", "0", "-g", "0", "-c", "2", "--disable-source-scan", str(tree)],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True)
        try:
            self._wait_scanned()
        except BaseException:
            self.stop()
            raise

    def _wait_scanned(self):
        deadline = time.monotonic() + SCAN_SECONDS
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, "debuginfod exited:\n%s" % self.text()
            try:
                m = _metrics(self.url)
            except OSError:
                m = {}
            if (m.get('thread_work_total{role="traverse"}', 0) >= 1
                    and m.get('thread_busy{role="traverse"}') == 0
                    and m.get('thread_work_pending{role="scan"}') == 0
                    and m.get('thread_busy{role="scan"}') == 0
                    and m.get('scanned_files_total{source="file"}', 0) > 0):
                return
            time.sleep(0.25)
        raise AssertionError("debuginfod did not finish scanning in %d s:\n%s"
                             % (SCAN_SECONDS, self.text()))

    def text(self):
        self.log.flush()
        return (self.dir / "log").read_text("utf-8", "replace")[-4000:]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class Double:
    """An HTTP server on 127.0.0.1 in this process: `answer(path)` gives (status, body), or
    None to hold the request without answering (until close(), at most HOLD_S)."""

    HOLD_S = 60

    def __init__(self, answer):
        self.requests = []
        self.released = threading.Event()
        double = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                double.requests.append(self.path)
                got = answer(self.path)
                if got is None:
                    double.released.wait(Double.HOLD_S)
                    return
                status, body = got
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.released.set()
        self.server.shutdown()
        self.server.server_close()


def _env(url=None, cache=None, timeout=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEBUGINFOD_")}
    if url:
        env["DEBUGINFOD_URLS"] = url
    if cache:
        env["DEBUGINFOD_CACHE_PATH"] = str(cache)
    if timeout:
        env["DEBUGINFOD_TIMEOUT"] = str(timeout)
    return env


def _cli(args, env):
    """The CLI's JSON report."""
    rc, out, err = run([cli_path()] + [str(a) for a in args], TIMEOUT, env=env)
    assert rc == 0, "%s failed (%d):\n%s" % (args, rc, err)
    return json.loads(out)


def _frames(report):
    """Every thread's frames, without what varies between two live reads."""
    return {t["native_id"]: [(f["kind"], f.get("function"), f.get("file"), f.get("line"),
                              f.get("module"), f.get("address"), f.get("inlined"))
                             for f in t["frames"]]
            for t in report["threads"]}


def _build_id(path):
    rc, out, err = run(["readelf", "-n", path], TIMEOUT)
    assert rc == 0, err
    m = re.search(r"Build ID: ([0-9a-f]+)", out)
    assert m, "%s has no build-id" % path
    return m.group(1)


def _cached_files(cache):
    return sorted(str(p.relative_to(cache)) for p in pathlib.Path(cache).rglob("*")
                  if p.is_file()) if os.path.isdir(cache) else []


def _debuginfod_errors(report):
    return sorted(e["what"] for e in report["errors"] if e["what"].startswith("debuginfod:"))


def _other_errors(report):
    return sorted(e["what"] for e in report["errors"] if not e["what"].startswith("debuginfod:"))


def _debian311():
    return next(i for i in interpreters() if i.id == "debian-3.11")


@pytest.fixture(scope="module")
def tree():
    return _tree()


@pytest.fixture(scope="module")
def server(tree):
    s = Debuginfod(tree)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def mix(tree):
    """native_mix under Debian's python3.11: its core, the modules it maps (path -> build-id),
    and the reference reports of the core: with the unpacked debug files, and with none."""
    with Scenario(_debian311(), "native_mix") as sc:
        core = sc.make_core()
        empty = sc.tmpdir / "no-debug-files"
        empty.mkdir()
        local = _cli(["core", core, "--native", "--json", "--no-debuginfod",
                         "--debug-file-directory", tree / "usr/lib/debug"], _env())
        bare = _cli(["core", core, "--native", "--json", "--no-debuginfod",
                        "--debug-file-directory", empty], _env())
        # The debug files make a difference, or the comparisons below would prove nothing.
        assert _frames(local) != _frames(bare)
        mapped = {p: _build_id(p) for p in mapped_files(sc.pid)
                  if open(p, "rb").read(4) == b"\x7fELF"}
        yield {"sc": sc, "core": core, "empty": empty, "local": local, "bare": bare,
               "mapped": mapped, "tree": tree}


def _lacking(m, report):
    """(path, build-id) of each module with frames in `report` whose file has no DWARF."""
    names = {f.get("module") for t in report["threads"] for f in t["frames"]}
    out = []
    for path, bid in sorted(m["mapped"].items()):
        if os.path.basename(path) not in names:
            continue
        rc, sections, _ = run(["readelf", "-S", "-W", path], TIMEOUT)
        assert rc == 0
        if ".debug_info" not in sections:
            out.append((path, bid))
    return out


def _has_debug_file(m, bid):
    return (m["tree"] / "usr/lib/debug/.build-id" / bid[:2] / (bid[2:] + ".debug")).is_file()


def _not_served(m, report, url):
    """The error entries of the modules whose debug file the server does not have."""
    return sorted("debuginfod: no debuginfo for %s (build-id %s): %s: not found (404)"
                  % (path, bid, url)
                  for path, bid in _lacking(m, report) if not _has_debug_file(m, bid))


def _check_cache(cache, want):
    """The cache holds exactly `want` (build-id, artifact) files, read-only, each with its
    build-id; nothing else (no temporary file) is left."""
    assert _cached_files(cache) == sorted("%s/%s" % w for w in want), _cached_files(cache)
    for bid, what in want:
        path = pathlib.Path(cache) / bid / what
        assert stat.S_IMODE(path.stat().st_mode) == 0o400, path
        assert _build_id(str(path)) == bid, path


def test_core_frames_from_the_server_then_from_its_cache(mix, tree, tmp_path):
    """(a) the native frames (names, files, lines, inlined calls) are those of a run with the
    debug files installed; (b) again, from the cache, once the server has stopped."""
    server = Debuginfod(tree)
    cache = tmp_path / "cache"
    args = ["core", mix["core"], "--native", "--json", "--debug-file-directory", mix["empty"]]
    try:
        fetched = _cli(args, _env(server.url, cache))
    finally:
        server.stop()
    assert _frames(fetched) == _frames(mix["local"])
    assert _other_errors(fetched) == _other_errors(mix["local"])
    not_served = _not_served(mix, fetched, server.url)
    assert len(not_served) == 1 and "libffi" in not_served[0], not_served
    assert _debuginfod_errors(fetched) == not_served
    served = [(bid, "debuginfo") for _, bid in _lacking(mix, fetched) if _has_debug_file(mix, bid)]
    assert len(served) == 3, served  # python3.11, libc.so.6, _ctypes
    _check_cache(cache, served)

    # The server is gone: what it gave comes from the cache; libffi's is asked for again (a
    # 404 is not recorded in the shared cache) and the refused connection is its entry.
    again = _cli(args, _env(server.url, cache))
    assert _frames(again) == _frames(mix["local"])
    assert _other_errors(again) == _other_errors(mix["local"])
    (entry,) = _debuginfod_errors(again)
    head = not_served[0][:-len("not found (404)")]
    assert entry.startswith(head) and "Connection refused" in entry, (entry, head)
    _check_cache(cache, served)


def test_live_frames_from_the_server(mix, server, tmp_path):
    """`pid --native`: the same frames as with the debug files installed."""
    pid = mix["sc"].pid
    local = _cli(["pid", pid, "--native", "--json", "--no-debuginfod",
                     "--debug-file-directory", mix["tree"] / "usr/lib/debug"], _env())
    cache = tmp_path / "cache"
    live = _cli(["pid", pid, "--native", "--json", "--debug-file-directory", mix["empty"]],
                   _env(server.url, cache))
    assert _frames(live) == _frames(local)
    assert _frames(live) == _frames(mix["local"])
    assert _debuginfod_errors(live) == _not_served(mix, live, server.url)
    assert len(_cached_files(cache)) == 3


def _lying_elf():
    """A file of another build than any the scenario maps."""
    return pathlib.Path(shutil.which("true")).read_bytes()


@pytest.mark.parametrize("kind", ["404", "hang", "liar"])
def test_a_bad_server_costs_one_error_entry_per_module_and_no_wrong_name(mix, kind, tmp_path):
    """(c) A server that answers 404, one that never answers (past DEBUGINFOD_TIMEOUT), one
    that serves a file of another build: the frames are those of a run without debug files
    (nothing wrong is named), each module lacking DWARF has one error entry naming its file,
    its build-id and the server's answer, and nothing is cached. A server that did not answer
    is asked once in the run: one request, the other modules' entries say it was not asked (a
    count, not a time: timings belong to `make bench`)."""
    lie = _lying_elf()
    answer = {"404": lambda path: (404, b"not found\n"),
              "hang": lambda path: None,
              "liar": lambda path: (200, lie)}[kind]
    double = Double(answer)
    cache = tmp_path / "cache"
    try:
        report = _cli(["core", mix["core"], "--native", "--json",
                             "--debug-file-directory", mix["empty"]],
                            _env(double.url, cache, BAD_TIMEOUT_S))
    finally:
        double.close()
    assert _frames(report) == _frames(mix["bare"])
    assert _other_errors(report) == _other_errors(mix["bare"])
    lacking = _lacking(mix, report)
    assert len(lacking) == 4, lacking  # python3.11, libc.so.6, _ctypes, libffi
    entries = _debuginfod_errors(report)
    assert len(entries) == len(lacking), entries
    heads = {"debuginfod: no debuginfo for %s (build-id %s): %s: " % (p, b, double.url)
             for p, b in lacking}
    reasons = []
    for e in entries:
        head = next((h for h in heads if e.startswith(h)), None)
        assert head is not None, (e, heads)
        heads.discard(head)
        reasons.append(e[len(head):])
    if kind == "404":
        assert reasons == ["not found (404)"] * 4, reasons
    elif kind == "liar":
        want = "served a file with build-id %s (another build): discarded" % _build_id(
            shutil.which("true"))
        assert reasons == [want] * 4, reasons
    else:
        timed_out = "no answer within %d s (DEBUGINFOD_TIMEOUT)" % BAD_TIMEOUT_S
        assert sorted(reasons) == sorted(
            [timed_out] + ["not asked (%s earlier in this run)" % timed_out] * 3), reasons
        assert len(double.requests) == 1, double.requests
    assert _cached_files(cache) == []


def test_no_debuginfod_asks_no_server(mix, tmp_path):
    """(e) --no-debuginfod: the server in DEBUGINFOD_URLS is not contacted; without it, it is
    (so that the count means something)."""
    double = Double(lambda path: (404, b""))
    try:
        args = ["core", mix["core"], "--native", "--json", "--debug-file-directory",
                mix["empty"]]
        off = _cli(args + ["--no-debuginfod"], _env(double.url, tmp_path / "cache"))
        assert double.requests == []
        assert off == mix["bare"]
        on = _cli(args, _env(double.url, tmp_path / "cache"))
        assert len(double.requests) == 4, double.requests
        assert _frames(on) == _frames(mix["bare"])
    finally:
        double.close()


def test_a_core_s_missing_executable_is_fetched_by_build_id(mix, server, tmp_path):
    """(d) The scenario runs a copy of python3.11, which is removed once the core is
    written (and then replaced by another build at the same path): the executable comes from
    the server by the build-id the core records, and the report is that of `--exe
    /usr/bin/python3.11` with the debug files installed."""
    exe = tmp_path / "bin" / "python3.11"
    exe.parent.mkdir()
    shutil.copy2("/usr/bin/python3.11", exe)
    interp = Interp("debian-3.11-copy", str(exe), {"PYTHONHOME": "/usr"}, 11, True, None)
    empty = tmp_path / "empty"
    empty.mkdir()
    core = tmp_path / "core"
    with Scenario(interp, "native_mix") as sc:
        shutil.move(sc.make_core(), core)
        local = _cli(["core", core, "--native", "--json", "--no-debuginfod", "--exe",
                         "/usr/bin/python3.11", "--debug-file-directory",
                         mix["tree"] / "usr/lib/debug"], _env())
    exe.unlink()
    bid = _build_id("/usr/bin/python3.11")
    # Without the server the core cannot be read: its executable is nowhere.
    rc, out, err = run([cli_path(), "core", core, "--native", "--json", "--no-debuginfod"],
                       TIMEOUT, env=_env())
    assert rc == 1 and "%s: file not found" % exe in err, (rc, err)
    args = ["core", core, "--native", "--json", "--debug-file-directory", empty]
    for case in ("missing", "another build"):
        if case == "another build":
            shutil.copy(shutil.which("true"), exe)
        cache = tmp_path / ("cache-" + case.replace(" ", "-"))
        fetched = _cli(args, _env(server.url, cache))
        assert _frames(fetched) == _frames(local), case
        assert _other_errors(fetched) == _other_errors(local), case
        (entry,) = _debuginfod_errors(fetched)
        assert "libffi" in entry and entry.endswith(": not found (404)"), entry
        assert (bid, "executable") in [tuple(f.split("/")) for f in _cached_files(cache)]
        assert filecmp.cmp(cache / bid / "executable", "/usr/bin/python3.11", shallow=False)
    # Nothing fetched: one line that says so, naming the server's answer.
    rc, out, err = run([cli_path()] + [str(a) for a in args], TIMEOUT,
                       env=_env("http://127.0.0.1:%d" % _free_port(), tmp_path / "c3", 2))
    assert rc == 1, (rc, out, err)
    assert "refused; debuginfod: http://127.0.0.1:" in err, err


def _gdb_bt(core, env):
    """`thread apply all bt` of gdb with pyunwind's script loaded and gdb's own debuginfod
    client on (gdb asks before it enables it; -batch would take that as no)."""
    rc, out, err = run(["gdb", "-nx", "-batch", "-iex", "set debuginfod enabled on", "-iex",
                        "set debug-file-directory %s" % env["EMPTY"], "-x",
                        repo_root() / "gdb-scripts" / "pyunwind-gdb.py", "-ex",
                        "thread apply all bt", "/usr/bin/python3.11", core], TIMEOUT, env=env)
    assert rc == 0, "gdb failed (%d):\n%s\n%s" % (rc, out, err)
    assert "Traceback (most recent call last)" not in out + err, out + err
    return out


def test_gdb_s_own_debuginfod_and_the_cli_share_the_cache(mix, server, tmp_path):
    """gdb's own debuginfod client (elfutils' libdebuginfod) works with pyunwind's script
    loaded, and gdb and the CLI share one cache: what gdb downloaded, the CLI reads with the
    server gone (and respects the failed query gdb recorded for libffi); what the CLI
    downloaded, gdb reads with the server gone."""
    dead = "http://127.0.0.1:%d" % _free_port()
    # `pythread_wrapper` is a static function of python3.11: gdb names it from debug info only.
    static = "pythread_wrapper"
    env = dict(_env(dead, tmp_path / "none"), EMPTY=str(mix["empty"]))
    assert static not in _gdb_bt(mix["core"], env)

    by_gdb = tmp_path / "by-gdb"
    assert static in _gdb_bt(mix["core"], dict(env, DEBUGINFOD_URLS=server.url,
                                               DEBUGINFOD_CACHE_PATH=str(by_gdb)))
    report = _cli(["core", mix["core"], "--native", "--json", "--debug-file-directory",
                      mix["empty"]], _env(dead, by_gdb))
    assert _frames(report) == _frames(mix["local"])
    (entry,) = _debuginfod_errors(report)
    assert "libffi" in entry and ": not found: a failed query " in entry, entry

    by_cli = tmp_path / "by-cli"
    _cli(["core", mix["core"], "--native", "--json", "--debug-file-directory", mix["empty"]],
         _env(server.url, by_cli))
    assert static in _gdb_bt(mix["core"], dict(env, DEBUGINFOD_CACHE_PATH=str(by_cli)))

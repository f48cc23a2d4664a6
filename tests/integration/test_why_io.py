"""--why on threads that wait on the outside world (issue 37: `waiting` kinds `socket`, `pipe`,
`fd`, `child`) and on servers waiting for connections (`state: "idle"`, `idle: "server"`),
checked against tests/scenarios/why_io.py: every fd, local and peer address, child pid and its
argv, and every thread's native id come from the scenario itself. Live (`pid PID --why
--json`), from a gcore core (`core CORE --why --json`: the fds, no addresses nor commands) and
from the core the kernel writes of a second run killed by SIGABRT (its own truth);
the text verdict's order (waits on the outside world before waits with no owner, the idle
threads counted on one last line); and gdb's `py-why` on the core prints the same verdict.

The helpers here (cli, report, ...) serve the other test_why_* files of issue 37 too."""

import glob
import os
import shutil
import signal
import tempfile

import pytest

import harness
from test_stacks import json_from, run_gdb

CLI_TIMEOUT = 60
# The free-threaded 3.13t runs these scenarios as they are: nothing in them depends on the GIL.
INTERPS = harness.pick(["pyenv-3.10", "pyenv-3.11", "pyenv-3.12", "pyenv-3.13",
                        "debian-3.11", "debian-3.14", "debian-3.15", "ft-3.13t"])
SOURCES = ["live", "core"]
# With a core the kernel wrote (the scenario killed by SIGABRT): a second run of the scenario,
# with its own truth.
ALL_SOURCES = SOURCES + ["kernel"]
KERNEL_CORE_TIMEOUT = 120
# gdb's py-why against the CLI's text on a core (as test_why_gdb.py).
GDB_INTERPS = ["pyenv-3.12", "debian-3.14"]


# --- shared by the test_why_* files of issue 37 ----------------------------------------------


class KernelCore:
    """A scenario's core as the kernel writes it, for the `kernel` source: ``truth`` (the run's
    own), ``core`` (its path), ``pid``; ``close()`` removes it."""

    def __init__(self, interp, name, env=None):
        with open("/proc/sys/kernel/core_pattern", encoding="ascii") as f:
            pattern = f.read().strip()
        if pattern != "core":
            raise harness.HarnessError("the kernel's core_pattern is %r, not `core`" % pattern)
        self.workdir = tempfile.mkdtemp(prefix="pyunwind-kcore-%s-%s-" % (name, interp.id))
        try:
            with harness.Scenario(interp, name, env=env) as sc:
                self.truth, self.pid, self.interp = sc.truth, sc.pid, interp
                rc, out, err = harness.run(["prlimit", "--pid", sc.pid, "--core=unlimited"], 30)
                if rc != 0:
                    raise harness.HarnessError("prlimit failed: %s" % err)
                os.kill(sc.pid, signal.SIGABRT)
                sc._proc.wait(KERNEL_CORE_TIMEOUT)
                cores = glob.glob(str(sc.tmpdir / "core*"))
                if len(cores) != 1:
                    raise harness.HarnessError("the kernel wrote %r in %s" % (cores, sc.tmpdir))
                self.core = shutil.move(cores[0], self.workdir)
        except BaseException:
            self.close()
            raise

    def close(self):
        shutil.rmtree(self.workdir, ignore_errors=True)


def view(sc, source):
    """(what holds the truth and the core, source as cli() takes it) for a test's source: the
    kernel's core is a core of the scenario's second run (``sc.kernel``)."""
    if source == "kernel":
        return sc.kernel, "core"
    return sc, source


def run_cli(target, *extra):
    rc, out, err = harness.run([harness.cli_path()] + list(map(str, target)) + ["--why"]
                               + list(extra), timeout=CLI_TIMEOUT)
    harness.assert_no_panic(out + err, rc)
    assert rc == 0, err
    return out


def target_of(sc, source, core=None, pid=None):
    if source == "live":
        return ["pid", str(pid or sc.pid)]
    return ["core", core or sc.core]


def cli(sc, source, *extra, core=None, pid=None):
    """The CLI's output, run once per target and options: the scenario stays at its stop, so a
    later run would say the same. Every --json output is checked against the schema
    (harness.run)."""
    if not hasattr(sc, "outputs"):
        sc.outputs = {}
    target = target_of(sc, source, core, pid)
    key = tuple(target) + extra
    if key not in sc.outputs:
        sc.outputs[key] = run_cli(target, *extra)
    return sc.outputs[key]


def report(sc, source, *extra, core=None, pid=None):
    return json_from(cli(sc, source, "--json", *extra, core=core, pid=pid))


def by_native_id(r):
    return {t["native_id"]: t for t in r["threads"]}


def by_name(r):
    return {t["name"]: t for t in r["threads"]}


def core_of(sc, pid):
    """A gcore core of process ``pid`` (a child of the scenario: a pool's worker, a server's
    worker), ``<tmpdir>/child.<pid>``, made as harness.Scenario.make_core makes the
    scenario's own."""
    prefix = sc.tmpdir / "child"
    env = {k: v for k, v in os.environ.items() if k != "DEBUGINFOD_URLS"}
    rc, out, err = harness.run(["gcore", "-o", prefix, pid], timeout=harness.GCORE_TIMEOUT_SECONDS,
                               env=env)
    path = sc.tmpdir / ("child.%d" % pid)
    if rc != 0 or not path.is_file():
        raise harness.HarnessError("gcore of %d failed (rc %d):\n%s\n%s" % (pid, rc, out, err))
    harness.refill_guarded_mappings(path, pid)
    return str(path)


def verdict(text):
    """The verdict: the lines before the first blank line."""
    return text.split("\n\n", 1)[0].splitlines()


def python_stack(frames):
    """(function, file, line) of the Python frames, innermost first."""
    return [(f["function"], f["file"], f["line"]) for f in frames
            if f.get("kind", "python") == "python"]


def truth_stack(frames):
    return [(f["function"], f["file"], f["line"]) for f in frames]


def comm_of(pid):
    """/proc/PID/comm of a live process: the `command` of a `peer_process`."""
    with open("/proc/%d/comm" % pid, encoding="utf-8", errors="replace") as f:
        return f.read().rstrip("\n")


def peer_process_of(pid):
    """The `peer_process` of a socket whose other end process ``pid`` holds (live)."""
    return {"pid": pid, "command": comm_of(pid)}


def socket_wait(w, want, direction, source, frame, peer_process=None):
    """A socket wait against the program's record of its socket (the object, fd, local and
    peer) and the process at its other end (``peer_process``, as `peer_process_of` gives it):
    the addresses and the process live only (a core has no /proc)."""
    got = {k: w.get(k, "absent") for k in ("kind", "object", "type", "fd", "direction", "local",
                                           "peer", "peer_process", "owner", "frame")}
    live = source == "live"
    assert got == {"kind": "socket", "object": want["id"], "type": want["type"], "fd": want["fd"],
                   "direction": direction, "local": want["local"] if live else None,
                   "peer": want["peer"] if live else None,
                   "peer_process": peer_process if live else None, "owner": None,
                   "frame": frame}, w


# The idle line's words for each kind, in its order (docs/report.md, "The verdict").
IDLE_WORDS = [("pool_worker", "pool worker", "pool workers"),
              ("pool_thread", "pool thread", "pool threads"),
              ("queue_feeder", "queue feeder", "queue feeders"),
              ("server", "server waiting for connections", "servers waiting for connections"),
              ("master", "master waiting for signals", "masters waiting for signals"),
              ("event_loop", "event loop", "event loops")]


def idle_words(kinds):
    """The idle line that counts idle threads of these kinds: `7 idle: 5 pool workers, ...`."""
    parts = ["%d %s" % (kinds.count(k), one if kinds.count(k) == 1 else many)
             for k, one, many in IDLE_WORDS if k in kinds]
    return "%d idle: %s" % (len(kinds), ", ".join(parts))


def idle_line(lines, count):
    """The verdict's one line counting the idle threads, `N idle: ...`: its last line, or the
    one before the line counting idle asyncio tasks (`N idle tasks: ...`)."""
    body = lines[:-1] if lines and " idle task" in lines[-1] else lines
    idle = [line for line in body if " idle: " in line]
    assert idle == [body[-1]], lines
    assert body[-1].startswith("%d idle: " % count), lines
    return body[-1]


def line_of(lines, native_id, name):
    """The verdict line that starts with the thread."""
    head = 'thread %d "%s" ' % (native_id, name)
    found = [i for i, line in enumerate(lines) if line.startswith(head)]
    assert len(found) == 1, (head, lines)
    return found[0]


def no_line_names(lines, native_ids):
    """No verdict line is about one of these (idle) threads."""
    for line in lines:
        for n in native_ids:
            assert not line.startswith("thread %d " % n), (n, line)


# --- why_io ------------------------------------------------------------------------------------


@pytest.fixture(scope="module", params=INTERPS, ids=lambda i: i.id)
def scenario(request):
    kernel = KernelCore(request.param, "why_io")
    try:
        with harness.Scenario(request.param, "why_io") as sc:
            sc.core = sc.make_core()
            sc.kernel = kernel
            yield sc
    finally:
        kernel.close()


def thread(sc, source, key):
    """The report's thread of the truth's ``key``."""
    return by_native_id(report(sc, source))[sc.truth[key]["native_id"]]


@pytest.mark.parametrize("source", ALL_SOURCES)
def test_client_waits_on_a_socket_with_its_peer(scenario, source):
    sc, source = view(scenario, source)
    t = thread(sc, source, "client")
    # Its peer: the main thread's end, which it accepted and keeps.
    socket_wait(t["waiting"], sc.truth["client"], "recv", source, 0,
                peer_process_of(sc.pid) if source == "live" else None)
    assert t["state"] == "syscall" and t["idle"] is None, t
    # The frame making the call is the scenario's, on the line it recorded.
    want = next(x for x in sc.truth["threads"] if x["name"] == "client")["frames"][0]
    got = t["frames"][0]
    assert (got["function"], got["line"]) == (want["function"], want["line"])


@pytest.mark.parametrize("source", ALL_SOURCES)
def test_handler_waits_on_its_connection(scenario, source):
    sc, source = view(scenario, source)
    t = thread(sc, source, "handler")
    socket_wait(t["waiting"], sc.truth["handler"], "recv", source, 0,
                peer_process_of(sc.pid) if source == "live" else None)
    assert t["waiting"]["peer"] in (None, sc.truth["handler"]["peer"])
    assert t["state"] == "syscall" and t["idle"] is None, t
    assert t["frames"][0]["function"] in ("Handler.handle", "handle")


@pytest.mark.parametrize("source", ALL_SOURCES)
def test_accept_is_an_idle_server(scenario, source):
    sc, source = view(scenario, source)
    t = thread(sc, source, "acceptor")
    assert (t["state"], t["idle"]) == ("idle", "server"), t
    # Its wait still says on what: the listening socket, in socket.accept (socket.py), which
    # calls _accept().
    want = dict(sc.truth["acceptor"], peer=None)
    socket_wait(t["waiting"], want, "accept", source, 0)
    assert t["frames"][0]["function"] in ("socket.accept", "accept")
    assert t["frames"][0]["file"].endswith("/socket.py")


@pytest.mark.parametrize("source", ALL_SOURCES)
def test_serve_forever_is_an_idle_server(scenario, source):
    sc, source = view(scenario, source)
    t = thread(sc, source, "server")
    assert (t["state"], t["idle"]) == ("idle", "server"), t
    assert [f["function"] for f in t["frames"][:2]] in (
        ["select", "serve_forever"], ["_PollLikeSelector.select", "BaseServer.serve_forever"])
    assert t["waiting"] == server_wait(sc, source, t["native_id"]), t


# x86-64's restart_syscall (asm/unistd_64.h): what a `poll` with a timeout becomes once a stop
# (gcore's, a debugger's) interrupts it; its arguments no longer say what it polls.
RESTART_SYSCALL = "219"


class _Given:
    """Equal to any object address (an int), not to None."""

    def __eq__(self, other):
        return isinstance(other, int) and other > 0

    def __repr__(self):
        return "<an object's address>"


OBJECT_GIVEN = _Given()


def server_wait(sc, source, native_id):
    """serve_forever's wait: its poll of the server's own socket (its fd; live, /proc says it
    is a socket and where it listens; a core cannot tell a socket from another fd). Once a stop
    has restarted the poll (/proc's syscall number), only the C function it is in shows."""
    server = sc.truth["server"]
    live = source == "live"
    if live:
        with open("/proc/%d/task/%d/syscall" % (sc.pid, native_id)) as f:
            restarted = f.read().split()[0] == RESTART_SYSCALL
        if restarted:
            # The call's object is the selector's poll object, which serve_forever makes
            # itself (out of the truth's reach): its type is checked, and that it is given.
            return {"kind": "native", "object": OBJECT_GIVEN, "type": "select.poll",
                    "owner": None, "frame": 0, "function": "select.poll.poll",
                    "native_function": None}
    return {"kind": "socket" if live else "fd", "object": None, "type": None, "owner": None,
            "frame": 0, "fd": server["fd"], "direction": "recv" if live else "read",
            **({"local": server["local"], "peer": None, "peer_process": None} if live
               else {"path": None})}


@pytest.mark.parametrize("source", ALL_SOURCES)
def test_subprocess_run_waits_for_its_child(scenario, source):
    sc, source = view(scenario, source)
    t = thread(sc, source, "child")
    w = t["waiting"]
    child = sc.truth["child"]
    # The pid from wait4's arguments (so a core has it too); the command live only.
    got = {k: w.get(k) for k in ("kind", "pid", "command", "owner", "frame")}
    assert got == {"kind": "child", "pid": child["pid"],
                   "command": " ".join(child["argv"]) if source == "live" else None,
                   "owner": None, "frame": 0}, w
    assert t["frames"][0]["function"] in ("Popen._try_wait", "_try_wait")
    assert t["frames"][0]["file"].endswith("/subprocess.py")
    assert t["state"] == "syscall" and t["idle"] is None, t


@pytest.mark.parametrize("source", ALL_SOURCES)
def test_os_read_waits_on_a_pipe(scenario, source):
    sc, source = view(scenario, source)
    t = thread(sc, source, "pipe")
    w = t["waiting"]
    got = {k: w.get(k) for k in ("kind", "fd", "direction", "path", "object", "type", "owner",
                                 "frame")}
    # A core cannot tell a pipe from another descriptor: `fd` there, or `pipe`.
    kinds = ("pipe",) if source == "live" else ("pipe", "fd")
    assert got["kind"] in kinds, w
    assert dict(got, kind=None) == {"kind": None, "fd": sc.truth["pipe"]["fd"],
                                    "direction": "read", "path": None, "object": None,
                                    "type": None, "owner": None, "frame": 0}, w


@pytest.mark.parametrize("source", ALL_SOURCES)
def test_verdict_lines(scenario, source):
    """Waits on the outside world, then the wait with no owner (main on _truth.HELD), then one
    line counting the two idle servers; an idle thread has no line of its own. The words are
    docs/report.md's ("The verdict")."""
    sc, source = view(scenario, source)
    lines = verdict(cli(sc, source))
    if sc is scenario.kernel:
        # The kernel's core is of a process killed by SIGABRT: the crash comes first.
        assert lines[0].startswith("Crashed: SIGABRT "), lines
        lines = lines[1:]
    truth = sc.truth
    names = {t["native_id"]: t["name"] for t in truth["threads"]}
    main = truth["threads"][0]["native_id"]
    client, pipe, child = truth["client"], truth["pipe"], truth["child"]
    handler = truth["handler"]
    outside = [line_of(lines, x["native_id"], names[x["native_id"]])
               for x in (client, handler, pipe, child)]
    assert max(outside) < line_of(lines, main, "MainThread"), lines
    no_line_names(lines, [truth["acceptor"]["native_id"], truth["server"]["native_id"]])
    assert idle_line(lines, 2) == idle_words(["server", "server"])
    assert len(lines) == 6, lines
    at = dict(zip(("client", "handler", "pipe", "child"), outside))
    me = "(%s, pid %d)" % (comm_of(sc.pid), sc.pid) if source == "live" else None
    if source == "live":
        assert lines[at["client"]] == (
            'thread %d "client" waits on socket fd %d (recv from %s %s, local %s)'
            % (client["native_id"], client["fd"], client["peer"], me, client["local"]))
        assert lines[at["pipe"]] == 'thread %d "reader" waits on pipe fd %d (read)' % (
            pipe["native_id"], pipe["fd"])
        assert lines[at["child"]] == 'thread %d "runner" waits for child %d (%s) to exit' % (
            child["native_id"], child["pid"], " ".join(child["argv"]))
    else:
        # A core has the fds and the child's pid, not the addresses nor the command.
        assert lines[at["client"]] == 'thread %d "client" waits on socket fd %d (recv)' % (
            client["native_id"], client["fd"])
        kind = thread(sc, source, "pipe")["waiting"]["kind"]
        assert lines[at["pipe"]] == 'thread %d "reader" waits on %sfd %d (read)' % (
            pipe["native_id"], "" if kind == "fd" else kind + " ", pipe["fd"])
        assert lines[at["child"]] == 'thread %d "runner" waits for child %d to exit' % (
            child["native_id"], child["pid"])
    # The handler's connection, its peer the main thread's end.
    want = 'thread %d "%s" waits on socket fd %d (recv' % (
        handler["native_id"], names[handler["native_id"]], handler["fd"])
    if source == "live":
        want += " from %s %s, local %s" % (handler["peer"], me, handler["local"])
    assert lines[at["handler"]] == want + ")", lines


@pytest.mark.parametrize("source", ALL_SOURCES)
def test_every_thread_is_the_programs(scenario, source):
    """Exactly the program's threads, each with its recorded frames."""
    sc, source = view(scenario, source)
    threads = by_native_id(report(sc, source))
    assert sorted(threads) == sorted(t["native_id"] for t in sc.truth["threads"])
    for want in sc.truth["threads"]:
        t = threads[want["native_id"]]
        assert t["name"] == want["name"]
        assert python_stack(t["frames"]) == truth_stack(want["frames"]), want["name"]


@pytest.mark.parametrize("scenario", harness.pick(GDB_INTERPS), indirect=True,
                         ids=lambda i: i.id)
def test_gdb_py_why_prints_the_cli_verdict(scenario):
    sc = scenario
    out, _ = run_gdb(sc.interp, "echo @@TEXT@@\\n", "py-why", core=sc.core)
    text = out.split("@@TEXT@@\n", 1)[1]
    assert verdict(text) == verdict(cli(sc, "core")), text

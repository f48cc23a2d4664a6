"""--why's `peer_process` (issue 49 item 3): a socket wait whose other end is a process of this
host names that process, as `ss -p` does. Checked against tests/scenarios/why_peers.py's own
record, on real programs at the versions tools/aioservices.sh pins:

- asyncpg 0.32 against a real PostgreSQL server this module starts (Debian's, as a plain user,
  in a temporary data directory, on a free port of 127.0.0.1), `SELECT pg_sleep(600)` in
  flight: task "query" waits on its socket (`Connection._do_execute`), its peer the server's
  port, its `peer_process` the backend (`conn.get_server_pid()`) and its comm;
- aiohttp 3.14: a client task awaiting a handler of the same process that never answers
  (`DataQueue.read`): its peer is the server's address, the accepted socket's peer its own
  address, and `peer_process` the scenario itself;
- threads in `recv` on a loopback TCP connection and on a `socketpair` end, whose other ends
  only a child process holds: `peer_process` is the child's pid and comm; and on a
  `socketpair` end whose other end both processes hold: none is named, and the error says
  which hold it;
- a server process listening on a unix socket at a path and on an abstract one that never
  accepts: threads in `recv` and asyncio tasks awaiting a stream read on connections that wait
  in the listeners' queues, not accepted yet. `peer_process` is the server (the kernel's
  `unix_diag` names the listener whose queue holds each connection), `peer` the listener's
  address.

Live (`pid P --why --tasks --json`, the text verdict's line) and from a gcore core, where the
fields /proc gives are null: the fd and direction survive, `local`, `peer` and `peer_process`
do not. gdb's `py-why` attached to the live threads, asyncpg and not-accepted scenarios (memory
read directly and through gdb) prints the CLI's verdict, with the record's `(postgres, pid N)`
and `(python3, pid N)`; lldb's: test_lldb_why.py."""

import glob
import os
import shutil
import socket
import subprocess
import tempfile

import pytest

import harness
from test_why_waits import cli
from test_why_gdb import verdict
from test_stacks import json_from, run_gdb

SOURCES = ["live", "core"]
# The ABIs tools/aioservices.sh installs for.
AIO_INTERPS = ["pyenv-3.11", "pyenv-3.12", "pyenv-3.13"]
THREAD_INTERPS = ["pyenv-3.10", "pyenv-3.12", "debian-3.14"]
UNACCEPTED_INTERPS = ["pyenv-3.11", "pyenv-3.13", "debian-3.14"]
# gdb's py-why on the live scenarios, memory read directly and through gdb.
MEMORY = ["auto", "debugger"]
PG_START_SECONDS = 60


def pg_bin(name):
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/" + name))
    if not found:
        raise harness.HarnessError("no PostgreSQL %s: tools/test-env.sh installs postgresql"
                                   % name)
    return found[-1]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def postgres():
    """A PostgreSQL server on 127.0.0.1:PORT (yielded), trust auth, its data in a temporary
    directory, run as the `postgres` user when we are root (the server refuses root)."""
    workdir = tempfile.mkdtemp(prefix="pyunwind-pg-")
    as_user = []
    if os.geteuid() == 0:
        as_user = ["runuser", "-u", "postgres", "--"]
        shutil.chown(workdir, "postgres")
    data = os.path.join(workdir, "data")
    port = free_port()

    def run(cmd):
        rc, out, err = harness.run(as_user + cmd, timeout=PG_START_SECONDS, cwd=workdir)
        if rc != 0:
            raise harness.HarnessError("%s failed (rc %d):\n%s\n%s" % (cmd, rc, out, err))

    try:
        run([pg_bin("initdb"), "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8",
             "--no-sync"])
        run([pg_bin("pg_ctl"), "-D", data, "-w", "-t", str(PG_START_SECONDS), "-l",
             os.path.join(workdir, "server.log"), "-o",
             "-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off" % (port, workdir),
             "start"])
        yield port
    finally:
        if os.path.exists(os.path.join(data, "postmaster.pid")):
            subprocess.run(as_user + [pg_bin("pg_ctl"), "-D", data, "-m", "immediate", "-w",
                                      "stop"], capture_output=True, timeout=PG_START_SECONDS)
        shutil.rmtree(workdir, ignore_errors=True)


def start(interp_id, mode, *args):
    interp = harness.pick([interp_id])[0]
    env = {"PYUNWIND_AIO": str(harness.cache_dir() / "aioservices" / ("cp3%d" % interp.minor)
                               / "site-packages")}
    sc = harness.Scenario(interp, "why_peers", args=(mode,) + args, env=env)
    try:
        assert sc.truth["mode"] == mode
        sc.core = sc.make_core()
    except BaseException:
        sc.close()
        raise
    return sc


@pytest.fixture(scope="module", params=AIO_INTERPS)
def asyncpg_scenario(request, postgres):
    with start(request.param, "asyncpg", postgres) as sc:
        yield sc


@pytest.fixture(scope="module", params=AIO_INTERPS)
def aiohttp_scenario(request):
    with start(request.param, "aiohttp") as sc:
        yield sc


@pytest.fixture(scope="module", params=THREAD_INTERPS)
def threads_scenario(request):
    with start(request.param, "threads") as sc:
        yield sc


@pytest.fixture(scope="module", params=UNACCEPTED_INTERPS)
def unaccepted_scenario(request):
    with start(request.param, "unaccepted") as sc:
        yield sc


def report(sc, source, *extra):
    r = json_from(cli(sc, source, "--json", *extra))
    harness.check_report_schema(r)
    return r


def socket_wait(sock, direction, source, peer_process):
    """The wait on the socket the scenario recorded: /proc's fields live only."""
    live = source == "live"
    return {"kind": "socket", "object": sock["id"], "type": sock["type"], "owner": None,
            "fd": sock["fd"], "direction": direction,
            "local": sock["local"] if live else None, "peer": sock["peer"] if live else None,
            "peer_process": peer_process if live else None}


def task_wait(sc, source):
    """(the task's `waiting` less its frame, the function of the frame that waits)."""
    r = report(sc, source, "--tasks")
    (t,) = [t for t in r["tasks"] if t["id"] == sc.truth["task"]["id"]]
    assert t["name"] == sc.truth["task"]["name"]
    w = dict(t["waiting"])
    frame = t["frames"][w.pop("frame")]["function"]
    return w, frame, r


@pytest.mark.parametrize("source", SOURCES)
def test_asyncpg_query_waits_on_the_backend(asyncpg_scenario, source):
    sc = asyncpg_scenario
    w, frame, r = task_wait(sc, source)
    backend = {"pid": sc.truth["server_pid"], "command": sc.truth["server_comm"]}
    assert sc.truth["server_comm"] == "postgres"
    assert frame == "Connection._do_execute"
    assert w == socket_wait(sc.truth["sock"], "recv", source, backend), w
    if source == "live":
        # The peer is the server's port (the connection was made to it).
        assert w["peer"] == "127.0.0.1:%d" % int(sc.args[1])
        assert r["errors"] == [], r["errors"]


@pytest.mark.parametrize("source", SOURCES)
def test_aiohttp_client_waits_on_its_server(aiohttp_scenario, source):
    sc = aiohttp_scenario
    w, frame, r = task_wait(sc, source)
    me = {"pid": sc.pid, "command": sc.truth["comm"]}
    assert frame == "DataQueue.read"
    assert w == socket_wait(sc.truth["sock"], "recv", source, me), w
    if source == "live":
        # The server accepted exactly this connection: its two ends, swapped.
        acc = sc.truth["accepted"]
        assert (w["local"], w["peer"]) == (acc["peer"], acc["local"])
        assert r["errors"] == [], r["errors"]


def thread_of(r, native_id):
    (t,) = [t for t in r["threads"] if t["native_id"] == native_id]
    return t


@pytest.mark.parametrize("source", SOURCES)
def test_threads_wait_on_their_child(threads_scenario, source):
    sc = threads_scenario
    r = report(sc, source)
    child = {"pid": sc.truth["child"]["pid"], "command": sc.truth["child"]["comm"]}
    for key in ("tcp", "unix"):
        rec = sc.truth[key]
        t = thread_of(r, rec["native_id"])
        w = dict(t["waiting"])
        assert w.pop("frame") == 0
        want = socket_wait(rec, "recv", source, child)
        if key == "unix":
            # A socketpair's ends have no names (Python says ""; the report, null).
            assert (rec["local"], rec["peer"]) == ("", "")
            want.update(local=None, peer=None)
        assert w == want, (key, w)
    shared = sc.truth["shared"]
    w = dict(thread_of(r, shared["native_id"])["waiting"], frame=None)
    assert w == dict(socket_wait(shared, "recv", source, None), local=None, peer=None,
                     frame=None), w
    if source == "live":
        holders = sorted([sc.pid, child["pid"]])
        assert r["errors"] == [{
            "address": 0,
            "what": "thread %d: fd %d: its peer, socket %d, is held by 2 processes (%d, %d): "
                    "none is named" % (shared["native_id"], shared["fd"], sc.truth["shared_other"],
                                       *holders)}], r["errors"]


def thread_lines(sc, source):
    """The verdict's lines of the threads scenario's readers whose peer one process holds."""
    tcp, unix, child = sc.truth["tcp"], sc.truth["unix"], sc.truth["child"]
    if source == "live":
        want_tcp = "recv from %s (%s, pid %d), local %s" % (tcp["peer"], child["comm"],
                                                             child["pid"], tcp["local"])
        want_unix = "recv from pid %d (%s)" % (child["pid"], child["comm"])
    else:
        want_tcp = want_unix = "recv"
    line = 'thread %d "%s" waits on socket fd %d (%s)'
    return [line % (tcp["native_id"], "tcp_reader", tcp["fd"], want_tcp),
            line % (unix["native_id"], "unix_reader", unix["fd"], want_unix)]


@pytest.mark.parametrize("source", SOURCES)
def test_the_verdict_names_the_peer_process(threads_scenario, source):
    sc = threads_scenario
    lines = cli(sc, source).split("\n\n", 1)[0].splitlines()
    for line in thread_lines(sc, source):
        assert line in lines, lines


def task_line(sc, source, function, by):
    """The verdict's one task line: the task's socket wait, the process at its other end, at
    the scenario's own frame (asyncpg's and aiohttp's frames are installed packages)."""
    t, s = sc.truth["task"], sc.truth["sock"]
    words = ("recv from %s (%s, pid %d), local %s" % (s["peer"], by["command"], by["pid"],
                                                      s["local"]) if source == "live" else "recv")
    return 'task %#x "%s" waits on socket fd %d (%s) in %s (why_peers.py:%d)' % (
        t["id"], t["name"], s["fd"], words, function, t["line"])


def task_lines(sc, source):
    """The verdict's lines of the scenario's task (the main task waits on an Event apart)."""
    me = "task %#x " % sc.truth["task"]["id"]
    return [line for line in cli(sc, source).split("\n\n", 1)[0].splitlines()
            if line.startswith(me)]


@pytest.mark.parametrize("source", SOURCES)
def test_the_verdict_names_the_backend_of_the_query(asyncpg_scenario, source):
    sc = asyncpg_scenario
    backend = {"pid": sc.truth["server_pid"], "command": sc.truth["server_comm"]}
    assert task_lines(sc, source) == [task_line(sc, source, "query", backend)]


@pytest.mark.parametrize("source", SOURCES)
def test_the_verdict_names_the_server_of_the_client(aiohttp_scenario, source):
    sc = aiohttp_scenario
    me = {"pid": sc.pid, "command": sc.truth["comm"]}
    assert task_lines(sc, source) == [task_line(sc, source, "aiohttp_main.<locals>.client", me)]


def unaccepted_wait(sc, rec, source):
    """The wait on a connection not accepted yet: its peer the listener's address, its
    `peer_process` the server; an unbound client has no name (Python says "")."""
    server = sc.truth["server"]
    assert rec["local"] == "" and rec["peer"] in (server["path"], server["abstract"]), rec
    want = socket_wait(rec, "recv", source, {"pid": server["pid"], "command": server["comm"]})
    want["local"] = None
    return want


@pytest.mark.parametrize("source", SOURCES)
def test_connections_not_accepted_yet_name_the_server(unaccepted_scenario, source):
    sc = unaccepted_scenario
    r = report(sc, source, "--tasks")
    server = sc.truth["server"]
    for key, address in (("path", server["path"]), ("abstract", server["abstract"])):
        rec = sc.truth["readers"][key]
        w = dict(thread_of(r, rec["native_id"])["waiting"])
        assert w.pop("frame") == 0
        assert w == unaccepted_wait(sc, rec, source), (key, w)
        task = sc.truth["clients"][key]
        (t,) = [t for t in r["tasks"] if t["id"] == task["task"]["id"]]
        assert t["name"] == task["task"]["name"]
        w = dict(t["waiting"])
        assert t["frames"][w.pop("frame")]["function"] == "StreamReader._wait_for_data"
        assert w == unaccepted_wait(sc, task["sock"], source), (key, w)
        if source == "live":
            assert w["peer"] == address
    if source == "live":
        assert r["errors"] == [], r["errors"]


def unaccepted_lines(sc, source):
    """The verdict's lines of the connections not accepted yet: live each names the server;
    from a core the two tasks' waits (no peer known) are one group."""
    server = sc.truth["server"]
    line = sc.truth["clients"]["path"]["task"]["line"]
    lines = []
    for key, address in (("path", server["path"]), ("abstract", server["abstract"])):
        words = ("recv from %s (%s, pid %d)" % (address, server["comm"], server["pid"])
                 if source == "live" else "recv")
        rec = sc.truth["readers"][key]
        lines.append('thread %d "%s_reader" waits on socket fd %d (%s)' % (
            rec["native_id"], key, rec["fd"], words))
        task = sc.truth["clients"][key]
        assert task["task"]["line"] == line
        if source == "live":
            lines.append('task %#x "%s" waits on socket fd %d (%s) in unaccepted_client '
                         '(why_peers.py:%d)' % (task["task"]["id"], task["task"]["name"],
                                                task["sock"]["fd"], words, line))
    if source == "core":
        lines.append("2 tasks wait on sockets (recv) in unaccepted_client (why_peers.py:%d)"
                     % line)
    return lines


@pytest.mark.parametrize("source", SOURCES)
def test_the_verdict_names_the_server_not_accepting(unaccepted_scenario, source):
    sc = unaccepted_scenario
    lines = cli(sc, source, "--tasks").split("\n\n", 1)[0].splitlines()
    for line in unaccepted_lines(sc, source):
        assert line in lines, lines


def live_peer_lines(sc):
    """The lines of a live verdict that name the process at a wait's other end, from the
    scenario's record: `(postgres, pid N)`, `(python3, pid N)`."""
    if sc.truth["mode"] == "asyncpg":
        return [task_line(sc, "live", "query", {"pid": sc.truth["server_pid"],
                                                "command": sc.truth["server_comm"]})]
    return (thread_lines if sc.truth["mode"] == "threads" else unaccepted_lines)(sc, "live")


def debugger_verdict(text):
    """The verdict a debugger's `py-why` printed in `text` (what followed its marker), less the
    debugger's echo of the command (lldb's)."""
    return verdict(text.split("py-why\n", 1)[-1].lstrip("\n"))


def gdb_why_is_the_cli_why(sc, memory):
    """gdb attached to the live scenario (memory read directly, or through gdb): `py-why`'s
    verdict is the CLI's `pid --why`, and names the processes the record does."""
    want = verdict(cli(sc, "live"))
    out, err = run_gdb(sc.interp, "set pyunwind-memory %s" % memory, "echo @@TEXT@@\\n", "py-why",
                       pid=sc.pid)
    got = debugger_verdict(out.split("@@TEXT@@", 1)[1])
    assert got == want, (got, want, err)
    lines = got.splitlines()
    for line in live_peer_lines(sc):
        assert line in lines, (line, lines)


@pytest.mark.parametrize("memory", MEMORY)
def test_gdb_py_why_names_the_child(threads_scenario, memory):
    gdb_why_is_the_cli_why(threads_scenario, memory)


@pytest.mark.parametrize("memory", MEMORY)
def test_gdb_py_why_names_the_backend(asyncpg_scenario, memory):
    gdb_why_is_the_cli_why(asyncpg_scenario, memory)


@pytest.mark.parametrize("memory", MEMORY)
def test_gdb_py_why_names_the_server_not_accepting(unaccepted_scenario, memory):
    gdb_why_is_the_cli_why(unaccepted_scenario, memory)

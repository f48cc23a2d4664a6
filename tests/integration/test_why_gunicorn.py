"""--why on gunicorn 27 from PyPI (issue 37), sync and gevent workers, 2 of each: the arbiter
waiting for signals is an idle `master` (its control server's asyncio thread an idle
`event_loop`), a sync worker waiting for a connection an idle `server`, the busy worker's
request waits on its upstream socket with the fd and the peer the request recorded
(tests/scenarios/why_gunicorn.py and why_gunicorn_app.py), and the verdict leads with that wait,
never with an idle thread. Under gevent, with `--greenlets`: the request greenlet's socket
wait names its fd and peer too, the one in `gevent.sleep` a `sleep`, and gevent's thread pool
workers (started by the resolver for `socket.create_connection`) are idle `pool_worker`s.

The whole tree is read with `pid --children ARBITER` (as test_many.py does) live; the arbiter
and the busy workers from gcore cores too. gunicorn comes from tools/gunicorn.sh and gevent
from tools/greenlet.sh's `latest` set; on the free-threaded 3.13t only the sync workers run
(gevent ships no free-threaded wheel, see test_greenlets.GEVENT_ABSENT)."""

import json
import os
import signal
import subprocess

import pytest

import harness
from test_greenlets import GEVENT_ABSENT, abi
from test_why_state import core_syscalls
from test_why_io import (INTERPS, SOURCES, by_native_id, cli, core_of, idle_line, idle_words,
                         line_of, peer_process_of, python_stack, report,
                         socket_wait, truth_stack, verdict)

GUNICORN_VERSION = "27.0.1"
CLI_TIMEOUT = 120
CASES = [(i, "sync") for i in INTERPS] + [(i, "gevent") for i in INTERPS
                                          if i.id not in GEVENT_ABSENT]


def gunicorn_dir():
    path = harness.cache_dir() / "gunicorn" / GUNICORN_VERSION
    if not (path / "STAMP").is_file():
        raise harness.HarnessError("%s is missing: run tools/gunicorn.sh (tools/test-env.sh)"
                                   % path)
    return path


def greenlet_dir(interp):
    path = harness.cache_dir() / "greenlet" / "latest" / abi(interp)
    if not (path / "STAMP").is_file():
        raise harness.HarnessError("%s is missing: run tools/greenlet.sh (tools/test-env.sh)"
                                   % path)
    return path


@pytest.fixture(scope="module", params=CASES, ids=lambda c: "%s-%s" % (c[0].id, c[1]))
def server(request):
    interp, worker_class = request.param
    env = {"PYUNWIND_GUNICORN": str(gunicorn_dir()),
           "PYUNWIND_GREENLET": str(greenlet_dir(interp))}
    with harness.Scenario(interp, "why_gunicorn", args=[worker_class], env=env,
                          timeout=90) as sc:
        truth = sc.truth
        sc.arbiter = truth["arbiter"]["pid"]
        sc.workers = sorted(w["pid"] for w in truth["workers"])
        # Every process stopped where it idles, for the module's length: the arbiter wakes
        # every second to tend its workers, a gevent worker's hub too (and its GC list, on
        # which greenlets are found, may change then); read or dumped while awake, a process
        # is not idle (CI once caught the arbiter so, with three test workers on two cores).
        stopped = []
        try:
            for pid in [sc.arbiter] + sc.workers:
                harness.stop_idle(pid, truth["tasks"][str(pid)])
                stopped.append(pid)
            sc.cores = {pid: core_of(sc, pid) for pid in [sc.arbiter] + truth["busy"]}
            yield sc
        finally:
            for pid in stopped:
                os.kill(pid, signal.SIGCONT)


def tree(sc):
    """{pid: report} of `pid --children ARBITER --why --greenlets --json`: the whole tree at
    once, live (read once per scenario, every process stopped where it idles: see `server`).
    Read once, with no error."""
    if not hasattr(sc, "tree"):
        proc = subprocess.run([str(harness.cli_path()), "pid", "--children", str(sc.arbiter),
                               "--why", "--greenlets", "--json"], capture_output=True,
                              text=True, timeout=CLI_TIMEOUT, stdin=subprocess.DEVNULL)
        harness.assert_no_panic(proc.stderr, proc.returncode)
        assert proc.returncode == 0, proc.stderr
        reports = {}
        for line in proc.stdout.splitlines():
            r = harness.check_report_schema(json.loads(line))
            assert r["errors"] == [], (r["pid"], r["errors"])
            reports[r["pid"]] = r
        sc.tree = reports
    return sc.tree


def qualified(name):
    """A function's name as a frame shows it: 3.10's code objects have no qualified name."""
    return (name, name.rsplit(".", 1)[-1])


def process_report(sc, source, pid):
    if source == "live":
        return tree(sc)[pid]
    return report(sc, "core", "--greenlets", core=sc.cores[pid])


def requests(sc, name):
    return [r for r in sc.truth["requests"] if r["name"] == name]


def test_the_tree_is_the_arbiter_and_its_workers(server):
    sc = server
    reports = tree(sc)
    assert sorted(reports) == sorted([sc.arbiter] + sc.workers)
    for pid, r in reports.items():
        assert r["errors"] == [], (pid, r["errors"])
        assert sorted(by_native_id(r)) == sc.truth["tasks"][str(pid)], pid


@pytest.mark.parametrize("source", SOURCES)
def test_arbiter_is_an_idle_master(server, source):
    sc = server
    r = process_report(sc, source, sc.arbiter)
    ts = by_native_id(r)
    main = ts[sc.arbiter]
    assert (main["state"], main["idle"]) == ("idle", "master"), main
    assert main["frames"][0]["function"] in qualified("Arbiter.wait_for_signals")
    assert main["frames"][0]["file"].endswith("/gunicorn/arbiter.py")
    # The control socket server: an asyncio loop in a thread with nothing to do.
    (control,) = [t for n, t in ts.items() if n != sc.arbiter]
    assert (control["state"], control["idle"]) == ("loop_idle", "event_loop"), control
    text = cli(sc, source, pid=sc.arbiter, core=sc.cores[sc.arbiter])
    lines = verdict(text)
    assert lines[0] == "No crash, deadlock or blocked wait found.", lines
    assert idle_line(lines, 2) == idle_words(["master", "event_loop"])
    # Its one task, in asyncio's Server.serve_forever: the task rows of the idle table (the
    # tasks are read on 3.11+).
    tasks = ["1 idle task: 1 server waiting for connections"] if sc.interp.minor >= 11 else []
    assert lines[2:] == tasks, lines


def upstream_process(sc, source):
    """The process at the other end of a request's upstream connection, live: the scenario,
    whose listening socket holds it in its backlog (nobody accepts)."""
    return peer_process_of(sc.pid) if source == "live" else None


def busy(sc, name="upstream"):
    (req,) = requests(sc, name)
    return req


@pytest.mark.parametrize("source", SOURCES)
def test_busy_worker_waits_on_its_upstream(server, source):
    sc = server
    req = busy(sc)
    assert req["socket"]["peer"] == sc.truth["upstream"]
    r = process_report(sc, source, req["pid"])
    t = by_native_id(r)[req["native_id"]]
    if sc.truth["worker_class"] == "sync":
        socket_wait(t["waiting"], req["socket"], "recv", source, 0, upstream_process(sc, source))
        assert t["state"] == "syscall" and t["idle"] is None, t
        assert python_stack(t["frames"]) == truth_stack(req["frames"])
    else:
        # The request runs in a greenlet: its wait is the greenlet's; the thread runs the hub.
        g = {x["address"]: x for x in r["greenlets"]}[req["greenlet"]]
        frames = python_stack(g["frames"])
        app = frames.index(truth_stack(req["frames"])[0])
        assert frames[app:] == truth_stack(req["frames"]), frames
        # The wait's frame: the gevent socket method the request called, right above it.
        socket_wait(g["waiting"], req["socket"], "recv", source, app - 1,
                    upstream_process(sc, source))
        assert g["frames"][app - 1]["file"].endswith(("/gevent/_socket3.py",
                                                      "/gevent/_socketcommon.py"))
        assert (t["state"], t["idle"]) == ("loop_idle", "event_loop"), t


@pytest.mark.parametrize("source", SOURCES)
def test_busy_worker_verdict_leads_with_the_socket_wait(server, source):
    sc = server
    req = busy(sc)
    lines = verdict(cli(sc, source, "--greenlets", pid=req["pid"], core=sc.cores[req["pid"]]))
    s = req["socket"]
    if sc.truth["worker_class"] == "sync":
        at = line_of(lines, req["native_id"], "MainThread")
        assert at == 0, lines
        if source == "live":
            up = upstream_process(sc, source)
            assert lines[0] == ('thread %d "MainThread" waits on socket fd %d (recv from %s '
                                '(%s, pid %d), local %s)' % (req["native_id"], s["fd"], s["peer"],
                                                             up["command"], up["pid"], s["local"]))
        else:
            assert lines[0] == 'thread %d "MainThread" waits on socket fd %d (recv)' % (
                req["native_id"], s["fd"])
        assert len(lines) == 1, lines
    else:
        # One line for the worker's greenlets: the socket wait, named as a thread's, then
        # those in gevent.sleep; then the worker's hub and gevent's thread pool, counted idle.
        (pid, nid) = (req["pid"], req["native_id"])
        # In gevent.sleep: the sleep requests this worker took, and the worker's own loop
        # (GeventWorker.run sleeps a second between heartbeats, gunicorn/workers/ggevent.py).
        sleeps = 1 + sum(r["pid"] == pid for r in requests(sc, "sleep"))
        if source == "live":
            up = upstream_process(sc, source)
            with open("/proc/%d/task/%d/comm" % (pid, nid), encoding="utf-8") as f:
                head = 'thread %d "%s"' % (nid, f.read().strip())
            on = "recv from %s (%s, pid %d), local %s" % (s["peer"], up["command"], up["pid"],
                                                          s["local"])
            threads = os.listdir("/proc/%d/task" % pid)
        else:
            head, on = "thread %d" % nid, "recv"
            threads = core_syscalls(sc.cores[pid])
        parts = ["1 on socket fd %d (%s)" % (s["fd"], on)]
        parts.append("%d in gevent.sleep" % sleeps)
        assert lines == ["Greenlets of %s wait: %s" % (head, ", ".join(parts)),
                         idle_words(["event_loop"] + ["pool_worker"] * (len(threads) - 1))], lines


def test_idle_sync_worker_waits_for_a_connection(server):
    sc = server
    idle = [p for p in sc.workers if p not in sc.truth["busy"]]
    if sc.truth["worker_class"] != "sync":
        # gevent: both workers' hubs are event loops; their pool threads idle pool workers.
        for pid in sc.workers:
            ts = by_native_id(tree(sc)[pid])
            assert (ts[pid]["state"], ts[pid]["idle"]) == ("loop_idle", "event_loop"), ts[pid]
            for n, t in ts.items():
                if n != pid:
                    assert (t["state"], t["idle"]) == ("idle", "pool_worker"), t
                    assert any(f["function"] in qualified("_WorkerGreenlet.run")
                               and f["file"].endswith("/gevent/threadpool.py")
                               for f in t["frames"]), t
        return
    assert len(idle) == 1
    (pid,) = idle
    t = by_native_id(tree(sc)[pid])[pid]
    assert (t["state"], t["idle"]) == ("idle", "server"), t
    assert t["frames"][0]["function"] in qualified("SyncWorker.wait")
    assert t["frames"][0]["file"].endswith("/gunicorn/workers/sync.py")
    lines = verdict(cli(sc, "live", pid=pid))
    assert lines[0] == "No crash, deadlock or blocked wait found.", lines
    assert idle_line(lines, 1) == idle_words(["server"])


def test_sleeping_greenlet(server):
    sc = server
    if sc.truth["worker_class"] != "gevent":
        assert requests(sc, "sleep") == []
        return
    req = busy(sc, "sleep")
    for source in SOURCES:
        if source == "core" and req["pid"] not in sc.cores:
            continue
        r = process_report(sc, source, req["pid"])
        g = {x["address"]: x for x in r["greenlets"]}[req["greenlet"]]
        frames = python_stack(g["frames"])
        app = frames.index(truth_stack(req["frames"])[0])
        assert g["waiting"] == {"kind": "sleep", "object": None, "type": None, "owner": None,
                                "frame": app - 1}, g["waiting"]

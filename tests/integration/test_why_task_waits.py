"""--why --tasks over asyncio tasks that wait beyond asyncio's primitives (docs/report.md, "What a
task waits on"): an executor job and `to_thread` (the worker's native id and the job's
function), `asyncio.sleep` (its deadline, live), a subprocess (its pid and command), a future
nothing else refers to (`orphan: true`) and one kept in a list (`orphan: false`). Checked
against tests/scenarios/why_task_waits.py's own record: each task's id, the future it awaits,
the worker threads' native ids, the sleep's `TimerHandle._when`, the child's pid. Live and from
a gcore core; with the C Task and the pure-Python one."""

import re
import time

import pytest

import harness
from test_stacks import json_from
from test_why_io import comm_of, peer_process_of

CLI_TIMEOUT = 60
VARIANTS = [(i, "c") for i in ["pyenv-3.11", "pyenv-3.12", "pyenv-3.13", "debian-3.11",
                               "debian-3.14", "debian-3.15", "ft-3.13t"]] + [("pyenv-3.12", "py")]
SOURCES = ["live", "core"]


def variant_id(v):
    return v[0] if v[1] == "c" else "%s-%s" % v


@pytest.fixture(scope="module", params=VARIANTS, ids=variant_id)
def scenario(request):
    interp_id, impl = request.param
    interp = harness.pick([interp_id])[0]
    with harness.Scenario(interp, "why_task_waits", args=(impl,)) as sc:
        assert sc.truth["impl"] == impl
        sc.core = sc.make_core()
        yield sc


def run_cli(sc, source, *extra):
    target = ["pid", str(sc.pid)] if source == "live" else ["core", sc.core]
    before = time.monotonic()
    rc, out, err = harness.run([harness.cli_path()] + target + ["--why", "--tasks"] + list(extra),
                               timeout=CLI_TIMEOUT)
    after = time.monotonic()
    harness.assert_no_panic(out + err, rc)
    assert rc == 0, err
    return out, before, after


def expected_waits(sc, source):
    """name -> `waiting` as the scenario recorded it, but the frame index and `remaining_s`."""
    t = sc.truth
    fut = {name: task["fut"] for name, task in t["tasks"].items()}
    future = "_asyncio.Future" if t["impl"] == "c" else "Future"

    def wait(name, kind, **on):
        return dict({"kind": kind, "object": fut[name], "type": future, "owner": None}, **on)

    child = {"kind": "child", "type": "_UnixSubprocessTransport", "owner": None,
             "pid": t["child"]["pid"], "command": " ".join(t["child"]["argv"])}
    return {
        "executor": wait("executor", "executor", thread=t["executor"]["native_id"],
                         job="blocking_recv"),
        "threaded": wait("threaded", "executor", thread=t["threaded"]["native_id"],
                         job="blocking_lock"),
        "sleeper": wait("sleeper", "sleep"),
        "orphan": wait("orphan", "future", orphan=True),
        "kept": wait("kept", "future", orphan=False),
        "child": child,
        "streamer": socket_wait(sc, t["streamer"], source),
        "sockrecv": socket_wait(sc, t["sockrecv"], source),
    }


def socket_wait(sc, rec, source):
    """A task's wait on the socket the scenario recorded; its addresses live only, and so is
    the process at its other end: the scenario itself, whose SILENT never accepts (the
    connection waits in SILENT's backlog: the process holding SILENT is the one that would)."""
    live = source == "live"
    return {"kind": "socket", "object": rec["id"], "type": rec["type"], "owner": None,
            "fd": rec["fd"], "direction": "recv", "local": rec["local"] if live else None,
            "peer": rec["peer"] if live else None,
            "peer_process": peer_process_of(sc.pid) if live else None}


@pytest.mark.parametrize("source", SOURCES)
def test_every_task_says_what_it_waits_on(scenario, source):
    sc = scenario
    out, before, after = run_cli(sc, source, "--json")
    r = json_from(out)
    harness.check_report_schema(r)
    tasks = {t["name"]: t for t in r["tasks"]}
    for name, want in expected_waits(sc, source).items():
        t = tasks[name]
        assert t["id"] == sc.truth["tasks"][name]["id"], name
        got = dict(t["waiting"])
        frame = got.pop("frame")
        # The frame that waits: the task's own for a future it awaits itself, asyncio's
        # `sleep`, `to_thread`, or the transport's `_wait` inside `Process.wait()`.
        own = {"sleeper": "sleep", "threaded": "to_thread",
               "child": "BaseSubprocessTransport._wait",
               "streamer": "StreamReader._wait_for_data",
               "sockrecv": "BaseSelectorEventLoop.sock_recv"}.get(name, name)
        assert t["frames"][frame]["function"] == own, (name, t["frames"])
        if name == "child":
            got.pop("object")
        remaining = got.pop("remaining_s", "absent")
        if name == "sleeper":
            when = sc.truth["sleep_when"]
            if source == "core":
                assert remaining is None
            else:
                assert round(when - after, 3) - 0.001 <= remaining <= round(when - before, 3) \
                    + 0.001, (remaining, when, before, after)
        else:
            assert remaining == "absent", name
        assert got == want, name
    # The frame of each task's own coroutine is at its marker's line.
    for name in expected_waits(sc, source):
        (own,) = [f for f in tasks[name]["frames"] if f["function"] == name]
        assert own["line"] == sc.truth["tasks"][name]["line"], name


@pytest.mark.parametrize("source", SOURCES)
def test_the_verdict_names_every_task_wait(scenario, source):
    """A line per group of tasks that wait alike: the outside world first (pair's two sockets
    to one peer, then the child, the executor jobs with their workers' waits, the orphan
    future, the sockets), then the rest (fanout's three on one Event, Task-1's Event, the kept
    future, the sleep), the largest group first, then the report's task order, each ending at
    the tasks' own line. The executor workers get no line of their own; the server task is
    counted idle."""
    sc = scenario
    out, before, after = run_cli(sc, source)
    lines = out.split("\n\n", 1)[0].splitlines()
    r = json_from(run_cli(sc, source, "--json")[0])
    order = [t["name"] for t in r["tasks"]]
    t = sc.truth
    ids = {name: task["id"] for name, task in t["tasks"].items()}
    ids["Task-1"] = next(x["id"] for x in r["tasks"] if x["name"] == "Task-1")
    future = "_asyncio.Future" if t["impl"] == "c" else "Future"

    def task(name):
        return 'task %#x "%s"' % (ids[name], name)

    def at(name, function=None):
        line = t["tasks"][name]["line"] if name in t["tasks"] else t["main_line"]
        return " in %s (why_task_waits.py:%d)" % (function or name, line)

    # Every socket is connected to SILENT, the scenario's own listening socket: the process at
    # the other end is the scenario.
    by = " (%s, pid %d)" % (comm_of(sc.pid), sc.pid)

    def sock(rec):
        words = ("recv from %s%s, local %s" % (rec["peer"], by, rec["local"]) if source == "live"
                 else "recv")
        return "waits on socket fd %d (%s)" % (rec["fd"], words)

    ex, th = t["executor"], t["threaded"]
    (main,) = [x for x in r["tasks"] if x["name"] == "Task-1"]
    assert main["waiting"]["type"] == "Event", main["waiting"]
    left = ", N s left" if source == "live" else ""
    outside = {
        "child": "%s waits for child %d (sleep 1000) to exit%s" % (
            task("child"), t["child"]["pid"], at("child")),
        "executor": '%s waits for executor job blocking_recv%s, which runs on thread %d "%s" and '
                    "%s" % (task("executor"), at("executor"), ex["native_id"], ex["name"],
                            sock(ex)),
        "orphan": "%s awaits %s %#x that nothing else refers to%s: it can never complete" % (
            task("orphan"), future, t["tasks"]["orphan"]["fut"], at("orphan")),
        "sockrecv": "%s %s%s" % (task("sockrecv"), sock(t["sockrecv"]), at("sockrecv")),
        "streamer": "%s %s%s" % (task("streamer"), sock(t["streamer"]), at("streamer")),
        "threaded": '%s waits for executor job blocking_lock%s, which runs on thread %d "%s" and '
                    "waits for Lock %#x (its holder is unknown: a Lock taken by acquire() leaves "
                    "no trace)" % (task("threaded"), at("threaded"), th["native_id"], th["name"],
                                   t["held"]),
    }
    other = {
        "Task-1": "%s waits for asyncio Event %#x%s" % (
            task("Task-1"), main["waiting"]["object"], at("Task-1", "main")),
        "kept": "%s awaits %s %#x%s" % (task("kept"), future, t["tasks"]["kept"]["fut"],
                                        at("kept")),
        "sleeper": "%s sleeps (asyncio.sleep%s)%s" % (task("sleeper"), left, at("sleeper")),
    }
    pair = ("wait on socket recv from %s%s" % (t["silent"], by) if source == "live"
            else "wait on sockets (recv)")
    # The largest group first in each class: pair's two, fanout's three.
    want = (["2 tasks %s%s" % (pair, at("pair-0", "pair"))] +
            [outside[n] for n in order if n in outside] +
            ["3 tasks wait for asyncio Event %#x%s" % (t["fan"], at("fanout-0", "fanout"))] +
            [other[n] for n in order if n in other])
    got = []
    for line in lines:
        m = re.search(r"asyncio\.sleep, ([0-9.]+) s left", line)
        if m:
            when = t["sleep_when"]
            assert round(when - after, 1) - 0.1 <= float(m.group(1)) <= round(when - before, 1) \
                + 0.1, line
            line = line[:m.start(1)] + "N" + line[m.end(1):]
        got.append(line)
    assert [line for line in got if line.startswith(("task ", "2 tasks", "3 tasks"))] == want, \
        lines
    assert got[-2:] == ["1 idle: 1 event loop", "1 idle task: 1 server waiting for connections"]
    workers = ['thread %d "' % ex["native_id"], 'thread %d "' % th["native_id"]]
    assert not [line for line in got if line.startswith(tuple(workers))], lines


@pytest.mark.parametrize("source", SOURCES)
def test_task_waits_group_the_tasks(scenario, source):
    """`task_waits[]` (with or without --tasks): fanout's three tasks in one group of class
    `other`, pair's two in one of class `outside` (their sockets' peer is one, live; from a core
    the peer is null alike), the server task alone in `idle`, every other task alone."""
    sc = scenario
    t = sc.truth
    ids = {name: task["id"] for name, task in t["tasks"].items()}
    target = ["pid", str(sc.pid)] if source == "live" else ["core", sc.core]
    plain = harness.run([harness.cli_path()] + target + ["--why", "--json"], timeout=CLI_TIMEOUT)
    harness.assert_no_panic(plain[1] + plain[2], plain[0])
    assert plain[0] == 0, plain[2]
    for out in (plain[1], run_cli(sc, source, "--json")[0]):
        r = json_from(out)
        groups = {tuple(g["tasks"]): g for g in r["task_waits"]}
        fan = groups[tuple(ids["fanout-%d" % i] for i in range(3))]
        assert (fan["class"], fan["name"], fan["function"], fan["line"]) == (
            "other", "fanout-0", "fanout", t["tasks"]["fanout-0"]["line"])
        assert (fan["waiting"]["kind"], fan["waiting"]["object"]) == ("asyncio_event", t["fan"])
        pair = groups[(ids["pair-0"], ids["pair-1"])]
        assert (pair["class"], pair["function"], pair["waiting"]["kind"]) == (
            "outside", "pair", "socket")
        assert pair["waiting"]["peer"] == (t["silent"] if source == "live" else None)
        serving = groups[(ids["serving"],)]
        assert (serving["class"], serving["idle"], serving["function"]) == ("idle", "server", None)
        grouped = sorted(i for g in r["task_waits"] for i in g["tasks"])
        assert len(grouped) == len(set(grouped)) == len(t["tasks"]) + 1  # and Task-1

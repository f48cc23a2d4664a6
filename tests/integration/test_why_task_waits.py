"""--why --tasks over asyncio tasks that wait beyond asyncio's primitives (docs/report.md, "What a
task waits on"): an executor job and `to_thread` (the worker's native id and the job's
function), `asyncio.sleep` (its deadline, live), a subprocess (its pid and command), a future
nothing else refers to (`orphan: true`) and one kept in a list (`orphan: false`). Checked
against tests/scenarios/why_task_waits.py's own record: each task's id, the future it awaits,
the worker threads' native ids, the sleep's `TimerHandle._when`, the child's pid. Live and from
a gcore core; with the C Task and the pure-Python one."""

import time

import pytest

import harness
from test_stacks import json_from
from test_why_io import comm_of, peer_process_of

CLI_TIMEOUT = 60
VARIANTS = [(i, "c") for i in ["pyenv-3.11", "pyenv-3.12", "pyenv-3.13", "debian-3.11",
                               "debian-3.14", "debian-3.15"]] + [("pyenv-3.12", "py")]
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
def test_the_verdict_names_the_job_the_child_and_the_orphan(scenario, source):
    sc = scenario
    out, _, _ = run_cli(sc, source)
    lines = out.split("\n\n", 1)[0].splitlines()
    t = sc.truth
    ids = {name: task["id"] for name, task in t["tasks"].items()}
    ex = t["executor"]
    sock = "recv from %s (%s, pid %d), local %s" % (
        ex["peer"], comm_of(sc.pid), sc.pid, ex["local"]) if source == "live" else "recv"
    future = "_asyncio.Future" if t["impl"] == "c" else "Future"
    task_lines = [line for line in lines if line.startswith("task ")]
    assert sorted(task_lines) == sorted([
        'task %#x "child" waits for child %d (sleep 1000) to exit'
        % (ids["child"], t["child"]["pid"]),
        'task %#x "executor" waits for executor job blocking_recv on thread %d "%s", '
        'which waits on socket fd %d (%s)' % (ids["executor"], ex["native_id"], ex["name"],
                                              ex["fd"], sock),
        'task %#x "orphan" awaits %s %#x that nothing else refers to: it can never complete '
        '(in orphan, why_task_waits.py:%d)' % (ids["orphan"], future, t["tasks"]["orphan"]["fut"],
                                              t["tasks"]["orphan"]["line"]),
        'task %#x "threaded" waits for executor job blocking_lock on thread %d "%s", '
        'which waits for Lock %#x (its holder is unknown: a Lock taken by acquire() leaves no '
        'trace)' % (ids["threaded"], t["threaded"]["native_id"], t["threaded"]["name"],
                    t["held"]),
    ]), lines

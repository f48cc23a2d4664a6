"""--why over asyncio event loops (docs/report.md, "Event loops: `state`, `blocked_by`,
`overdue_s`"): a loop blocked by a task in `time.sleep`, one busy in a task that spins, and an
idle one, checked against tests/scenarios/why_loops.py's own record (the loop's id and thread,
the running task's id, name, function, file and line, the ready queue's length, the earliest
timer's deadline, the number of waiting tasks). Live, `overdue_s` is checked against this
process's CLOCK_MONOTONIC before and after the CLI ran (the host's one clock); from a gcore core
it is null. The verdict's first line is compared whole, and gdb's `py-why` prints the same."""

import os
import re
import time

import pytest

import harness
from test_stacks import json_from, run_gdb

CLI_TIMEOUT = 60
INTERPS = ["pyenv-3.11", "pyenv-3.12", "pyenv-3.13", "debian-3.11", "debian-3.14", "debian-3.15",
           "ft-3.13t"]
# (interpreter, Task implementation, mode).
VARIANTS = ([(i, "c", "blocked") for i in INTERPS]
            + [("pyenv-3.12", "c", "busy"), ("debian-3.14", "c", "busy"),
               ("pyenv-3.12", "c", "idle"), ("debian-3.15", "c", "idle"), ("ft-3.13t", "c", "busy"),
               ("pyenv-3.13", "py", "blocked"), ("pyenv-3.12", "uvloop", "blocked"),
               ("debian-3.14", "uvloop", "blocked"), ("pyenv-3.12", "uvloop", "busy")])
SOURCES = ["live", "core"]
GDB_INTERPS = ["pyenv-3.12", "debian-3.14"]


def variant_id(v):
    return "-".join(x for x in v if x != "c")


@pytest.fixture(scope="module", params=VARIANTS, ids=variant_id)
def scenario(request):
    interp_id, impl, mode = request.param
    interp = harness.pick([interp_id])[0]
    env = {}
    if impl == "uvloop":
        env["PYUNWIND_UVLOOP"] = str(harness.cache_dir() / "uvloop" / ("cp3%d" % interp.minor))
    with harness.Scenario(interp, "why_loops", args=(impl, mode), env=env) as sc:
        assert (sc.truth["impl"], sc.truth["mode"]) == (impl, mode)
        sc.interp = interp
        if mode == "busy":
            harness.wait_on_cpu(sc.pid, sc.truth["loop"]["native_id"])
        sc.core = sc.make_core()
        yield sc


def run_cli(sc, source, *extra):
    """The CLI's output and CLOCK_MONOTONIC just before and just after it ran."""
    target = ["pid", str(sc.pid)] if source == "live" else ["core", sc.core]
    before = time.monotonic()
    rc, out, err = harness.run([harness.cli_path()] + target + ["--why"] + list(extra),
                               timeout=CLI_TIMEOUT)
    after = time.monotonic()
    harness.assert_no_panic(out + err, rc)
    assert rc == 0, err
    return out, before, after


def expected_loop(sc):
    """`loops[0]` as the scenario recorded it, but `overdue_s` (checked apart)."""
    t = sc.truth
    running = t["running"]
    blocked_by = None
    if running is not None:
        blocked_by = {"task": running["id"], "task_name": running["name"],
                      "function": running["function"], "file": running["file"],
                      "line": running["line"],
                      "call": "time.sleep" if t["mode"] == "blocked" else None}
    return {"id": t["loop"]["id"], "type": t["loop"]["type"],
            "native_id": t["loop"]["native_id"], "running": True, "state": t["mode"],
            "blocked_by": blocked_by, "ready": t["ready"], "tasks_waiting": t["tasks_waiting"]}


def overdue_bounds(sc, source, before, after):
    """The range `overdue_s` must be in: null from a core, without a timer or on uvloop."""
    when = sc.truth["earliest_when"]
    if source == "core" or when is None:
        return None
    return (round(before - when, 3) - 0.001, round(after - when, 3) + 0.001)


def check_loop_json(sc, source):
    """`--why --json`'s one loop against the scenario's record; the report."""
    out, before, after = run_cli(sc, source, "--json")
    r = json_from(out)
    harness.check_report_schema(r)
    (loop,) = r["loops"]
    overdue = loop.pop("overdue_s")
    loop.pop("frames")
    assert loop == expected_loop(sc)
    bounds = overdue_bounds(sc, source, before, after)
    if bounds is None:
        assert overdue is None
    else:
        assert bounds[0] <= overdue <= bounds[1], (overdue, bounds)
    return r


@pytest.mark.parametrize("source", SOURCES)
def test_the_loop_says_what_runs_on_it(scenario, source):
    sc = scenario
    r = check_loop_json(sc, source)
    queues_unread = [e for e in r["errors"] if e["address"] == sc.truth["loop"]["id"]]
    if sc.truth["impl"] == "uvloop":
        assert [e["what"] for e in queues_unread] == [
            "event loop %#x: %s keeps no _ready or _scheduled attribute: a loop written in C "
            "(uvloop keeps its ready queue in its Cython Loop and its timers in libuv's heap, "
            "whose layouts are not read): ready, overdue_s and its tasks' remaining_s are null"
            % (sc.truth["loop"]["id"], sc.truth["loop"]["type"])]
    else:
        assert queues_unread == []


def expected_line(sc, late):
    """The verdict's loop line, `late` the seconds it says (None: it gives none); None where
    the loop gets no line (idle, or busy with no timer read)."""
    t = sc.truth
    if t["mode"] == "idle" or (t["mode"] == "busy" and late is None):
        return None
    running = t["running"]
    line = 'event loop %#x on thread %d "%s" %s' % (
        t["loop"]["id"], t["loop"]["native_id"], loop_thread_name(t),
        "is blocked" if t["mode"] == "blocked" else "is busy")
    if late is not None:
        line += " for %.1f s" % late
    line += " by " if t["mode"] == "blocked" else " running "
    line += 'task "%s" in %s (%s:%d)' % (running["name"], running["function"],
                                        os.path.basename(running["file"]), running["line"])
    if t["mode"] == "blocked":
        line += ": time.sleep"
    return line + "; %d tasks wait" % t["tasks_waiting"]


def loop_thread_name(truth):
    (name,) = [t["name"] for t in truth["threads"] if t["native_id"] == truth["loop"]["native_id"]]
    return name


def verdict_lines(text):
    return text.split("\n\n", 1)[0].splitlines()


@pytest.mark.parametrize("source", SOURCES)
def test_the_verdict_leads_with_the_loop(scenario, source):
    sc = scenario
    out, before, after = run_cli(sc, source)
    lines = verdict_lines(out)
    bounds = overdue_bounds(sc, source, before, after)
    late = None
    m = re.search(r" for (\d+\.\d) s ", lines[0])
    if bounds is not None and m:
        late = float(m.group(1))
        assert round(bounds[0], 1) - 0.1 <= late <= round(bounds[1], 1) + 0.1, (late, bounds)
    want = expected_line(sc, late if bounds is not None else None)
    if want is None:
        assert not any(line.startswith("event loop") for line in lines), lines
        if sc.truth["mode"] == "idle":
            assert lines[-1] == "1 idle: 1 event loop", lines
        return
    assert lines[0] == want, lines
    # The loop's thread has no line of its own: the loop's says what it waits on.
    assert not any('thread %d "%s"' % (sc.truth["loop"]["native_id"], loop_thread_name(sc.truth))
                   in line for line in lines[1:]), lines


@pytest.fixture(scope="module", params=GDB_INTERPS)
def gdb_scenario(request):
    interp = harness.pick([request.param])[0]
    with harness.Scenario(interp, "why_loops", args=("c", "blocked")) as sc:
        sc.interp = interp
        sc.core = sc.make_core()
        yield sc


def test_gdb_py_why_prints_the_same_loop_line(gdb_scenario):
    sc = gdb_scenario
    out, _ = run_gdb(sc.interp, "echo @@TEXT@@\\n", "py-why", "echo @@JSON@@\\n",
                     "py-why --json", core=sc.core)
    text, js = out.split("@@TEXT@@\n", 1)[1].split("@@JSON@@\n")
    cli_text, _, _ = run_cli(sc, "core")
    assert verdict_lines(text) == verdict_lines(cli_text)
    assert verdict_lines(text)[0] == expected_line(sc, None)
    (loop,) = json_from(js)["loops"]
    loop.pop("frames")
    assert loop == dict(expected_loop(sc), overdue_s=None)

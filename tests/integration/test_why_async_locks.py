"""--why over asyncio tasks (docs/report.md, a task's `waiting` and `holding`, the `task_locks`
deadlock), checked against tests/scenarios/why_async_locks.py: every task's and primitive's
`id()`, every task's name and coroutine frames, the line of each task's own frame (its
`# <task> ...` marker) and of each `async with` holding a lock (its `# <task> takes ...`
marker) come from the scenario itself. Live (`pid PID --why --tasks --json`) and from a gcore
core (`core CORE --why --tasks --json`), with the C Task; also with uvloop's loop and with the
pure-Python Task on a few interpreters. 3.10 has no task graph: its own test below."""

import re

import pytest

import harness
from test_stacks import expected, got, json_from

CLI_TIMEOUT = 60
INTERPS = ["pyenv-3.11", "pyenv-3.12", "pyenv-3.13", "debian-3.11", "debian-3.14", "debian-3.15"]
# (interpreter, Task implementation): the C Task everywhere; uvloop's loop (tools/uvloop.sh,
# wheels for cp311 to cp315) and the pure-Python Task on a few.
VARIANTS = [(i, "c") for i in INTERPS] + [("pyenv-3.12", "uvloop"), ("debian-3.14", "uvloop"),
                                          ("pyenv-3.13", "py")]
SOURCES = ["live", "core"]
# The scenario's FOREVER: how long Task-1 sleeps.
FOREVER_SECONDS = 100000

# task -> (kind, object key, type, owner task or None, the library method that waits: the
# outermost asyncio frame of the task). `__aenter__` is an `async with` being entered.
WAITS = {
    "holder": ("asyncio_event", "PARK_H", "Event", None, "Event.wait"),
    "waiter": ("asyncio_lock", "L", "Lock", "holder", "__aenter__"),
    "acquirer": ("asyncio_lock", "L", "Lock", "holder", "Lock.acquire"),
    "d1": ("asyncio_lock", "B", "Lock", "d2", "__aenter__"),
    "d2": ("asyncio_lock", "A", "Lock", "d1", "__aenter__"),
    "condholder": ("asyncio_event", "PARK_C", "Event", None, "Event.wait"),
    "condenter": ("asyncio_condition", "C", "Condition", "condholder", "__aenter__"),
    # Condition.wait released C2's lock: no owner (and condwaiter holds nothing).
    "condwaiter": ("asyncio_condition", "C2", "Condition", None, "Condition.wait"),
    "eventer": ("asyncio_event", "EV", "Event", None, "Event.wait"),
    "getter": ("asyncio_queue_get", "Q", "Queue", None, "Queue.get"),
    "putter": ("asyncio_queue_put", "QF", "Queue", None, "Queue.put"),
    "semaphorer": ("asyncio_semaphore", "S", "Semaphore", None, "Semaphore.acquire"),
    # Barrier.wait awaits Barrier._wait, Condition.wait_for, Condition.wait: the outermost.
    "barrierer": ("asyncio_barrier", "BAR", "Barrier", None, "Barrier.wait"),
    "taker": ("asyncio_event", "PARK_T", "Event", None, "Event.wait"),
    # taker's `await L2.acquire()` leaves no trace of it.
    "l2waiter": ("asyncio_lock", "L2", "Lock", None, "__aenter__"),
}

# task -> [(kind, object key, type)] its `async with` blocks hold, in its own frame.
HOLDS = {
    "holder": [("asyncio_lock", "L", "Lock")],
    "d1": [("asyncio_lock", "A", "Lock")],
    "d2": [("asyncio_lock", "B", "Lock")],
    "condholder": [("asyncio_condition", "C", "Condition")],
}

# The tasks whose wait names its owner: one verdict line each.
OWNED = sorted(n for n, w in WAITS.items() if w[3])


def variant_id(v):
    return v[0] if v[1] == "c" else "%s-%s" % v


@pytest.fixture(scope="module", params=VARIANTS, ids=variant_id)
def scenario(request):
    interp_id, impl = request.param
    interp = harness.pick([interp_id])[0]
    env = {}
    if impl == "uvloop":
        env["PYUNWIND_UVLOOP"] = str(harness.cache_dir() / "uvloop" / ("cp3%d" % interp.minor))
    with harness.Scenario(interp, "why_async_locks", args=(impl,), env=env) as sc:
        assert sc.truth["impl"] == impl
        sc.core = sc.make_core()
        sc.outputs = {}
        yield sc


def run_cli(target, *extra):
    rc, out, err = harness.run([harness.cli_path()] + target + ["--why"] + list(extra),
                               timeout=CLI_TIMEOUT)
    harness.assert_no_panic(out + err, rc)
    assert rc == 0, err
    return out


def cli(sc, source, *extra):
    """The CLI's output, run once per source and options: the scenario stays at its stop."""
    key = (source,) + extra
    if key not in sc.outputs:
        target = ["pid", str(sc.pid)] if source == "live" else ["core", sc.core]
        sc.outputs[key] = run_cli(target, *extra)
    return sc.outputs[key]


def report(sc, source, *extra):
    return json_from(cli(sc, source, "--json", *extra))


def tasks_by_name(r):
    tasks = {t["name"]: t for t in r["tasks"]}
    assert len(tasks) == len(r["tasks"]), [t["name"] for t in r["tasks"]]
    return tasks


def task_id(sc, name):
    return sc.truth["tasks"][name]["id"]


def is_library(frame):
    return frame["file"].endswith(("/asyncio/locks.py", "/asyncio/queues.py"))


def outermost_library_frame(frames):
    """The index of the last of the asyncio/locks.py or queues.py frames the task's
    innermost frames are (its frames as the scenario recorded them). Under the pure-Python
    Task the innermost is the pure-Python Future's `__await__` (asyncio/futures.py), which the
    primitive's method awaits: the method is the frame that waits all the same."""
    n = 0
    while n < len(frames) and frames[n]["file"].endswith("/asyncio/futures.py"):
        n += 1
    start = n
    while n < len(frames) and is_library(frames[n]):
        n += 1
    assert n > start, frames
    return n - 1


def own_frame(sc, name):
    """The index of the task's own coroutine frame (its outermost) in its recorded frames."""
    frames = sc.truth["tasks"][name]["frames"]
    assert frames[-1]["function"] == name, frames
    return len(frames) - 1


def frame_at(t, index):
    f = t["frames"][index]
    return (f["function"], f["line"])


@pytest.mark.parametrize("source", SOURCES)
def test_every_task_listed_with_its_frames(scenario, source):
    sc = scenario
    tasks = tasks_by_name(report(sc, source, "--tasks"))
    assert sorted(tasks) == sorted(sc.truth["tasks"])
    for name, want in sc.truth["tasks"].items():
        assert tasks[name]["id"] == want["id"], name
        assert got(tasks[name]["frames"]) == expected(want["frames"]), name
    # Each worker's own frame is on its marker's line.
    for name, line in sc.truth["lines"].items():
        assert sc.truth["tasks"][name]["frames"][-1]["line"] == line, name


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("name", sorted(WAITS))
def test_task_waits(scenario, source, name):
    sc = scenario
    if name not in sc.truth["tasks"]:
        pytest.fail("the scenario has no task %s on %s" % (name, sc.interp.id))
    kind, key, type_name, owner, method = WAITS[name]
    t = tasks_by_name(report(sc, source, "--tasks"))[name]
    truth_frames = sc.truth["tasks"][name]["frames"]
    index = outermost_library_frame(truth_frames)
    assert t["waiting"] == {"kind": kind, "object": sc.truth["objects"][key], "type": type_name,
                            "owner": task_id(sc, owner) if owner else None, "frame": index}
    # The waiting frame is the library method the scenario calls into...
    function = t["frames"][index]["function"]
    assert function == method or function.endswith("." + method), function
    assert frame_at(t, index) == (truth_frames[index]["function"], truth_frames[index]["line"])
    # ... and the frame awaiting it is the task's own, on the line of its marker.
    assert index + 1 == own_frame(sc, name)
    assert frame_at(t, index + 1) == (name, sc.truth["lines"][name])


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("name", sorted(WAITS))
def test_task_holds(scenario, source, name):
    sc = scenario
    if name not in sc.truth["tasks"]:
        pytest.fail("the scenario has no task %s on %s" % (name, sc.interp.id))
    t = tasks_by_name(report(sc, source, "--tasks"))[name]
    own = own_frame(sc, name)
    # Held in the task's own frame, taken on the line of its `async with` (its marker).
    assert t["holding"] == [{"kind": kind, "object": sc.truth["objects"][key], "type": type_name,
                             "frame": own, "line": sc.truth["with_lines"][name]}
                            for kind, key, type_name in HOLDS.get(name, [])]
    if name in HOLDS:
        # The frame whose `async with` holds it: the task's own, now on its marker's line.
        assert frame_at(t, own) == (name, sc.truth["lines"][name])


@pytest.mark.parametrize("source", SOURCES)
def test_main_task_neither_waits_nor_holds(scenario, source):
    t = tasks_by_name(report(scenario, source, "--tasks"))["Task-1"]
    # asyncio.sleep is no primitive of locks.py or queues.py: a wait of kind `sleep` (its
    # deadline is FOREVER seconds after the loop started, so live it is less than that ahead).
    w = dict(t["waiting"])
    remaining = w.pop("remaining_s")
    # uvloop's timers are libuv's, not read (an error entry says so: test_why_loops.py).
    if source == "core" or scenario.truth["impl"] == "uvloop":
        assert remaining is None
    else:
        assert 0 < remaining < FOREVER_SECONDS, remaining
    assert t["frames"][w.pop("frame")]["function"] == "sleep"
    assert w.pop("object") == t["awaiting"]["id"]
    assert w == {"kind": "sleep", "type": t["awaiting"]["type"], "owner": None}
    assert t["holding"] == []


def expected_deadlock(sc, r):
    """d1 waits for B (d2's), d2 for A (d1's): listed from whichever the report lists first."""
    order = [t["id"] for t in r["tasks"]]
    d1, d2 = task_id(sc, "d1"), task_id(sc, "d2")
    objects = sc.truth["objects"]
    cycle = [(d1, objects["B"]), (d2, objects["A"])]
    if order.index(d2) < order.index(d1):
        cycle.reverse()
    return {"kind": "task_locks", "tasks": [c[0] for c in cycle],
            "objects": [c[1] for c in cycle], "threads": []}


@pytest.mark.parametrize("source", SOURCES)
def test_lock_order_deadlock_of_two_tasks(scenario, source):
    sc = scenario
    r = report(sc, source, "--tasks")
    # The only deadlock: no threads wait for each other, no task awaits another.
    assert r["deadlocks"] == [expected_deadlock(sc, r)]
    # Without --tasks the report lists no tasks, and finds the same deadlock.
    plain = report(sc, source)
    assert "tasks" not in plain
    assert plain["deadlocks"] == r["deadlocks"]


def main_thread_line(sc):
    """The main thread records the truth and blocks in `_truth.HELD.acquire()`."""
    main = next(t["native_id"] for t in sc.truth["threads"] if t["name"] == "MainThread")
    return ('thread %d "MainThread" waits for Lock %#x (its holder is unknown: a Lock taken by '
            'acquire() leaves no trace)' % (main, sc.truth["held"]))


# The loop thread, in its selector with no task running: counted, never listed (issue 37).
IDLE_LOOP = "1 idle: 1 event loop"


def verdict_of(text):
    """The verdict: the lines before the first blank line."""
    return text.split("\n\n", 1)[0].splitlines()


def expected_task_lines(sc, r, source):
    """Every waiting task's line (each waits alone in its own function, so every group is of
    one task): first those waiting for a lock whose holder is known, then the others, each
    in the report's task order, each ending at the task's own frame. Task-1 sleeps: live, the
    time left, which the caller checks, is written as N."""
    names = {t["id"]: t["name"] for t in r["tasks"]}
    objects = sc.truth["objects"]

    def task(i):
        return 'task %#x "%s"' % (i, names[i])

    owned, other = [], []
    for t in r["tasks"]:
        name = t["name"]
        # The innermost of the scenario's own frames (uvloop's run() wraps Task-1's main).
        own = next(f for f in sc.truth["tasks"][name]["frames"]
                   if f["file"].endswith("/why_async_locks.py"))
        at = " in %s (why_async_locks.py:%d)" % (own["function"], own["line"])
        if name == "Task-1":
            # uvloop's timers are libuv's, not read: no time left.
            left = ", N s left" if source == "live" and sc.truth["impl"] != "uvloop" else ""
            other.append("%s sleeps (asyncio.sleep%s)%s" % (task(t["id"]), left, at))
            continue
        _, key, type_name, owner, _ = WAITS[name]
        what = "%s waits for asyncio %s %#x" % (task(t["id"]), type_name, objects[key])
        if owner:
            owned.append("%s held by %s%s" % (what, task(task_id(sc, owner)), at))
        else:
            other.append(what + at)
    assert len(owned) == len(OWNED)
    return owned + other


def sleep_left(lines):
    """The verdict's lines with Task-1's time left checked and written as N."""
    out = []
    for line in lines:
        m = re.search(r"asyncio\.sleep, ([0-9.]+) s left", line)
        if m:
            assert 0 < float(m.group(1)) <= FOREVER_SECONDS, line
            line = line[:m.start(1)] + "N" + line[m.end(1):]
        out.append(line)
    return out


@pytest.mark.parametrize("source", SOURCES)
def test_verdict_lines(scenario, source):
    """`--why --tasks`: the deadlock (tasks by name), the main thread's wait (the loop
    thread, idle in its selector, waits for nothing), then every task's wait, those whose
    holder is known first, each with its own frame; then the idle loop thread, counted."""
    sc = scenario
    r = report(sc, source, "--tasks")
    names = {t["id"]: t["name"] for t in r["tasks"]}
    d = expected_deadlock(sc, r)
    deadlock = "Deadlock: asyncio tasks wait for each other's locks: " + "; ".join(
        'task %#x "%s" waits for asyncio lock %#x' % (t, names[t], o)
        for t, o in zip(d["tasks"], d["objects"]))
    assert sleep_left(verdict_of(cli(sc, source, "--tasks"))) == (
        [deadlock, main_thread_line(sc)] + expected_task_lines(sc, r, source) + [IDLE_LOOP])


@pytest.mark.parametrize("source", SOURCES)
def test_verdict_without_tasks(scenario, source):
    """`--why` alone lists no tasks, yet reads them: the verdict is the same, tasks named by
    their groups (`task_waits`)."""
    sc = scenario
    assert sleep_left(verdict_of(cli(sc, source))) == sleep_left(
        verdict_of(cli(sc, source, "--tasks")))


@pytest.mark.parametrize("source", SOURCES)
def test_threads_waits(scenario, source):
    sc = scenario
    threads = {t["name"]: t for t in report(sc, source, "--tasks")["threads"]}
    assert sorted(threads) == ["MainThread", "loop"]
    assert threads["loop"]["waiting"] is None
    assert threads["MainThread"]["waiting"] == {"kind": "lock", "object": sc.truth["held"],
                                                "type": "Lock", "owner": None, "frame": 0}


# --- 3.10: no task graph ----------------------------------------------------------------------


def test_310_has_no_task_waits():
    """3.10's tasks are not decoded: `--why --tasks` is refused as --tasks is, and `--why`
    finds the threads' waits but no task deadlock (the scenario has one it cannot see)."""
    interp = harness.pick(["pyenv-3.10"])[0]
    with harness.Scenario(interp, "why_async_locks", args=("c",)) as sc:
        core = sc.make_core()
        for target in (["pid", str(sc.pid)], ["core", core]):
            for extra in (["--tasks", "--json"], ["--tasks"]):
                rc, out, err = harness.run([harness.cli_path()] + target + ["--why"] + extra,
                                           timeout=CLI_TIMEOUT)
                harness.assert_no_panic(out + err, rc)
                assert (rc, out, err) == (1, "", (
                    "pyunwind: unsupported Python version 3.10.13 for asyncio tasks (3.11 to "
                    "3.15 and the free-threaded 3.13 are supported)\n")), (target, extra)
            r = json_from(run_cli(target, "--json"))
            assert "tasks" not in r
            assert r["deadlocks"] == []
            threads = {t["name"]: t for t in r["threads"]}
            assert threads["loop"]["waiting"] is None
            assert (threads["loop"]["state"], threads["loop"]["idle"]) == ("loop_idle",
                                                                          "event_loop")
            assert threads["MainThread"]["waiting"] == {
                "kind": "lock", "object": sc.truth["held"], "type": "Lock", "owner": None,
                "frame": 0}
            assert verdict_of(run_cli(target)) == [main_thread_line(sc), IDLE_LOOP]

"""--why's waits, holds and deadlocks (docs/report.md, `waiting`, `holding`, `deadlocks`),
checked against tests/scenarios/why_waits.py: every object's `id()`, every thread's native id,
every waiting frame's line and the line of every `with` holding a lock come from the scenario
itself. Live (`pid PID --why --json`) and from a gcore core (`core CORE --why --json`)."""

import json

import pytest

import harness
from test_stacks import json_from

CLI_TIMEOUT = 60
INTERPS = harness.pick(["pyenv-3.10", "pyenv-3.11", "pyenv-3.12", "pyenv-3.13",
                        "debian-3.11", "debian-3.14", "debian-3.15"])
SOURCES = ["live", "core"]


@pytest.fixture(scope="module", params=INTERPS, ids=lambda i: i.id)
def scenario(request):
    with harness.Scenario(request.param, "why_waits") as sc:
        sc.core = sc.make_core()
        yield sc


def cli(sc, source, *extra):
    target = ["pid", str(sc.pid)] if source == "live" else ["core", sc.core]
    rc, out, err = harness.run([harness.cli_path()] + target + ["--why"] + list(extra),
                               timeout=CLI_TIMEOUT)
    harness.assert_no_panic(out + err, rc)
    assert rc == 0, err
    return out


def report(sc, source):
    return json_from(cli(sc, source, "--json"))


def by_name(r):
    return {t["name"]: t for t in r["threads"]}


def native(sc, name):
    return next(t["native_id"] for t in sc.truth["threads"] if t["name"] == name)


def truth_frames(sc, name):
    return next(t["frames"] for t in sc.truth["threads"] if t["name"] == name)


def waiting_frame(t, w):
    return t["frames"][w["frame"]]


@pytest.mark.parametrize("source", SOURCES)
def test_lock_order_deadlock(scenario, source):
    sc = scenario
    r = report(sc, source)
    threads = by_name(r)
    objects = sc.truth["objects"]
    poster, rotator = native(sc, "poster"), native(sc, "rotator")
    p, q = threads["poster"], threads["rotator"]
    assert p["waiting"] == {"kind": "rlock", "object": objects["R"], "type": "RLock",
                            "owner": rotator, "frame": 0}
    assert q["waiting"] == {"kind": "lock", "object": objects["L1"], "type": "Lock",
                            "owner": poster, "frame": 0}
    # The waiting frames are the scenario's own, on the lines it recorded.
    for name, t in (("poster", p), ("rotator", q)):
        frame = waiting_frame(t, t["waiting"])
        want = truth_frames(sc, name)[0]
        assert (frame["function"], frame["line"]) == (want["function"], want["line"])
    # poster's `with L1:` block, on the line of its `with`; rotator's R.acquire() has no trace
    # but R names its owner (no frame, no line).
    assert p["holding"] == [{"kind": "lock", "object": objects["L1"], "type": "Lock",
                             "frame": 0, "line": sc.truth["poster_with_line"]}]
    assert q["holding"] == [{"kind": "rlock", "object": objects["R"], "type": "RLock",
                             "count": 1, "frame": None, "line": None}]
    assert r["deadlocks"] == [{"kind": "locks", "threads": [poster, rotator],
                               "objects": [objects["R"], objects["L1"]], "tasks": []}]
    text = cli(sc, source)
    first = text.splitlines()[0]
    assert first == (
        'Deadlock: thread %d "poster" waits for RLock %#x held by thread %d "rotator"; '
        'thread %d "rotator" waits for Lock %#x held by thread %d "poster" (taken at '
        'why_waits.py:%d, in %s)' % (
            poster, objects["R"], rotator, rotator, objects["L1"], poster,
            sc.truth["poster_with_line"], truth_frames(sc, "poster")[0]["function"]))


@pytest.mark.parametrize("source", SOURCES)
def test_main_thread_joins_poster(scenario, source):
    sc = scenario
    main = by_name(report(sc, source))["MainThread"]
    w = main["waiting"]
    assert (w["kind"], w["object"], w["type"], w["owner"]) == (
        "join", sc.truth["objects"]["poster"], "Thread", native(sc, "poster"))
    frame = waiting_frame(main, w)
    assert frame["function"] in ("Thread.join", "join")  # 3.10 has no qualnames
    assert frame["file"].endswith("/threading.py")
    # The frame that calls join is the scenario's, on the line it recorded.
    caller = main["frames"][w["frame"] + 1]
    want = truth_frames(sc, "MainThread")[0]
    assert (caller["function"], caller["line"]) == (want["function"], want["line"])


@pytest.mark.parametrize("source", SOURCES)
def test_a_lock_taken_by_acquire_has_no_known_holder(scenario, source):
    sc = scenario
    plain = by_name(report(sc, source))["plain"]
    assert plain["waiting"] == {"kind": "lock", "object": sc.truth["objects"]["PLAIN"],
                                "type": "Lock", "owner": None, "frame": 0}
    assert plain["holding"] == []
    line = next(l for l in cli(sc, source).splitlines() if '"plain" waits for' in l)
    assert line.endswith("(its holder is unknown: a Lock taken by acquire() leaves no trace)")


# thread name -> (kind, object key, type, library method waiting).
LIBRARY_WAITS = {
    "eventer": ("event", "EV", "Event", "Event.wait"),
    "getter": ("queue_get", "Q", "Queue", "Queue.get"),
    "conder": ("condition", "C", "Condition", "Condition.wait"),
    "semaphorer": ("semaphore", "S", "Semaphore", "Semaphore.acquire"),
    # multiprocessing's: its Event.wait (multiprocessing/synchronize.py) over its Condition's
    # wait; its Barrier is threading's Barrier.wait over a multiprocessing Condition.
    "mpeventer": ("event", "MP_EV", "Event", "Event.wait"),
    "mpbarrier": ("barrier", "MP_BAR", "Barrier", "Barrier.wait"),
}


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("name", sorted(LIBRARY_WAITS))
def test_library_waits_name_the_object_the_program_wrote(scenario, source, name):
    sc = scenario
    kind, key, type_name, method = LIBRARY_WAITS[name]
    t = by_name(report(sc, source))[name]
    w = t["waiting"]
    assert (w["kind"], w["object"], w["type"], w["owner"]) == (
        kind, sc.truth["objects"][key], type_name, None)
    frame = waiting_frame(t, w)
    # 3.10's code objects have only the method's name.
    assert frame["function"] in (method, method.split(".")[1])
    # The frame that calls it is the scenario's, on the line it recorded.
    caller = t["frames"][w["frame"] + 1]
    want = next(f for f in truth_frames(sc, name) if f["function"] == name)
    assert (caller["function"], caller["line"]) == (want["function"], want["line"])
    assert t["holding"] == []


@pytest.mark.parametrize("source", SOURCES)
def test_simple_queue_get(scenario, source):
    sc = scenario
    t = by_name(report(sc, source))["simpleq"]
    assert t["waiting"] == {"kind": "simple_queue_get", "object": sc.truth["objects"]["SQ"],
                            "type": "_queue.SimpleQueue", "owner": None, "frame": 0}


# --- blocked entering a `with` block (tests/scenarios/why_with_deadlock.py) ----------------


@pytest.fixture(scope="module", params=INTERPS, ids=lambda i: i.id)
def with_scenario(request):
    with harness.Scenario(request.param, "why_with_deadlock") as sc:
        sc.core = sc.make_core()
        yield sc


# (first thread, second thread, its first lock, its second lock, type): each holds its first
# lock in a `with` block and is blocked entering the `with` of its second.
WITH_PAIRS = [("left", "right", "A", "B", "Lock"), ("rleft", "rright", "R1", "R2", "RLock")]


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("pair", WITH_PAIRS, ids=lambda p: p[4])
def test_blocked_entering_a_with_block(with_scenario, source, pair):
    sc = with_scenario
    first, second, lock1, lock2, type_name = pair
    kind = type_name.lower()
    r = report(sc, source)
    threads = by_name(r)
    objects = sc.truth["objects"]
    n1, n2 = native(sc, first), native(sc, second)
    # (thread, what it holds, what it waits for, that lock's owner)
    for name, holds, waits, owner in ((first, lock1, lock2, n2), (second, lock2, lock1, n1)):
        t = threads[name]
        assert t["waiting"] == {"kind": kind, "object": objects[waits], "type": type_name,
                                "owner": owner, "frame": 0}, name
        # The waiting frame is the thread's own, on the line of the `with` it enters.
        frame = waiting_frame(t, t["waiting"])
        want = truth_frames(sc, name)[0]
        assert (frame["function"], frame["line"]) == (want["function"], want["line"])
        # Only the lock of the `with` block it is in, on the line of that `with`: not the one
        # it is entering.
        held = [{k: h[k] for k in ("kind", "object", "type", "frame", "line")}
                for h in t["holding"]]
        assert held == [{"kind": kind, "object": objects[holds], "type": type_name,
                         "frame": 0, "line": sc.truth["with_lines"][name]}], name
        if kind == "rlock":
            assert [h["count"] for h in t["holding"]] == [1]
    ours = [d for d in r["deadlocks"] if set(d["threads"]) & {n1, n2}]
    assert ours == [{"kind": "locks", "threads": [n1, n2],
                     "objects": [objects[lock2], objects[lock1]], "tasks": []}]
    # Nobody else is waiting or deadlocked.
    assert len(r["deadlocks"]) == 2
    line = next(l for l in cli(sc, source).splitlines()
                if l.startswith("Deadlock: ") and '"%s"' % first in l)

    def at(name):
        return "taken at why_with_deadlock.py:%d, in %s" % (
            sc.truth["with_lines"][name], truth_frames(sc, name)[0]["function"])

    assert line == (
        'Deadlock: thread %d "%s" waits for %s %#x held by thread %d "%s" (%s); '
        'thread %d "%s" waits for %s %#x held by thread %d "%s" (%s)' % (
            n1, first, type_name, objects[lock2], n2, second, at(second),
            n2, second, type_name, objects[lock1], n1, first, at(first)))


# --- asyncio: await cycles are deadlocks too --------------------------------------------------


@pytest.mark.parametrize("interp", harness.pick(["pyenv-3.11", "pyenv-3.13", "debian-3.14"]),
                         ids=lambda i: i.id)
def test_await_cycles_are_deadlocks(interp):
    """The asyncio `cycle` case (two tasks awaiting each other, and a ring of three): each await
    cycle of the scenario's truth is one `await` deadlock, and the verdict says so."""
    from test_asyncio import start

    with start(harness.Scenario, interp, "cycle", "c") as s:
        core = s.make_core()
        check_await_deadlocks(s, core)


def check_await_deadlocks(s, core):
    from test_asyncio import rotate

    rc, out, err = harness.run([harness.cli_path(), "core", core, "--why", "--json"], CLI_TIMEOUT)
    harness.assert_no_panic(err, rc)
    assert rc == 0, err
    r = json.loads(out)
    got = sorted(rotate(d["tasks"]) for d in r["deadlocks"] if d["kind"] == "await")
    assert got == sorted(map(rotate, s.truth["cycles"])) and len(got) == 2, r["deadlocks"]
    assert all(d["threads"] == [] and d["objects"] == [] for d in r["deadlocks"])
    rc, text, err = harness.run([harness.cli_path(), "core", core, "--why"], CLI_TIMEOUT)
    # The deadlocks first; then the threads' own waits (the recorder on _truth.HELD).
    verdict = text.split("\n\n", 1)[0].splitlines()[:len(r["deadlocks"])]
    want = ["Deadlock: asyncio tasks await each other: %s" % " -> ".join(
        "%#x" % t for t in d["tasks"]) for d in r["deadlocks"]]
    assert verdict == want, text

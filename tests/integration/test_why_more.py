"""More of --why's waits, holds and deadlocks (docs/report.md, `waiting`, `holding`,
`deadlocks`), checked against tests/scenarios/why_more.py: a lock-order deadlock of three
threads through `with` blocks, RLocks re-entered in one frame and across two (and a waiter
naming the owner), `Barrier.wait`, `Queue.put`, `Future.result`, a Condition held by a `with`
block and a thread entering it; the same with `--native`; and tests/scenarios/why_handover.py,
a Lock released by one thread and taken by another between two stops. Every object's `id()`,
every thread's native id, every frame's line and the line of every `with` holding a lock come
from the scenarios themselves. Live (`pid PID --why --json`) and from gcore cores
(`core CORE --why --json`)."""

import os
import signal

import pytest

import harness
from test_stacks import json_from

CLI_TIMEOUT = 60
INTERPS = harness.pick(["pyenv-3.10", "pyenv-3.11", "pyenv-3.12", "pyenv-3.13",
                        "debian-3.11", "debian-3.14", "debian-3.15", "ft-3.13t"])
SOURCES = ["live", "core"]


@pytest.fixture(scope="module", params=INTERPS, ids=lambda i: i.id)
def scenario(request):
    with harness.Scenario(request.param, "why_more") as sc:
        sc.core = sc.make_core()
        sc.reports = {}
        yield sc


def run_cli(target, *extra):
    rc, out, err = harness.run([harness.cli_path()] + target + ["--why"] + list(extra),
                               timeout=CLI_TIMEOUT)
    harness.assert_no_panic(out + err, rc)
    assert rc == 0, err
    return out


def target_of(sc, source, core=None):
    return ["pid", str(sc.pid)] if source == "live" else ["core", core or sc.core]


def cli(sc, source, *extra):
    """The CLI's output for the scenario, run once per source and options: the scenario stays
    at its stop, so a live run later would say the same."""
    key = (source,) + extra
    if key not in sc.reports:
        sc.reports[key] = run_cli(target_of(sc, source), *extra)
    return sc.reports[key]


def report(sc, source, *extra):
    return json_from(cli(sc, source, "--json", *extra))


def by_name(r):
    return {t["name"]: t for t in r["threads"]}


def native(truth, name):
    return next(t["native_id"] for t in truth["threads"] if t["name"] == name)


def truth_frames(truth, name):
    return next(t["frames"] for t in truth["threads"] if t["name"] == name)


def own_frame(truth, name, function=None):
    """The index of thread ``name``'s own frame (its target function, or ``function``) in its
    frames as the scenario recorded them, innermost first."""
    function = function or name
    return next(i for i, f in enumerate(truth_frames(truth, name)) if f["function"] == function)


def frame_at(t, index):
    f = t["frames"][index]
    return (f["function"], f["line"])


def truth_at(truth, name, index):
    f = truth_frames(truth, name)[index]
    return (f["function"], f["line"])


# --- a. three threads, three Locks, three `with` blocks --------------------------------------

# (thread, the lock its `with` block holds, the lock it is entering, the thread holding that)
RING = [("t1", "LA", "LB", "t2"), ("t2", "LB", "LC", "t3"), ("t3", "LC", "LA", "t1")]


@pytest.mark.parametrize("source", SOURCES)
def test_three_thread_lock_order_deadlock(scenario, source):
    sc = scenario
    truth = sc.truth
    objects = truth["objects"]
    r = report(sc, source)
    threads = by_name(r)
    for name, holds, waits, owner in RING:
        t = threads[name]
        assert t["waiting"] == {"kind": "lock", "object": objects[waits], "type": "Lock",
                                "owner": native(truth, owner), "frame": 0}, name
        # The waiting frame is the thread's own, on the line of the `with` it enters.
        assert frame_at(t, 0) == truth_at(truth, name, 0)
        assert frame_at(t, 0)[0] == name
        # Only the lock of the `with` block it is in, on the line of that `with`: not the one
        # it is entering.
        assert t["holding"] == [{"kind": "lock", "object": objects[holds], "type": "Lock",
                                 "frame": 0, "line": truth["with_lines"][name]}], name
    ring = [native(truth, name) for name, _, _, _ in RING]
    # The only cycle of the scenario, listed from t1 (the oldest): what each thread waits for.
    assert r["deadlocks"] == [{"kind": "locks", "threads": ring,
                               "objects": [objects[w] for _, _, w, _ in RING], "tasks": []}]
    first = cli(sc, source).splitlines()[0]

    def clause(name, waits, owner):
        return ('thread %d "%s" waits for Lock %#x held by thread %d "%s" (taken at '
                'why_more.py:%d, in %s)' % (
                    native(truth, name), name, objects[waits], native(truth, owner), owner,
                    truth["with_lines"][owner], truth_frames(truth, owner)[0]["function"]))

    assert first == "Deadlock: " + "; ".join(clause(n, w, o) for n, _, w, o in RING)


# --- b. a re-entered RLock --------------------------------------------------------------------


@pytest.mark.parametrize("source", SOURCES)
def test_reentered_rlock_is_held_once_with_its_count(scenario, source):
    sc = scenario
    truth = sc.truth
    objects = truth["objects"]
    threads = by_name(report(sc, source))
    t = threads["reenter"]
    own = own_frame(truth, "reenter")
    # Two `with RR:` blocks in one frame and an RR.acquire(): one hold, its count 3, the frame
    # and the line of the (outermost) `with` that took it.
    assert t["holding"] == [{"kind": "rlock", "object": objects["RR"], "type": "RLock",
                             "count": 3, "frame": own, "line": truth["with_lines"]["reenter"]}]
    assert frame_at(t, own) == truth_at(truth, "reenter", own)
    # It parks on PARK_R.
    assert t["waiting"] == {"kind": "event", "object": objects["PARK_R"], "type": "Event",
                            "owner": None, "frame": own - 1}
    assert t["frames"][own - 1]["function"] in ("Event.wait", "wait")


@pytest.mark.parametrize("source", SOURCES)
def test_reentered_rlock_names_the_outermost_with(scenario, source):
    sc = scenario
    truth = sc.truth
    objects = truth["objects"]
    t = by_name(report(sc, source))["reenter_nested"]
    inner = own_frame(truth, "reenter_nested", "reenter_inner")
    outer = own_frame(truth, "reenter_nested")
    assert outer == inner + 1
    # `with RR2:` in reenter_nested, `with RR2:` and RR2.acquire() in reenter_inner: one hold,
    # count 3, in the outer frame, on the line of its `with`, which took it first.
    assert t["holding"] == [{"kind": "rlock", "object": objects["RR2"], "type": "RLock",
                             "count": 3, "frame": outer,
                             "line": truth["with_lines"]["reenter_nested"]}]
    assert frame_at(t, outer) == truth_at(truth, "reenter_nested", outer)
    assert frame_at(t, inner) == truth_at(truth, "reenter_nested", inner)
    assert t["waiting"] == {"kind": "event", "object": objects["PARK_R"], "type": "Event",
                            "owner": None, "frame": inner - 1}


@pytest.mark.parametrize("source", SOURCES)
def test_rlock_waiter_names_the_reentering_owner(scenario, source):
    sc = scenario
    truth = sc.truth
    t = by_name(report(sc, source))["rr_waiter"]
    assert t["waiting"] == {"kind": "rlock", "object": truth["objects"]["RR"], "type": "RLock",
                            "owner": native(truth, "reenter"), "frame": 0}
    assert frame_at(t, 0) == truth_at(truth, "rr_waiter", 0)
    assert frame_at(t, 0)[0] == "rr_waiter"
    assert t["holding"] == []


# --- c, d, e. Barrier.wait, Queue.put, Future.result ------------------------------------------

# thread name -> (kind, object key, type, library method waiting).
LIBRARY_WAITS = {
    "barrier": ("barrier", "B3", "Barrier", "Barrier.wait"),
    "putter": ("queue_put", "QF", "Queue", "Queue.put"),
    "futurer": ("future", "F", "Future", "Future.result"),
}


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("name", sorted(LIBRARY_WAITS))
def test_library_waits_name_the_object_the_program_wrote(scenario, source, name):
    sc = scenario
    truth = sc.truth
    kind, key, type_name, method = LIBRARY_WAITS[name]
    t = by_name(report(sc, source))[name]
    caller = own_frame(truth, name)
    assert t["waiting"] == {"kind": kind, "object": truth["objects"][key], "type": type_name,
                            "owner": None, "frame": caller - 1}
    waiting = t["frames"][caller - 1]
    # 3.10's code objects have only the method's name.
    assert waiting["function"] in (method, method.split(".")[1])
    assert waiting["file"].endswith(("/threading.py", "/queue.py", "/concurrent/futures/_base.py"))
    # The frame that calls it is the scenario's, on the line it recorded.
    assert frame_at(t, caller) == truth_at(truth, name, caller)
    # The library's own `with self._cond:` (Barrier, Queue, Future) holds nothing while its
    # Condition.wait has released the lock.
    assert t["holding"] == []


# --- f. a Condition held by a `with` block, and a thread entering it --------------------------


@pytest.mark.parametrize("source", SOURCES)
def test_condition_entered_names_the_with_block_holding_it(scenario, source):
    sc = scenario
    truth = sc.truth
    objects = truth["objects"]
    threads = by_name(report(sc, source))
    enter = threads["condenter"]
    # Blocked in Condition.__enter__ (its `with C2:`): the Condition, held by condholder.
    assert enter["waiting"] == {"kind": "condition", "object": objects["C2"],
                                "type": "Condition", "owner": native(truth, "condholder"),
                                "frame": 0}
    assert enter["frames"][0]["function"] in ("Condition.__enter__", "__enter__")
    # The frame that enters it is the scenario's, on the line of its `with C2:`.
    assert frame_at(enter, 1) == truth_at(truth, "condenter", 1)
    assert frame_at(enter, 1)[0] == "condenter"
    assert enter["holding"] == []


@pytest.mark.parametrize("source", SOURCES)
def test_condition_held_by_a_with_block(scenario, source):
    sc = scenario
    truth = sc.truth
    objects = truth["objects"]
    holder = by_name(report(sc, source))["condholder"]
    own = own_frame(truth, "condholder")
    # The Condition its `with C2:` holds, on that `with`'s line (not C2's RLock on its own,
    # with no frame).
    assert holder["holding"] == [{"kind": "condition", "object": objects["C2"],
                                  "type": "Condition", "count": 1, "frame": own,
                                  "line": truth["with_lines"]["condholder"]}]
    assert frame_at(holder, own) == truth_at(truth, "condholder", own)
    assert holder["waiting"] == {"kind": "event", "object": objects["PARK_C"], "type": "Event",
                                 "owner": None, "frame": own - 1}


# --- g. --native: the same waits and holds, their frames indexed in the interleaved list ------


def python_frame(t, index):
    f = t["frames"][index]
    return (f["kind"], f.get("function"), f.get("file"), f.get("line"), f.get("address"))


@pytest.mark.parametrize("source", SOURCES)
def test_native_frames_index_the_same_python_frames(scenario, source):
    sc = scenario
    plain = {t["native_id"]: t for t in report(sc, source)["threads"]}
    mixed = report(sc, source, "--native")
    assert {t["native_id"] for t in mixed["threads"]} == set(plain)
    waiting = 0
    for t in mixed["threads"]:
        p = plain[t["native_id"]]
        name = t["name"]
        if p["waiting"] is None:
            assert t["waiting"] is None, name
        else:
            waiting += 1
            assert {k: v for k, v in t["waiting"].items() if k != "frame"} == \
                {k: v for k, v in p["waiting"].items() if k != "frame"}, name
            # The same Python frame: its function, file, line and interpreter frame address.
            assert python_frame(t, t["waiting"]["frame"]) == \
                python_frame(p, p["waiting"]["frame"]), name
            assert t["frames"][t["waiting"]["frame"]]["kind"] == "python", name
        assert len(t["holding"]) == len(p["holding"]), name
        for h, ph in zip(t["holding"], p["holding"]):
            assert {k: v for k, v in h.items() if k != "frame"} == \
                {k: v for k, v in ph.items() if k != "frame"}, name
            if ph["frame"] is None:
                assert h["frame"] is None, name
            else:
                assert python_frame(t, h["frame"]) == python_frame(p, ph["frame"]), name
                assert t["frames"][h["frame"]]["kind"] == "python", name
    # Every worker and the main thread wait for something.
    assert waiting == len(sc.truth["threads"])
    assert mixed["deadlocks"] == report(sc, source)["deadlocks"]


# --- h. a Lock released and taken by another thread between two stops -------------------------


class Stop:
    """One stop of why_handover: its truth, its core, and the reports made at the stop."""

    def __init__(self, sc):
        self.truth = sc.truth
        assert self.truth["stop"] == len(getattr(sc, "stops", [])) + 1
        self.core = sc.make_core_named("stop%d" % self.truth["stop"])
        self.reports = {"live": json_from(run_cli(target_of(sc, "live"), "--json")),
                        "core": json_from(run_cli(target_of(sc, "core", self.core), "--json"))}


@pytest.fixture(scope="module", params=INTERPS, ids=lambda i: i.id)
def handover(request):
    with harness.Scenario(request.param, "why_handover") as sc:
        sc.stops = []
        sc.stops.append(Stop(sc))
        # The main thread's sigwait takes it (every thread blocks SIGUSR1).
        os.kill(sc.pid, signal.SIGUSR1)
        sc.next_stop()
        sc.stops.append(Stop(sc))
        yield sc


def check_stop1(truth, r):
    objects = truth["objects"]
    threads = by_name(r)
    first, second = threads["first"], threads["second"]
    # second is blocked entering `with H:`; first's `with H:` block holds it, taken on the line
    # of that `with`.
    assert second["waiting"] == {"kind": "lock", "object": objects["H"], "type": "Lock",
                                 "owner": native(truth, "first"), "frame": 0}
    assert frame_at(second, 0) == truth_at(truth, "second", 0)
    assert frame_at(second, 0)[0] == "second"
    assert second["holding"] == []
    own = own_frame(truth, "first")
    assert first["holding"] == [{"kind": "lock", "object": objects["H"], "type": "Lock",
                                 "frame": own, "line": truth["with_lines"]["first"]}]
    assert frame_at(first, own) == truth_at(truth, "first", own)
    assert first["waiting"] == {"kind": "event", "object": objects["GO"], "type": "Event",
                                "owner": None, "frame": own - 1}
    assert r["deadlocks"] == []


def check_stop2(truth, r):
    objects = truth["objects"]
    threads = by_name(r)
    first, second = threads["first"], threads["second"]
    # first left its `with H:` block (its __exit__ may still be in a stale slot) and parks on
    # AFTER: it holds nothing.
    own = own_frame(truth, "first")
    assert first["holding"] == []
    assert first["waiting"] == {"kind": "event", "object": objects["AFTER"], "type": "Event",
                                "owner": None, "frame": own - 1}
    assert frame_at(first, own) == truth_at(truth, "first", own)
    # second took H and parks on INSIDE inside its `with H:` block, on the line of that `with`.
    own = own_frame(truth, "second")
    assert second["holding"] == [{"kind": "lock", "object": objects["H"], "type": "Lock",
                                  "frame": own, "line": truth["with_lines"]["second"]}]
    assert frame_at(second, own) == truth_at(truth, "second", own)
    assert second["waiting"] == {"kind": "event", "object": objects["INSIDE"], "type": "Event",
                                 "owner": None, "frame": own - 1}
    assert r["deadlocks"] == []


@pytest.mark.parametrize("source", SOURCES)
def test_handover_stop1_second_waits_for_first(handover, source):
    stop = handover.stops[0]
    check_stop1(stop.truth, stop.reports[source])


@pytest.mark.parametrize("source", SOURCES)
def test_handover_stop2_second_holds_what_first_released(handover, source):
    stop = handover.stops[1]
    check_stop2(stop.truth, stop.reports[source])


def test_handover_stop1_core_still_says_what_it_said(handover):
    """Read after stop 2 (and the reports made there), the first stop's core says what it said
    at stop 1: every report is of its own core."""
    stop1, stop2 = handover.stops
    again = json_from(run_cli(["core", stop1.core], "--json"))
    assert again == stop1.reports["core"]
    check_stop1(stop1.truth, again)
    # And the stops differ where the program moved on.
    assert by_name(json_from(run_cli(["core", stop2.core], "--json")))["second"]["holding"]

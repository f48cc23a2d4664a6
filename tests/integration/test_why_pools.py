"""--why on pools (issue 37): idle is told apart from blocked. Checked against
tests/scenarios/why_pools.py: a ThreadPoolExecutor with five idle workers and one blocked on a
Lock the main thread holds in a `with` block, a ProcessPoolExecutor, a multiprocessing.Pool and
a multiprocessing.Queue's feeder thread; every native id, object id and child pid, and each
worker process's frames, come from the programs themselves (the workers record their own).

- the idle workers: `state: "idle"`, `idle: "pool_worker"`, their wait still named
  (`simple_queue_get` on the executor's queue);
- the blocked worker: a `lock` wait whose owner is the main thread;
- the pools' manager and handler threads `pool_thread`, the queues' feeders `queue_feeder`;
- the text verdict: the lock wait on a line, the idle threads counted on one last line;
- each worker process (`pid CHILD`, and a core of one per pool): its main thread an idle
  `pool_worker`.

Live, from gcore cores and from the kernel's core of a second run (the main process, killed by
SIGABRT), on 3.10 to 3.15 and the free-threaded 3.13t (nothing here depends on
the GIL; 3.14+ start the pools' processes from a forkserver, so their stacks differ there)."""

import pytest

import harness
from test_why_io import (ALL_SOURCES, INTERPS, SOURCES, KernelCore, by_native_id, cli, core_of,
                         idle_line, idle_words, line_of, no_line_names, python_stack, report,
                         truth_stack, verdict, view)


@pytest.fixture(scope="module", params=INTERPS, ids=lambda i: i.id)
def scenario(request):
    # The kernel's core of the main process of a second run (killed by SIGABRT).
    kernel = KernelCore(request.param, "why_pools")
    try:
        with harness.Scenario(request.param, "why_pools") as sc:
            sc.core = sc.make_core()
            sc.kernel = kernel
            # One core of a worker process of each pool.
            sc.child_cores = {}
            for key in ("ppool_workers", "mp_workers"):
                child = sc.truth[key][0]["pid"]
                sc.child_cores[child] = core_of(sc, child)
            yield sc
    finally:
        kernel.close()


def threads(sc, source):
    return by_native_id(report(sc, source))


def main_id(sc):
    return sc.truth["threads"][0]["native_id"]


def idle_ids(sc):
    """Native id -> idle kind of every idle thread of the main process."""
    truth = sc.truth
    out = {n: "pool_worker" for n in truth["tpool_idle"]}
    out[truth["ppool_manager"]] = "pool_thread"
    out.update({n: "pool_thread" for n in truth["mp_handlers"].values()})
    out.update({n: "queue_feeder" for n in truth["feeders"]})
    return out


@pytest.mark.parametrize("source", ALL_SOURCES)
def test_idle_thread_pool_workers(scenario, source):
    sc, source = view(scenario, source)
    ts = threads(sc, source)
    assert len(sc.truth["tpool_idle"]) == 5
    for n in sc.truth["tpool_idle"]:
        t = ts[n]
        assert (t["state"], t["idle"]) == ("idle", "pool_worker"), t
        # Still says what it waits on: the executor's SimpleQueue, in `_worker`.
        assert t["waiting"] == {"kind": "simple_queue_get", "object": sc.truth["work_queue"],
                                "type": "_queue.SimpleQueue", "owner": None, "frame": 0}, t
        assert t["frames"][0]["function"] == "_worker"
        assert t["frames"][0]["file"].endswith("/concurrent/futures/thread.py")


@pytest.mark.parametrize("source", ALL_SOURCES)
def test_blocked_worker_waits_for_the_lock_main_holds(scenario, source):
    sc, source = view(scenario, source)
    ts = threads(sc, source)
    t = ts[sc.truth["blocked_worker"]]
    assert t["waiting"] == {"kind": "lock", "object": sc.truth["lock"], "type": "Lock",
                            "owner": main_id(sc), "frame": 0}, t
    assert t["state"] != "idle" and t["idle"] is None, t
    assert t["frames"][0]["function"] == "blocked_task"
    main = ts[main_id(sc)]
    assert [{k: h[k] for k in ("kind", "object", "type", "line")} for h in main["holding"]] == [
        {"kind": "lock", "object": sc.truth["lock"], "type": "Lock",
         "line": sc.truth["main_with_line"]}]


@pytest.mark.parametrize("source", ALL_SOURCES)
def test_pool_threads_and_feeders_are_idle(scenario, source):
    sc, source = view(scenario, source)
    ts = threads(sc, source)
    for n, kind in idle_ids(sc).items():
        t = ts[n]
        assert (t["state"], t["idle"]) == ("idle", kind), t
    # The feeder of the program's own queue waits on the queue's Condition, in Condition.wait
    # under Queue._feed.
    feeder = ts[sc.truth["my_feeder"]]
    assert feeder["waiting"] == {"kind": "condition", "object": sc.truth["my_queue_notempty"],
                                 "type": "Condition", "owner": None, "frame": 0}, feeder
    assert [f["function"] for f in feeder["frames"][:2]] in (
        ["wait", "_feed"], ["Condition.wait", "Queue._feed"])


@pytest.mark.parametrize("source", ALL_SOURCES)
def test_every_thread_is_the_programs(scenario, source):
    sc, source = view(scenario, source)
    ts = threads(sc, source)
    assert sorted(ts) == sorted(t["native_id"] for t in sc.truth["threads"])
    for want in sc.truth["threads"]:
        t = ts[want["native_id"]]
        assert t["name"] == want["name"]
        assert python_stack(t["frames"]) == truth_stack(want["frames"]), want["name"]
    # Not idle: the main thread (on _truth.HELD, holding LOCK) and the blocked worker.
    idle = {n for n, t in ts.items() if t["state"] == "idle"}
    assert idle == set(idle_ids(sc)), sorted(idle ^ set(idle_ids(sc)))


@pytest.mark.parametrize("source", ALL_SOURCES)
def test_verdict_counts_the_idle_threads_on_one_line(scenario, source):
    sc, source = view(scenario, source)
    lines = verdict(cli(sc, source))
    if sc is scenario.kernel:
        # The kernel's core is of a process killed by SIGABRT: the crash comes first.
        assert lines[0].startswith("Crashed: SIGABRT "), lines
        lines = lines[1:]
    names = {t["native_id"]: t["name"] for t in sc.truth["threads"]}
    blocked = sc.truth["blocked_worker"]
    at = line_of(lines, blocked, names[blocked])
    # The wait whose owner is known first, with its owner; then main's wait with no owner;
    # then the idle count.
    assert at == 0, lines
    assert lines[at].startswith('thread %d "%s" waits for Lock %#x held by thread %d "MainThread"'
                                % (blocked, names[blocked], sc.truth["lock"], main_id(sc))), lines
    assert line_of(lines, main_id(sc), "MainThread") == 1, lines
    no_line_names(lines, idle_ids(sc))
    line = idle_line(lines, len(idle_ids(sc)))
    assert line == idle_words(list(idle_ids(sc).values())), line
    assert line.startswith("%d idle: 5 pool workers, 4 pool threads, " % len(idle_ids(sc)))
    assert len(lines) == 3, lines


def children(sc):
    return sc.truth["ppool_workers"] + sc.truth["mp_workers"]


@pytest.mark.parametrize("source", SOURCES)
def test_worker_processes_wait_for_work(scenario, source):
    """Each worker process's main thread is an idle pool worker, on the frames it recorded; its
    `recorder` thread (the scenario's, on _truth.HELD) is not idle."""
    sc = scenario
    checked = 0
    for child in children(sc):
        pid, truth = child["pid"], child["truth"]
        if source == "core" and pid not in sc.child_cores:
            continue
        r = report(sc, source, pid=pid, core=sc.child_cores.get(pid))
        assert r["errors"] == [], r["errors"]
        ts = by_native_id(r)
        assert sorted(ts) == sorted(t["native_id"] for t in truth["threads"])
        main, recorder = truth["threads"]
        t = ts[pid]
        assert (t["state"], t["idle"]) == ("idle", "pool_worker"), (truth["kind"], t)
        assert python_stack(t["frames"]) == truth_stack(main["frames"]), truth["kind"]
        r_t = ts[recorder["native_id"]]
        assert r_t["state"] != "idle" and r_t["idle"] is None
        lines = verdict(cli(sc, source, pid=pid, core=sc.child_cores.get(pid)))
        no_line_names(lines, [pid])
        assert idle_line(lines, 1) == idle_words(["pool_worker"])
        checked += 1
    assert checked == (4 if source == "live" else 2)

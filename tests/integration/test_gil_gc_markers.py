"""libpython's `Waiting for the GIL` and `Garbage-collecting` lines in py-bt on the builds
without symbols, live and from a core (with symbols they come from the native frames' names,
`take_gil` and the collector, as in libpython; CPython's own test_gdb checks those). From
memory: a thread that does not hold the GIL and is blocked on an address inside the GIL; the
interpreter's `gc.collecting` while this thread is the GIL's last holder."""

import os

import pytest

import harness
from test_libpython_text import MEMORY_ONLY_INTERPS, SLEEP, outline
from test_stacks import expected, run_gdb, traceback_frames


# Stops of the spinning process looked at, at most, for a waiting thread.
STOPS = 3
# Threads of tests/scenarios/gil_wait.py that run Python (the main thread and 3 workers).
SPINNERS = 4


def free_threaded(interp):
    return "3.13t" in interp.id


def new_core(sc, stop):
    """A core of the process as it is now: each stop must be a sample of its own, and
    Scenario.make_core returns the scenario's one core again."""
    prefix = sc.tmpdir / ("stop%d" % stop)
    # No debuginfod: with no network, lookups would only add delays.
    env = {k: v for k, v in os.environ.items() if k != "DEBUGINFOD_URLS"}
    rc, out, err = harness.run(["gcore", "-o", prefix, sc.pid], harness.GCORE_TIMEOUT_SECONDS,
                               env=env)
    path = "%s.%d" % (prefix, sc.pid)
    assert rc == 0 and os.path.isfile(path), "gcore failed (%d):\n%s\n%s" % (rc, out, err)
    harness.refill_guarded_mappings(path, sc.pid)
    return path


@pytest.mark.parametrize("source", ["live", "core"])
@pytest.mark.parametrize("interp", MEMORY_ONLY_INTERPS, ids=lambda i: i.id)
def test_garbage_collecting(interp, source):
    with harness.Scenario(interp, "gc_finalizer") as sc:
        where = {"core": sc.make_core()} if source == "core" else {"pid": sc.pid}
        out, _ = run_gdb(interp, "py-bt", "echo @@FULL@@\\n", "py-bt-full", **where)
        bt, full = out.split("@@FULL@@")
        assert traceback_frames(bt) == expected(sc.truth["threads"][0]["frames"]), bt
        if free_threaded(interp):
            # No single GIL holder: the memory rule cannot tell which thread collects.
            return
        # As libpython places it: the collector runs under `gc.collect`, below the finalizer.
        f = expected(sc.truth["threads"][0]["frames"])
        assert outline(bt) == [SLEEP, f[0], "Garbage-collecting",
                               "<built-in method collect of module object at remote 0x…>", *f[1:]], bt
        assert " Garbage-collecting\n" in full, full


@pytest.mark.parametrize("source", ["live", "core"])
@pytest.mark.parametrize("interp", MEMORY_ONLY_INTERPS, ids=lambda i: i.id)
def test_waiting_for_the_gil(interp, source):
    with harness.Scenario(interp, "gil_wait") as sc:
        # Four threads spin; one holds the GIL, the others wait for it. A waiter that is between
        # two waits at the stop (more likely on a loaded machine) is not blocked on the GIL, and
        # during a hand-over (the GIL released, not yet taken) all four are; so at a stop 0 to 4
        # may show, and across STOPS stops at least one must.
        counts, outs = [], []
        for stop in range(STOPS):
            where = {"core": new_core(sc, stop)} if source == "core" else {"pid": sc.pid}
            out, _ = run_gdb(interp, "thread apply all py-bt", **where)
            counts.append(out.count("\n  Waiting for the GIL\n"))
            outs.append(out)
            # Every thread that spins runs pure Python: none of its frames is calling a C
            # function (a stale value-stack slot once named `exec` on the stripped 3.10). The
            # main thread may still be leaving `_truth.ready` (closing the FIFO, then waiting
            # for the GIL), where a C call is real.
            for section in out.split("\nThread ")[1:]:
                if "_truth.py" in section:
                    continue
                assert "<built-in" not in section and "<method-wrapper" not in section, out
            assert out.count("\nThread ") == SPINNERS, out
            if not free_threaded(interp) and counts[-1] >= 1:
                break
        if free_threaded(interp):
            assert counts == [0] * STOPS, outs
        else:
            assert max(counts) >= 1 and all(c <= SPINNERS for c in counts), (counts, outs[-1])

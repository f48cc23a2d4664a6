"""libpython's `Waiting for the GIL` and `Garbage-collecting` lines in py-bt on the builds
without symbols, live and from a core (with symbols they come from the native frames' names,
`take_gil` and the collector, as in libpython; CPython's own test_gdb checks those). From
memory: a thread that does not hold the GIL and is blocked on an address inside the GIL; the
interpreter's `gc.collecting` while this thread is the GIL's last holder.

The marked threads are compared, as a set, with what the scenario knows: gil_held.py's waiters
(parked in take_gil behind a holder in pause(), which the kernel shows before the look);
gc_finalizer.py's collecting thread, and its bystander that is not. Where the truth cannot be
exact (gil_wait.py's spinners, without debug info), each marked thread must be one that gdb's
registers show blocked in futex."""

import os
import re
import time

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


# The free-threaded build (ft-3.13t) has no GIL (docs/report.md: `holds_gil` null): no thread
# holds or waits for one, so `Waiting for the GIL` must never be printed there (asserted in
# place of the marked set). It has symbols, so `Garbage-collecting` comes from the collector's
# native frames (as with libpython), not from the memory rule (which needs the GIL's
# `last_holder`): that check applies there as on the other builds.
MARKERS = ("Waiting for the GIL", "Garbage-collecting")
# A thread's section of `thread apply all py-bt`: gdb's header names its LWP (with
# libthread_db: `Thread 2 (Thread 0x7f… (LWP 123) "name"):`, without: `Thread 2 (LWP 123):`,
# `Thread 2 (LWP 123 "name"):`).
THREAD_HEADER = re.compile(r"^Thread \d+ \((?:Thread 0x[0-9a-f]+ \()?LWP (\d+)[) ].*:$", re.M)
# How long a scenario may take to reach the stop it promises (wait_parked).
PARK_SECONDS = 10


def sections(out):
    """{LWP: its section of `thread apply all py-bt`}."""
    heads = list(THREAD_HEADER.finditer(out))
    ends = [m.start() for m in heads[1:]] + [len(out)]
    found = {int(m.group(1)): out[m.end():end] for m, end in zip(heads, ends)}
    assert len(found) == len(heads), out
    return found


def marked(out, marker):
    """The LWPs whose section of `thread apply all py-bt` has `marker` on a line of its own."""
    return {lwp for lwp, text in sections(out).items() if "\n  %s\n" % marker in text}


def check_markers(out, want):
    """`thread apply all py-bt`: the threads marked with each of MARKERS are exactly
    want[marker] (a set of native ids)."""
    for marker in MARKERS:
        assert marked(out, marker) == want[marker], (marker, want[marker], out)


def wait_parked(sc):
    """tests/scenarios/gil_held.py's stop: its holder in pause() and each waiter in futex, as
    the kernel shows them (/proc), before anything stops the process."""
    threads = [t["native_id"] for t in sc.truth["threads"]]
    holder = sc.truth["holder_native_id"]
    deadline = time.monotonic() + PARK_SECONDS
    while True:
        calls = {}
        for n in threads:
            with open("/proc/%d/task/%d/syscall" % (sc.pid, n), encoding="ascii") as f:
                calls[n] = f.read().split()[0]
        # x86-64: pause is 34, futex 202 (asm/unistd_64.h).
        if all(c == ("34" if n == holder else "202") for n, c in calls.items()):
            return
        assert time.monotonic() < deadline, ("not parked", calls)
        time.sleep(0.01)


@pytest.mark.parametrize("source", ["live", "core"])
@pytest.mark.parametrize("interp", MEMORY_ONLY_INTERPS, ids=lambda i: i.id)
def test_garbage_collecting(interp, source):
    """tests/scenarios/gc_finalizer.py with a bystander thread: the main thread collects (and
    last held the GIL), the bystander does not; only the main thread is marked."""
    with harness.Scenario(interp, "gc_finalizer", args=("bystander",)) as sc:
        main = sc.truth["threads"][0]
        where = {"core": sc.make_core()} if source == "core" else {"pid": sc.pid}
        out, _ = run_gdb(interp, "py-bt", "echo @@FULL@@\\n", "py-bt-full", "echo @@ALL@@\\n",
                         "thread apply all py-bt", **where)
        bt, rest = out.split("@@FULL@@")
        full, every = rest.split("@@ALL@@")
        assert traceback_frames(bt) == expected(main["frames"]), bt
        assert set(sections(every)) == {t["native_id"] for t in sc.truth["threads"]}, every
        f = expected(main["frames"])
        # As libpython places it: the collector runs under `gc.collect`, below the finalizer.
        assert outline(bt) == [SLEEP, f[0], "Garbage-collecting",
                               "<built-in method collect of module object at remote 0x…>", *f[1:]], bt
        assert " Garbage-collecting\n" in full, full
        want = {"Garbage-collecting": {main["native_id"]}, "Waiting for the GIL": set()}
        check_markers(every, want)
        bystander = next(t["native_id"] for t in sc.truth["threads"] if t["name"] == "bystander")
        moved = set_marker(set_marker(every, main["native_id"], "Garbage-collecting", False),
                           bystander, "Garbage-collecting", True)
        for broken in (moved, set_marker(every, bystander, "Garbage-collecting", True)):
            with pytest.raises(AssertionError):
                check_markers(broken, want)


@pytest.mark.parametrize("source", ["live", "core"])
@pytest.mark.parametrize("interp", MEMORY_ONLY_INTERPS, ids=lambda i: i.id)
def test_waiting_for_the_gil(interp, source):
    """tests/scenarios/gil_held.py: the main thread holds the GIL in pause(), the waiters are
    blocked in take_gil (the scenario's record, and the kernel has each in futex before the
    look): exactly the waiters are marked, each with its own frames; the holder is not. One
    look per process: its first stop (see the scenario). Checked to fail on broken output."""
    with harness.Scenario(interp, "gil_held") as sc:
        wait_parked(sc)
        where = {"core": sc.make_core()} if source == "core" else {"pid": sc.pid}
        out, _ = run_gdb(interp, "thread apply all py-bt", **where)
        by_lwp = sections(out)
        assert set(by_lwp) == {t["native_id"] for t in sc.truth["threads"]}, out
        for t in sc.truth["threads"]:
            assert traceback_frames(by_lwp[t["native_id"]]) == expected(t["frames"]), out
        waiters = set(sc.truth["gil_waiters"])
        # Free-threaded: the scenario records no waiter (gil_held.py), so no marker at all.
        assert bool(waiters) is not free_threaded(interp), sc.truth
        want = {"Waiting for the GIL": waiters, "Garbage-collecting": set()}
        check_markers(out, want)
        if waiters:
            for broken in broken_marker_outputs(out, sc.truth["holder_native_id"],
                                                min(waiters)):
                with pytest.raises(AssertionError):
                    check_markers(broken, want)


def set_marker(out, lwp, marker, present):
    """`thread apply all py-bt`'s `out` with thread `lwp`'s section given `marker` (as its
    first entry) or rid of it: a broken copy for the checks to catch."""
    section = sections(out)[lwp]
    head = "Traceback (most recent call first):\n"
    if present:
        changed = section.replace(head, "%s  %s\n" % (head, marker), 1)
    else:
        changed = section.replace("\n  %s\n" % marker, "\n", 1)
    assert changed != section, (lwp, marker, present)
    start = out.index(section)
    return out[:start] + changed + out[start + len(section):]


def broken_marker_outputs(out, holder, waiter):
    """Copies of `thread apply all py-bt` each wrong in one way check_markers must catch: the
    GIL marker moved from a waiter to the holder, dropped from a waiter, added to the holder;
    Garbage-collecting added to the holder."""
    gil = "Waiting for the GIL"
    return [set_marker(set_marker(out, waiter, gil, False), holder, gil, True),
            set_marker(out, waiter, gil, False),
            set_marker(out, holder, gil, True),
            set_marker(out, holder, "Garbage-collecting", True)]


# Per thread, as gdb reads its registers at the stop (the kernel's view, with no pyunwind in
# it): LWP and orig_rax, the system call it is in (-1: none).
ORIG_RAX_SCRIPT = r"""
import gdb
for thread in gdb.selected_inferior().threads():
    thread.switch()
    print("ORIG_RAX %d %d" % (thread.ptid[1], int(gdb.parse_and_eval("(long) $orig_rax"))))
"""
FUTEX = 202  # x86-64 (asm/unistd_64.h)


@pytest.mark.parametrize("source", ["live", "core"])
@pytest.mark.parametrize("interp", MEMORY_ONLY_INTERPS, ids=lambda i: i.id)
def test_spinning_threads(interp, source):
    """tests/scenarios/gil_wait.py: four threads spin in Python, so at a stop one holds the GIL
    and the others wait for it, or are between two waits. Without debug info nothing here says
    which holds it (test_waiting_for_the_gil has the exact set, on gil_held): each marked thread
    must be one that gdb's registers show blocked in futex at that stop (once ready, a spinner
    makes no other futex wait), and at least one must be across STOPS stops."""
    with harness.Scenario(interp, "gil_wait") as sc:
        counts, outs = [], []
        for stop in range(STOPS):
            where = {"core": new_core(sc, stop)} if source == "core" else {"pid": sc.pid}
            out, _ = run_gdb(interp, "thread apply all py-bt",
                             "python exec(%r)" % ORIG_RAX_SCRIPT, **where)
            outs.append(out)
            in_futex = {int(lwp) for lwp, nr in re.findall(r"^ORIG_RAX (\d+) (-?\d+)$", out, re.M)
                        if int(nr) == FUTEX}
            waiting = marked(out, "Waiting for the GIL")
            assert waiting <= in_futex, (waiting, in_futex, out)
            assert not marked(out, "Garbage-collecting"), out
            counts.append(len(waiting))
            # Every thread that spins runs pure Python: none of its frames is calling a C
            # function (a stale value-stack slot once named `exec` on the stripped 3.10). The
            # main thread may still be leaving `_truth.ready` (closing the FIFO, then waiting
            # for the GIL), where a C call is real.
            for section in out.split("\nThread ")[1:]:
                if "_truth.py" in section:
                    continue
                assert "<built-in" not in section and "<method-wrapper" not in section, out
            assert len(sections(out)) == SPINNERS, out
            if not free_threaded(interp) and counts[-1] >= 1:
                break
        if free_threaded(interp):
            # No GIL: nobody waits for one, whatever the stop.
            assert counts == [0] * STOPS, outs
        else:
            assert max(counts) >= 1, (counts, outs[-1])

"""A walk that ends before a thread's first frame says so: its last frame is an unreadable
entry naming the reason, the thread has `truncated: true`, and `errors` has an entry at that
address. A complete stack has `truncated: false` and no error.

- gdb's gcore of Debian sid's 3.14 and 3.15 writes zeros for a thread stack whose mapping holds
  MADV_GUARD_INSTALL guard pages (glibc 2.41+), where each eval loop keeps its entry frame: a
  worker's walk meets a frame of zeros after `Thread.run`. Unrefilled, each worker shows its
  frames up to `Thread.run`, then "all zeros", truncated; refilled (harness.make_core), every
  stack is complete.
- On one real core (`threads`, pyenv 3.12 and sid 3.14), one frame of the main thread is
  patched per reason: `previous` into unmapped memory (the link cannot be read), `previous` to
  itself (a cycle), the next frame's bytes zeroed (memory the core lost), and an owner no
  version has (that frame costs one entry, the walk goes on, the stack is not truncated).

The cap (`MAX_FRAMES`) has its unit test in src/cpython/frames.rs (a real 250,000-frame stack
exceeds CPython's own recursion limit).
"""

import json
import os
import shutil

import pytest

import harness
from corefile import CoreFile, u64
from test_stacks import expected, got

TIMEOUT_SECONDS = 30
SID = {i.id: i for i in harness.provisioned_interpreters()}
PYENV = {i.id: i for i in harness.interpreters()}
ZEROED_INTERPS = [SID["debian-3.14"], SID["debian-3.15"]]
REASON_INTERPS = [PYENV["pyenv-3.12"], SID["debian-3.14"]]
# _PyInterpreterFrame: `previous`, `owner`, and the bytes before `localsplus`
# (src/cpython/layout/v3_12.rs, v3_14.rs; Include/internal/pycore_frame.h).
FRAME_PREVIOUS = {12: 8, 14: 8, 15: 8}
FRAME_OWNER = {12: 70, 14: 74, 15: 74}
FRAME_HEADER = {12: 72, 14: 80, 15: 80}
UNMAPPED = 0x10


def cli_json(core):
    rc, out, err = harness.run([harness.cli_path(), "core", core, "--json"], TIMEOUT_SECONDS)
    harness.assert_no_panic(err, rc)
    assert rc == 0, err
    return harness.check_report_schema(json.loads(out))


def plain_gcore(s, dest):
    """gcore as a user runs it: no refill of guarded mappings."""
    env = {k: v for k, v in os.environ.items() if k != "DEBUGINFOD_URLS"}
    rc, out, err = harness.run(["gcore", "-o", dest, s.pid], 120, env=env)
    path = "%s.%d" % (dest, s.pid)
    assert rc == 0 and os.path.isfile(path), out + err
    return path


def by_id(report):
    return {t["thread_id"]: t for t in report["threads"]}


def assert_stopped(report, thread, frames_before, reason):
    """``thread`` shows exactly ``frames_before`` and then one unreadable frame whose reason
    holds ``reason``; it is truncated and `errors` names that frame."""
    shown = got([f for f in thread["frames"] if f["kind"] == "python"])
    assert shown == frames_before, thread
    last = thread["frames"][-1]
    assert last["kind"] == "unreadable" and reason in last["reason"], last
    assert len(thread["frames"]) == len(frames_before) + 1, thread["frames"]
    assert thread["truncated"] is True
    assert [e for e in report["errors"] if e["address"] == last["address"]], report["errors"]


def assert_complete(report, truth_thread):
    t = by_id(report)[truth_thread["thread_id"]]
    assert got(t["frames"]) == expected(truth_thread["frames"]), truth_thread["name"]
    assert t["truncated"] is False, truth_thread["name"]


@pytest.mark.parametrize("interp", ZEROED_INTERPS, ids=lambda i: i.id)
def test_gcore_zeroed_thread_stack_is_a_reported_truncation(interp, tmp_path):
    with harness.Scenario(interp, "threads") as s:
        plain = plain_gcore(s, str(tmp_path / "plain"))
        refilled = s.make_core()
        truth = s.truth
        report = cli_json(plain)
        full = cli_json(refilled)
    main, workers = truth["threads"][0], truth["threads"][1:]
    assert main["name"] == "MainThread" and len(workers) == 3
    assert_complete(report, main)
    for w in workers:
        frames = expected(w["frames"])
        run = [f[0] for f in frames].index("Thread.run")
        assert_stopped(report, by_id(report)[w["thread_id"]], frames[:run + 1],
                       "all zeros (memory the core did not save?)")
    for tt in truth["threads"]:
        assert_complete(full, tt)
    assert full["errors"] == []


@pytest.fixture(scope="module")
def reason_cores(tmp_path_factory):
    made = {}

    def get(interp):
        if interp.id not in made:
            d = tmp_path_factory.mktemp("truncation-" + interp.id)
            with harness.Scenario(interp, "threads") as s:
                core = str(d / "core")
                shutil.move(s.make_core(), core)
                truth = s.truth
            report = cli_json(core)
            main = truth["threads"][0]
            assert_complete(report, main)
            addrs = [f["address"] for f in by_id(report)[main["thread_id"]]["frames"]]
            made[interp.id] = (CoreFile(core), truth, addrs, d)
        return made[interp.id]
    return get


def patched_report(reason_cores, interp, patches):
    core, truth, addrs, d = reason_cores(interp)
    path = core.patched_copy(d / "patched", patches(addrs))
    try:
        return cli_json(path), truth["threads"][0], addrs
    finally:
        os.unlink(path)


@pytest.mark.parametrize("interp", REASON_INTERPS, ids=lambda i: i.id)
@pytest.mark.parametrize("reason", ["unreadable link", "cycle", "zeroed frame"])
def test_each_early_end_is_a_truncation(interp, reason, reason_cores):
    m = interp.minor
    k = 1  # the main thread's frame whose link is damaged
    if reason == "unreadable link":
        patches, why = (lambda a: {a[k] + FRAME_PREVIOUS[m]: u64(UNMAPPED)}), "memory not available"
    elif reason == "cycle":
        patches, why = (lambda a: {a[k] + FRAME_PREVIOUS[m]: u64(a[k])}), "cycle"
    else:
        # The frame after k (its `previous`) zeroed: what a lost stack page reads as.
        patches = lambda a: {a[k + 1]: bytes(FRAME_HEADER[m])}  # noqa: E731
        why = "all zeros"
    report, main, addrs = patched_report(reason_cores, interp, patches)
    t = by_id(report)[main["thread_id"]]
    frames = expected(main["frames"])
    if reason == "zeroed frame":
        assert_stopped(report, t, frames[:k + 1], why)
    elif reason == "cycle":
        # Frame k links to itself: k is shown once, the walk meets it again and stops there.
        assert_stopped(report, t, frames[:k + 1], why)
        assert t["frames"][-1]["address"] == addrs[k]
    else:
        assert_stopped(report, t, frames[:k + 1], why)
    for tt in report["threads"]:
        if tt["thread_id"] != main["thread_id"]:
            assert tt["truncated"] is False


@pytest.mark.parametrize("interp", REASON_INTERPS, ids=lambda i: i.id)
def test_a_bad_owner_costs_one_frame_not_the_stack(interp, reason_cores):
    m, k = interp.minor, 1
    report, main, addrs = patched_report(
        reason_cores, interp, lambda a: {a[k] + FRAME_OWNER[m]: bytes([0x7f])})
    t = by_id(report)[main["thread_id"]]
    frames = expected(main["frames"])
    assert got(t["frames"][:k]) == frames[:k]
    bad = t["frames"][k]
    assert bad["kind"] == "unreadable" and "corrupt frame owner" in bad["reason"], bad
    assert bad["address"] == addrs[k]
    assert got(t["frames"][k + 1:]) == frames[k + 1:]
    assert t["truncated"] is False
    assert [e["address"] for e in report["errors"]] == [addrs[k]]

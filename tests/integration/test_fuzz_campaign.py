"""The corrupted-core campaign (tools/fuzz/campaign.py) in small: a fixed-seed sample of
corrupted real cores through the CLI (and a few through gdb), another of arm64 qemu cores (and a
few through gdb-multiarch), and every regression spec in tests/fuzz_specs/ (failures the
campaign found once), replayed on fresh cores.

Every run must end cleanly: exit 0 with one JSON report (or text), or exit 1 with one
`pyunwind: ` line; no crash, no hang over 10 s, no panic, and no Python traceback in gdb.
`make fuzz` runs the full campaign (10,000 cores, every interpreter, gdb and lldb).
"""

import glob
import json
import os
import sys

import pytest

import harness

sys.path.insert(0, str(harness.repo_root() / "tools" / "fuzz"))
import campaign  # noqa: E402

# Minutes with few tests: it runs first under pytest-xdist (conftest.py).
pytestmark = pytest.mark.long_file

SEED = 11
SAMPLE_CORES = 520
SAMPLE_GDB_RUNS = 10
SPECS = sorted(glob.glob(str(harness.repo_root() / "tests" / "fuzz_specs" / "*.json")))
# (interpreter, scenario) bases of the sample: every version, the stripped Debian builds, the
# free-threaded build, and each scenario at least twice.
SAMPLE_BASES = [("pyenv-3.10", "threads"), ("pyenv-3.11", "locals"), ("pyenv-3.12", "gather"),
                ("pyenv-3.13", "threads"), ("debian-3.11", "gather"), ("debian-3.14", "gather"),
                ("debian-3.15", "locals"), ("ft-3.13t", "threads"),
                # Waits on the outside world: a pipe, a socket object, a poll's array and the
                # system call's registers; gevent's cooperative sockets and their `_sock` slot.
                ("debian-3.11", "why_state"), ("pyenv-3.13", "greenlets_gevent"),
                # Subinterpreters: the interpreter list, each one's thread list and the thread
                # states of nested entries (3.12's borrowed thread states; 3.14's own).
                ("pyenv-3.12", "subinterpreters"), ("debian-3.14", "subinterpreters")]
# arm64 qemu cores (a few ms a run): bookworm's 3.11 and sid's 3.14 with its JIT on, read with
# --sysroot; a third of them through --native or --native-all, some through gdb-multiarch.
ARM64_SAMPLE_CORES = 240
ARM64_SAMPLE_GDB_RUNS = 4
ARM64_SAMPLE_BASES = [("arm64-bookworm-3.11", "locals"), ("arm64-sid-3.14-jit", "jit_call")]
# What locate_arm64 finds in every qemu core: the registers, the auxv, the dynamic linker's
# list (DT_DEBUG, r_debug, link_maps and their names), frame records.
ARM64_KINDS = {"prstatus", "at_phdr", "at_base", "at_entry", "dt_debug", "r_debug", "link_map",
               "l_name", "frame_record"}


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return str(tmp_path_factory.mktemp("fuzz-campaign"))


def interp_by_id():
    return {i.id: i for i in campaign.interpreters()}


def describe(failures):
    return "\n".join("%s in %s: %s\n  %s" % (f["kind"], f["where"], json.dumps(f["spec"]),
                                             f["detail"].strip()[-400:]) for f in failures)


def test_sample_of_corrupted_cores(root):
    interps = interp_by_id()
    bases = campaign.make_bases([(interps[i], sc) for i, sc in SAMPLE_BASES], root)
    assert len(bases) == len(SAMPLE_BASES)
    for b in bases:
        # The mutations aim at real structures: every base has the kinds its scenario holds.
        want = {"tstate", "interp", "frame", "code", "str"}
        want |= {"task", "coro", "future", "loop"} if b["scenario"] == "gather" else {"local"}
        if b["minor"] >= 13:
            want.add("debug_offsets")
        # The registers of each thread's system call (x86-64), the socket objects waited on,
        # and the poller's struct pollfd array (src/why/resources.rs).
        want |= {"syscall_regs"}
        if b["scenario"] == "why_state":
            want |= {"pollfd", "waited"}
        if b["scenario"] == "greenlets_gevent":
            want |= {"greenlet", "waited"}
        if b["scenario"] == "subinterpreters":
            # Five interpreters, each with its links; the thread states of every list.
            want |= {"interp_list", "waited"}
            assert len(b["structures"]["interp"]) == 5, b["structures"]
            assert len(b["structures"]["tstate"]) > len(b["structures"]["interp"]), b["structures"]
        if b["free_threaded"]:
            # The mimalloc heaps --heap walks: their page queues and pages.
            want |= {"mi_heap", "mi_page"}
        assert want <= set(b["structures"]), (b["interp"], b["scenario"], b["structures"])
    specs, sample = campaign.plan(bases, SAMPLE_CORES, SEED, SAMPLE_GDB_RUNS, 0)
    counts, failures = campaign.campaign(bases, specs, 2, root, sample)
    assert not failures, describe(failures)
    assert counts == dict.fromkeys(campaign.COUNTS, 0)


def test_arm64_sample_of_corrupted_cores(root):
    interps = interp_by_id()
    bases = campaign.make_bases([(interps[i], sc) for i, sc in ARM64_SAMPLE_BASES], root)
    assert len(bases) == len(ARM64_SAMPLE_BASES)
    for b in bases:
        want = {"tstate", "interp", "frame", "code", "str", "local"} | ARM64_KINDS
        if b["minor"] >= 13:
            want.add("debug_offsets")
        # The socket objects waited on and the poller's struct pollfd array
        # (src/why/resources.rs); the system call's registers are corrupted on x86-64 only.
        if b["scenario"] == "why_state":
            want |= {"pollfd", "waited"}
        if b["scenario"] == "greenlets_gevent":
            want |= {"greenlet", "waited"}
        if b["scenario"] == "subinterpreters":
            # Five interpreters, each with its links; the thread states of every list.
            want |= {"interp_list", "waited"}
            assert len(b["structures"]["interp"]) == 5, b["structures"]
            assert len(b["structures"]["tstate"]) > len(b["structures"]["interp"]), b["structures"]
        if b["env"].get("PYTHON_JIT") == "1":
            want |= {"executor", "executor_roots"}
        assert want <= set(b["structures"]), (b["interp"], b["scenario"], b["structures"])
        assert b["structures"]["prstatus"] and len(b["structures"]["link_map"]) >= 4, b
    specs, sample = campaign.plan(bases, ARM64_SAMPLE_CORES, SEED, ARM64_SAMPLE_GDB_RUNS, 0)
    counts, failures = campaign.campaign(bases, specs, 2, root, sample)
    assert not failures, describe(failures)
    assert counts == dict.fromkeys(campaign.COUNTS, 0)


def test_campaign_counts_a_caught_panic(root, monkeypatch):
    """A panic caught by the boundary (one clean-looking `pyunwind: internal error ...` line)
    is counted as a panic, once per run: here one spec, two CLI runs (the threads' reading and
    --heap's), no debugger."""
    interps = interp_by_id()
    bases = campaign.make_bases([(interps["pyenv-3.12"], "threads")], root)
    specs, _ = campaign.plan(bases, 1, SEED, 0, 0)
    monkeypatch.setenv("PYUNWIND_TEST_PANIC", "cli")
    counts, failures = campaign.campaign(bases, specs, 1, root, {}, text_every=0)
    assert counts == dict(dict.fromkeys(campaign.COUNTS, 0), panic=2), describe(failures)
    assert [(f["where"], f["kind"]) for f in failures] == [
        ("cli --json --locals --tasks --why", "panic"), ("cli --json --heap", "panic")]
    assert all("internal error in cli at src/panic.rs:" in f["detail"] for f in failures), failures


def test_a_batch_that_drew_no_cores_runs_nothing(root):
    """`make fuzz` with fewer cores than bases leaves a batch of bases with no spec: it runs
    nothing (it once fell back to every spec of the run, which it is not given: a TypeError)."""
    counts, failures = campaign.campaign([], None, 1, root, {}, indexed=[])
    assert counts == dict.fromkeys(campaign.COUNTS, 0) and failures == []


@pytest.mark.parametrize("path", SPECS, ids=[os.path.basename(p)[:-5] for p in SPECS])
def test_regression_spec(path, root):
    spec = json.load(open(path))
    interp = interp_by_id()[spec["interp"]]
    bases = campaign.make_bases([(interp, spec["scenario"])], root)
    # The spec still lands: each patch names a structure the fresh core has.
    for p in spec["patches"]:
        kind, index = p["at"]
        assert index < len(bases[0]["structures"].get(kind, ())), (p, bases[0]["structures"])
    counts, failures = campaign.campaign(bases, [spec], 1, root, {0: ["gdb"]})
    assert not failures, describe(failures)

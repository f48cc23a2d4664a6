"""--why on a real torch.distributed job (issue 37): tests/scenarios/torch_ddp.py under torchrun,
four ranks with the gloo backend on the CPU, rank 2 stalled in its data step (in Python, on a
Lock), ranks 0, 1 and 3 in `loss.backward()`, their main thread blocked in native code: DDP's
reducer waits in `finalize_backward` for the all-reduce rank 2 never joins.

torch 2.15.0 comes from PyPI (tools/torch.sh, run by the module fixture: only a run that
includes this file pays for the install, about 100 s and 5 GB once, into the test cache). The
job is started once for the module; every rank records its own truth (pid, its threads'
frames, the C function its main thread calls, by the engine's tp_name), and every expectation
comes from those truths, but one: the innermost native frame outside the C and C++ runtimes
and the interpreter, NATIVE_FUNCTION, which gdb's `bt` and `pystack remote --native` both
show for torch 2.15.0 (the version tools/torch.sh pins).

Live (`pid RANK --why --json`, with and without `--native`, and `pid --children TORCHRUN`),
and from a gcore core of a waiting rank (`core CORE --why --json`).

Across the job (issue 38, items 1, 2 and 5): `pid --children LAUNCHER --tree --why` and
`--group --why` give the straggler verdict (3 of 4 ranks in `_engine_run_backward`, in native
code, named in the text by their own `train_step` with `in native code
torch._C._EngineBase.run_backward` after it; the stalled rank elsewhere, its innermost differing frame `load_batch`, on a lock), with
the launcher and torchrun's agent left out, and the merged call tree of every thread of the
ranks and of the launcher, exactly as they recorded themselves (the agent, which records no
truth, taken out of it).
"""

import json
import os
import signal
import subprocess
import time

import pytest

import harness
from test_tree import (HOST, broken_trees, broken_verdicts, check_tree, check_verdict,
                       library_of, verdict_line, verdict_of, why_of, without_process)
from test_why_state import core_syscalls, proc_syscall

pytestmark = pytest.mark.long_file

TORCH_SH = harness.repo_root() / "tools" / "torch.sh"
# pip's download of torch and its CUDA wheels when pip's own cache is cold.
INSTALL_TIMEOUT_SECONDS = 1800
# Four ranks importing torch at once (the scenario's own limit is 300 s).
JOB_READY_SECONDS = 360
CLI_TIMEOUT_SECONDS = 120
GCORE_TIMEOUT_SECONDS = 300
KILL_WAIT_SECONDS = 10
# The innermost native frame of a waiting rank's main thread outside libc, libstdc++, libgcc,
# ld.so, the vdso and the interpreter, demangled as gdb and pystack print it. gdb 13 `bt` and
# pystack 1.x `remote --native` on torch 2.15.0+cu132 (pyenv 3.12.1), innermost first:
#   futex wait, pthread_cond_wait (libc), std::condition_variable::wait(...) (libstdc++),
#   c10d::Reducer::finalize_backward() (libtorch_cpu.so), then the autograd engine:
#   GraphTask::exec_post_processing, Engine::thread_main, Engine::execute_with_graph_task,
#   PythonEngine::execute, THPEngine_run_backward (libtorch_python.so).
NATIVE_FUNCTION = "c10d::Reducer::finalize_backward()"
# What the text verdict says when it finds nothing to say.
NOTHING_FOUND = "No crash, deadlock or blocked wait found."


@pytest.fixture(scope="module")
def torch_interp():
    """pyenv's 3.12.1 in the venv tools/torch.sh installs torch into (its python is a link to
    pyenv's, so the process maps pyenv's libpython)."""
    started = time.monotonic()
    rc, out, err = harness.run(["bash", TORCH_SH], INSTALL_TIMEOUT_SECONDS)
    if rc != 0 or not out.strip():
        pytest.fail("tools/torch.sh failed (%d):\n%s" % (rc, err[-3000:]), pytrace=False)
    if err.strip():
        print("tools/torch.sh (%.0f s):\n%s" % (time.monotonic() - started, err))
    exe = out.strip().splitlines()[-1]
    (base,) = harness.pick(["pyenv-3.12"], among=harness.interpreters())
    return harness.Interp("torch-3.12", exe, {}, 12, False, base.libpython)


@pytest.fixture(scope="module")
def job(torch_interp):
    sc = harness.Scenario(torch_interp, "torch_ddp", timeout=JOB_READY_SECONDS)
    try:
        yield sc
    finally:
        # torchrun starts each rank in a session of its own: the harness's kill of the
        # launcher's process group reaches torchrun, not the ranks (they also die with
        # torchrun, by PR_SET_PDEATHSIG, but are not left to it).
        pids = [r["pid"] for r in sc.truth["ranks"]]
        for pid in pids:
            kill(pid)
        sc.close()
        deadline = time.monotonic() + KILL_WAIT_SECONDS
        while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = [pid for pid in pids if alive(pid)]
        assert not left, "ranks %r survived SIGKILL" % left


def kill(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def alive(pid):
    """Running, or a zombie nobody has reaped yet (its parent, torchrun, is dead: init reaps)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def cli(*args):
    """Runs the CLI; returns (rc, stdout, stderr). Each JSON document it prints (one per line
    for several targets) is checked against docs/report.schema.json."""
    proc = subprocess.run([str(harness.cli_path()), *map(str, args)], capture_output=True,
                          text=True, timeout=CLI_TIMEOUT_SECONDS, stdin=subprocess.DEVNULL)
    harness.assert_no_panic(proc.stderr, proc.returncode)
    if "--json" in args:
        for line in proc.stdout.splitlines():
            harness.check_report_schema(json.loads(line))
    return proc.returncode, proc.stdout, proc.stderr


def report_of(*args):
    rc, out, err = cli(*args)
    assert rc == 0, err
    return json.loads(out)


def waiting_ranks(job):
    return [r for r in job.truth["ranks"] if not r["stalled"]]


def stalled_rank(job):
    (rank,) = [r for r in job.truth["ranks"] if r["stalled"]]
    return rank


def python_stack(frames):
    return [(f["function"], f["file"], f["line"]) for f in frames if f["kind"] == "python"]


def truth_stack(thread):
    return [(f["function"], f["file"], f["line"]) for f in thread["frames"]]


def first_python_frame(frames):
    return next(i for i, f in enumerate(frames) if f["kind"] == "python")


def check_threads(report, truth):
    """The report's threads are the rank's Python threads, each with the frames it recorded;
    returns {native id: report thread}."""
    assert report["errors"] == [], report["errors"]
    got = {t["native_id"]: t for t in report["threads"]}
    want = {t["native_id"]: t for t in truth["threads"]}
    assert sorted(got) == sorted(want)
    for tid, thread in want.items():
        assert got[tid]["name"] == thread["name"]
        assert python_stack(got[tid]["frames"]) == truth_stack(thread), tid
    return got


def check_waiting_rank(report, truth, syscall, native=False):
    """A waiting rank's main thread: blocked (`syscall`: the call the kernel shows) in native
    code, under the engine's run_backward, which its innermost Python frame calls."""
    main = check_threads(report, truth)[truth["pid"]]
    assert (main["state"], main["syscall"]) == ("syscall", syscall), main
    waiting = main["waiting"]
    assert waiting is not None, "rank %d: no wait found for its main thread" % truth["rank"]
    assert waiting["kind"] == "native", waiting
    assert waiting["function"] == truth["function"], waiting
    assert waiting["frame"] == first_python_frame(main["frames"]), waiting
    assert waiting["native_function"] == (NATIVE_FUNCTION if native else None), waiting
    assert waiting["owner"] is None, waiting
    # The engine object whose method it is.
    assert (waiting["object"], waiting["type"]) == (
        truth["engine"], truth["function"].rsplit(".", 1)[0]), waiting


def check_stalled_rank(report, truth, syscall):
    """The stalled rank's main thread waits in Python, on the Lock it recorded."""
    main = check_threads(report, truth)[truth["pid"]]
    assert (main["state"], main["syscall"]) == ("syscall", syscall), main
    waits = truth["waits"]
    assert main["waiting"] == {"kind": waits["kind"], "object": waits["object"], "type": "Lock",
                               "owner": None, "frame": waits["frame"]}, main["waiting"]


def verdict_lines(text):
    """The text report's verdict: the lines before the first `Python 3.` header."""
    lines = text.splitlines()
    end = next(i for i, line in enumerate(lines) if line.startswith("Python 3."))
    return [line for line in lines[:end] if line.strip()]


# --- live --------------------------------------------------------------------------------


def test_waiting_ranks_are_blocked_in_native_run_backward(job):
    for rank in waiting_ranks(job):
        pid, truth = rank["pid"], rank["truth"]
        report = report_of("pid", pid, "--why", "--json")
        assert report["python"]["pid"] == pid
        check_waiting_rank(report, truth, proc_syscall(pid, pid))


def test_with_native_frames_the_reducer_is_where_it_waits(job):
    for rank in waiting_ranks(job):
        pid, truth = rank["pid"], rank["truth"]
        report = report_of("pid", pid, "--why", "--native", "--json")
        check_waiting_rank(report, truth, proc_syscall(pid, pid), native=True)


def test_verdict_names_the_native_wait(job):
    for rank in waiting_ranks(job):
        pid = rank["pid"]
        for extra in ((), ("--native",)):
            rc, out, err = cli("pid", pid, "--why", *extra)
            assert rc == 0, err
            verdict = verdict_lines(out)
            assert NOTHING_FOUND not in verdict, out
            lines = [v for v in verdict if v.startswith('thread %d "MainThread" ' % pid)]
            assert len(lines) == 1, out
            want = 'thread %d "MainThread" is blocked in native code: %s' % (
                pid, rank["truth"]["function"])
            assert lines == [want + (", in %s" % NATIVE_FUNCTION if extra else "")], out


def test_stalled_rank_waits_in_python_not_in_backward(job):
    rank = stalled_rank(job)
    pid, truth = rank["pid"], rank["truth"]
    report = report_of("pid", pid, "--why", "--json")
    check_stalled_rank(report, truth, proc_syscall(pid, pid))
    assert [f for f, _, _ in truth_stack(truth["threads"][0])][:2] == ["load_batch",
                                                                       "train_step"]


def test_children_of_torchrun_cover_every_rank(job):
    torchrun = job.truth["torchrun_pid"]
    rc, out, err = cli("pid", "--children", torchrun, "--why", "--json")
    assert rc == 0, err
    reports = {r["pid"]: r for r in map(json.loads, out.splitlines())}
    ranks = {r["pid"]: r for r in job.truth["ranks"]}
    # torchrun itself (a Python program: the elastic agent) and its four ranks.
    assert sorted(reports) == sorted([torchrun, *ranks])
    assert reports[torchrun]["errors"] == []
    for pid, rank in ranks.items():
        if rank["stalled"]:
            check_stalled_rank(reports[pid], rank["truth"], proc_syscall(pid, pid))
        else:
            check_waiting_rank(reports[pid], rank["truth"], proc_syscall(pid, pid))


# --- across the job: the straggler verdict and the merged call tree (issue 38) -------------


def job_whys(job):
    """{pid: why_of's tuple} of each rank's main thread from outside the tool: blocked (state
    `syscall`) in the call the kernel shows (/proc); the waiting ranks in native code, in the C
    function they recorded calling, the stalled one on its lock; the library of the innermost
    frame each recorded. `--why`'s own (why_of) must be the same."""
    out = {}
    for r in job.truth["ranks"]:
        pid, truth = r["pid"], r["truth"]
        inner = library_of(truth["threads"][0]["frames"][0]["file"])
        if r["stalled"]:
            out[pid] = ("syscall", proc_syscall(pid, pid), "lock", None, inner)
        else:
            out[pid] = ("syscall", proc_syscall(pid, pid), "native", truth["function"], inner)
        main = report_of("pid", pid, "--why", "--json")["threads"][0]
        assert main["native_id"] == pid, main
        assert why_of(main) == out[pid], (main, out[pid])
    return out


def expected_job_verdict(job, whys):
    """The verdict the ranks' truths make: the waiting ranks meet where their main threads'
    stacks stop being the same (they are the same: their innermost frame); the stalled rank is
    elsewhere from where its stack leaves theirs; the launcher and the agent are no ranks."""
    mains = {r["pid"]: r["truth"]["threads"][0] for r in job.truth["ranks"]}
    return verdict_of(mains, stalled_rank(job)["pid"], whys,
                      (job.pid, job.truth["torchrun_pid"]))


def test_tree_and_verdict_of_the_job(job):
    torchrun = job.truth["torchrun_pid"]
    whys = job_whys(job)
    stalled = stalled_rank(job)["pid"]
    # The waiting ranks in native code under run_backward, the stalled one on its lock.
    assert {p: w[2] for p, w in whys.items()} == {
        r["pid"]: ("lock" if r["stalled"] else "native") for r in job.truth["ranks"]}
    want = expected_job_verdict(job, whys)
    assert want["majority"]["frames"][0]["function"] == "_engine_run_backward"
    # The text names the ranks' own code, torch's native wait after it (issue 49 item 10).
    m = want["majority"]
    (function,) = {r["truth"]["function"] for r in waiting_ranks(job)}
    assert function == "torch._C._EngineBase.run_backward"
    assert m["frames"][m["frame"]]["function"] == "train_step", m
    assert [(w["call"], w["library"]) for w in m["waits"]] == [(function, "torch")], m
    assert want["outliers"][0]["frames"][0]["function"] == "load_batch"

    got = report_of("pid", "--children", job.pid, "--tree", "--why", "--json")
    assert got["failed"] == []
    # The launcher, torchrun's agent and the four ranks.
    assert got["reports"] == 2 + len(job.truth["ranks"])
    check_verdict(got["verdict"], want)
    for b in broken_verdicts(got["verdict"]):
        with pytest.raises(AssertionError):
            check_verdict(b, want)
    # The tree: every thread of the launcher and of the ranks, as each recorded them; the
    # agent's threads taken out (it records no truth).
    procs = [(HOST, job.pid, job.truth["threads"])]
    procs += [(HOST, r["pid"], r["truth"]["threads"]) for r in job.truth["ranks"]]
    tree, paths = without_process(got["tree"], torchrun)
    assert paths, "no thread of torchrun's agent in the tree"
    check_tree(tree, procs)
    for b in broken_trees(tree):
        with pytest.raises(AssertionError):
            check_tree(b, procs)

    rc, text, err = cli("pid", "--children", job.pid, "--tree", "--why")
    assert rc == 0, err
    lines = text.splitlines()
    assert lines[0] == verdict_line(got["verdict"]), lines[:3]
    assert lines[0].startswith(
        "3 of 4 processes wait in train_step (torch_ddp.py:%d): in native code "
        "torch._C._EngineBase.run_backward; " % m["frames"][m["frame"]]["line"]), lines[0]
    assert lines[1] == ("2 other processes not counted as ranks (no thread starts as the "
                        "ranks' do): %s" % ", ".join(
                            "pid %d (host %s)" % (p, HOST)
                            for p in sorted([job.pid, torchrun])))
    # The stalled rank's leaf: its innermost frame, indented by its depth, naming it.
    s = stalled_rank(job)["truth"]["threads"][0]
    f = s["frames"][0]
    leaf = "%s1 %s (%s:%d): pid %d (host %s) thread %d \"MainThread\"" % (
        "  " * (len(s["frames"]) - 1), f["function"], f["file"], f["line"], stalled, HOST,
        s["native_id"])
    assert leaf in lines, text

    # --group --why: the same verdict first, then the groups.
    rc, text, err = cli("pid", "--children", job.pid, "--group", "--why")
    assert rc == 0, err
    assert text.splitlines()[0] == verdict_line(got["verdict"])
    grouped = report_of("pid", "--children", job.pid, "--group", "--why", "--json")
    check_verdict(grouped["verdict"], want)
    assert "tree" not in grouped
    # From torchrun down: the agent alone left out.
    got = report_of("pid", "--children", torchrun, "--tree", "--why", "--json")
    assert got["reports"] == 1 + len(job.truth["ranks"])
    check_verdict(got["verdict"], dict(want, left_out=[{"host": HOST, "pid": torchrun}]))


# --- a core --------------------------------------------------------------------------------


def gcore(job, pid):
    """A gdb core of rank ``pid`` (gdb's gcore, without reading the shared libraries' symbols:
    torch's take gdb about 30 s, and a core does not need them; the core is about 2 GB, most
    of it the CUDA libraries' text)."""
    path = job.tmpdir / ("rank.%d" % pid)
    env = {k: v for k, v in os.environ.items() if k != "DEBUGINFOD_URLS"}
    rc, out, err = harness.run(
        [*harness.gdb_argv(), "-nx", "-batch", "-iex", "set auto-solib-add off", "-p", pid,
         "-ex", "gcore %s" % path], GCORE_TIMEOUT_SECONDS, env=env)
    if rc != 0 or not path.is_file():
        raise harness.HarnessError("gcore of rank %d failed (%d): %s" % (pid, rc, err))
    harness.refill_guarded_mappings(path, pid)
    return path


def test_core_of_a_waiting_rank(job):
    rank = waiting_ranks(job)[0]
    pid, truth = rank["pid"], rank["truth"]
    core = gcore(job, pid)
    try:
        syscall = core_syscalls(core)[pid]
        report = report_of("core", core, "--why", "--json")
        assert report["python"]["source"] == "core"
        assert report["python"]["pid"] == pid
        check_waiting_rank(report, truth, syscall)
        report = report_of("core", core, "--why", "--native", "--json")
        check_waiting_rank(report, truth, syscall, native=True)
    finally:
        core.unlink()

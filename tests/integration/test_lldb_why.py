"""`py-why` in lldb: the same verdict, waits, holds and deadlocks as the CLI's `--why` on a core
of the lock-order deadlock scenario (the gdb side: test_why_gdb.py); and on a live process lldb
attached, each thread's state and system call, as the kernel shows them at that stop
(tests/scenarios/why_state.py; the arm64 side, from lldb's registers through qemu's stub:
test_lldb_arm64_live.py); on live processes whose socket waits have a peer process (a child,
a PostgreSQL backend, a server that never accepts: tests/scenarios/why_peers.py), the CLI's
verdict with the process the record names. Runs under `make integration-lldb`
($PYUNWIND_LLDB)."""

import json

import pytest

import harness
from test_lldb import json_from, mark, run_lldb, split
from test_why_gdb import cli_why, verdict, why_core, why_fields  # noqa: F401
from test_why_peers import debugger_verdict, live_peer_lines, postgres, start  # noqa: F401
from test_why_state import DOING, NAMES, uvloop_env
from test_why_waits import cli

# The why_peers scenarios lldb attaches to: (mode, interpreter).
PEER_SCENARIOS = [("threads", "pyenv-3.12"), ("asyncpg", "pyenv-3.12"),
                  ("unaccepted", "pyenv-3.13")]


def test_lldb_py_why_is_the_cli_why(why_core):  # noqa: F811
    interp, core = why_core
    want = json.loads(cli_why(core, "--json"))
    out = run_lldb(interp, mark("TEXT"), "py-why", mark("JSON"), "py-why --json", core=str(core))
    got = split(out, ["TEXT", "JSON"])
    assert why_fields(json_from(got["JSON"])) == why_fields(want)
    # What the command printed, after lldb's echo of it.
    text = got["TEXT"].split("(lldb) py-why\n", 1)[1]
    assert verdict(text) == verdict(cli_why(core)), text
    assert harness.panic_in(out) is None, out


# What each thread's /proc/PID/task/TID/syscall starts with (the call's number, `running`, or
# -1 outside a call), read by lldb's own Python at the stop pyunwind reads.
PROC_SYSCALLS = ("script import json; p = lldb.process; print(json.dumps({t.GetThreadID(): "
                 "open('/proc/%d/task/%d/syscall' % (p.GetProcessID(), t.GetThreadID())).read().split()[0] "
                 "for t in p}))")


@pytest.fixture(scope="module")
def why_state():
    interp = harness.pick(["debian-3.11"])[0]
    with harness.Scenario(interp, "why_state", env=uvloop_env(interp)) as sc:
        yield interp, sc


def test_lldb_py_why_live_syscalls(why_state):
    """Each thread of why_state in lldb, memory read directly and through lldb: its state and
    system call are the kernel's at the stop (`futex`, `read`, `clock_nanosleep`...). lldb
    shows no orig_rax on x86-64 (lldb-server sends none), so through lldb the core reads
    /proc for a process of this machine, as it does directly."""
    interp, sc = why_state
    out = run_lldb(interp, mark("PROC"), PROC_SYSCALLS, mark("AUTO"), "py-why --json",
                   "pyunwind set memory debugger", mark("DBG"), "py-why --json", pid=sc.pid)
    got = split(out, ["PROC", "AUTO", "DBG"])
    proc = json.loads(next(line for line in got["PROC"].splitlines() if line.startswith("{")))
    kernel = {}
    for t in sc.truth["threads"]:
        first = proc[str(t["native_id"])]
        kernel[t["name"]] = None if first == "running" or int(first) < 0 else NAMES[int(first)]
    for name, source in (("AUTO", "live"), ("DBG", "debugger")):
        report = json_from(got[name])
        assert report["python"]["source"] == source, report["python"]
        threads = {t["name"]: t for t in report["threads"]}
        assert set(threads) == set(sc.truth["doing"]), sorted(threads)
        for thread, doing in sc.truth["doing"].items():
            state, calls = DOING[doing]
            assert kernel[thread] in calls, (thread, kernel[thread])
            t = threads[thread]
            assert (t["state"], t["syscall"]) == (state, kernel[thread]), (name, thread, t)


@pytest.fixture(scope="module")
def blocked_loop():
    interp = harness.pick(["pyenv-3.12"])[0]
    with harness.Scenario(interp, "why_loops", args=("c", "blocked")) as sc:
        yield interp, sc, sc.make_core()


def test_lldb_py_why_leads_with_the_blocked_loop(blocked_loop):
    """A core of an asyncio loop blocked by a task in time.sleep (tests/scenarios/why_loops.py):
    lldb's `py-why` prints the CLI's verdict, whose first line is the loop's, and its JSON
    has the loop's state and what blocks it, as the scenario recorded them."""
    interp, sc, core = blocked_loop
    out = run_lldb(interp, mark("TEXT"), "py-why", mark("JSON"), "py-why --json", core=str(core))
    got = split(out, ["TEXT", "JSON"])
    text = got["TEXT"].split("(lldb) py-why\n", 1)[1]
    assert verdict(text) == verdict(cli_why(core)), text
    r = sc.truth["running"]
    assert verdict(text).splitlines()[0] == (
        'event loop %#x on thread %d "loop" is blocked by task "slow" in slow (why_loops.py:%d):'
        ' time.sleep; %d tasks wait' % (sc.truth["loop"]["id"], sc.truth["loop"]["native_id"],
                                        r["line"], sc.truth["tasks_waiting"]))
    (loop,) = json_from(got["JSON"])["loops"]
    assert (loop["state"], loop["overdue_s"], loop["blocked_by"]) == ("blocked", None, {
        "task": r["id"], "task_name": "slow", "function": "slow", "file": r["file"],
        "line": r["line"], "call": "time.sleep"})
    assert harness.panic_in(out) is None, out


@pytest.fixture(scope="module", params=PEER_SCENARIOS, ids=lambda p: "-".join(p))
def peers(request):
    mode, interp = request.param
    args = (request.getfixturevalue("postgres"),) if mode == "asyncpg" else ()
    with start(interp, mode, *args) as sc:
        yield sc


@pytest.mark.parametrize("memory", ["auto", "debugger"])
def test_lldb_py_why_names_the_peer_process_live(peers, memory):
    """lldb attached to a live why_peers scenario, memory read directly and through lldb:
    `py-why` prints the CLI's `pid --why` verdict, whose socket waits name the process at the
    other end as the scenario recorded it, `(postgres, pid N)`, `(python3, pid N)`."""
    sc = peers
    want = verdict(cli(sc, "live"))
    out = run_lldb(sc.interp, "pyunwind set memory %s" % memory, mark("TEXT"), "py-why",
                   pid=sc.pid)
    got = debugger_verdict(split(out, ["TEXT"])["TEXT"])
    assert got == want, (got, want)
    for line in live_peer_lines(sc):
        assert line in got.splitlines(), (line, got)
    assert harness.panic_in(out) is None, out

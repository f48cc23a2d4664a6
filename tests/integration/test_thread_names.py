"""Thread names (`native_name`) and `--native-all` (issue 38 item 4), on
tests/scenarios/thread_names.py: Python threads with and without a `threading` name, named by
the system or not, and C threads with no Python thread state. Live, each thread's
`native_name` is /proc's `comm` as the scenario read it at the stop (and agreeing with the
names it gave); a gcore core records none (its NT_PRPSINFO's `pr_fname` is argv[0]'s file
name), a kernel core the main thread's (its `pr_fname` is the main thread's `comm`).
`--native-all` lists every thread of the process, as `pystack --native-all` does, the C threads
with their native frames (checked against plain gdb's unwinding of the core), and `--why` gives
their system call. gdb's `py-bt -a` names threads as gdb does (lldb:
test_lldb_thread_names.py)."""

import json
import os
import re
import resource
import signal
import sys

import pytest

import harness
from test_native import _gdb_frames, check_native_frames_match_gdb
from test_stacks import expected, got, json_from, run_gdb

INTERPS = harness.pick(["pyenv-3.10", "pyenv-3.12", "debian-3.14"])
TIMEOUT = 120
PYSTACK = os.path.join(os.path.dirname(sys.executable), "pystack")
# gdb's name of every thread, as JSON {lwp: name or null}.
GDB_NAMES = ("python import json; print('NAMES ' + json.dumps({t.ptid[1]: t.name for t in "
             "gdb.selected_inferior().threads()}))")


@pytest.fixture(scope="module", params=INTERPS, ids=lambda i: i.id)
def stop(request):
    with harness.Scenario(request.param, "thread_names") as sc:
        yield sc


def cli(*args):
    return harness.cli_checked(*args, timeout=TIMEOUT)


def tasks(sc):
    return sorted(int(t) for t in os.listdir("/proc/%d/task" % sc.pid))


def python_threads(sc):
    return {t["native_id"]: t for t in sc.truth["threads"]}


def native_only(sc):
    return {t["native_id"]: t for t in sc.truth["native_only"]}


def role(sc, tid):
    """What the scenario made thread `tid`: its `threading` name, `raw` (the `_thread` one),
    `c-named` or `c-unnamed`."""
    t = python_threads(sc).get(tid)
    if t is not None:
        return t["name"] or "raw"
    return "c-named" if sc.truth["set_names"].get(str(tid)) == "c-worker" else "c-unnamed"


def test_the_truth_covers_the_process(stop):
    """Every thread of the process is in the truth once: the Python threads and the C ones;
    /proc's names are the ones the scenario gave (so that the checks below check names it
    chose, not only /proc against /proc)."""
    ids = sorted(list(python_threads(stop)) + list(native_only(stop)))
    assert ids == tasks(stop) == sorted(int(t) for t in stop.truth["comm"])
    roles = sorted(role(stop, t) for t in ids)
    assert roles == sorted(["MainThread", "named-worker", "plain-worker",
                            "worker-with-a-long-name", "raw", "c-named", "c-unnamed"]), roles
    comm = stop.truth["comm"]
    by_role = {role(stop, t): comm[str(t)] for t in ids}
    assert (by_role["MainThread"], by_role["named-worker"], by_role["raw"], by_role["c-named"],
            by_role["c-unnamed"]) == ("names-main", "os-named", "raw-py", "c-worker", "names-main")
    # 3.14's threading names each thread itself (cut to 15 bytes); before, they inherit.
    own = stop.interp.minor >= 14
    assert by_role["plain-worker"] == ("plain-worker" if own else "names-main")
    assert by_role["worker-with-a-long-name"] == ("worker-with-a-l" if own else "names-main")


def check_python_threads(sc, threads, names):
    """`threads` (a report's) are exactly the truth's Python threads, each with its name, its
    Python frames, a thread state and `native_name` `names[tid]`."""
    truth = python_threads(sc)
    assert sorted(t["native_id"] for t in threads) == sorted(truth)
    for t in threads:
        tt = truth[t["native_id"]]
        assert (t["name"], t["thread_id"]) == (tt["name"], tt["thread_id"]), t
        assert t["native_name"] == names.get(t["native_id"]), (t["native_id"], t["native_name"])
        assert t["thread_state"] is not None and t["interpreter"] is not None, t
        py = [f for f in t["frames"] if f["kind"] == "python"]
        assert got(py) == expected(tt["frames"]), tt["name"]


def comm(sc):
    return {int(k): v for k, v in sc.truth["comm"].items()}


def test_live_report_names_every_python_thread(stop):
    """`pid --json` lists the Python threads only, each named as /proc names it."""
    check_python_threads(stop, cli("pid", stop.pid, "--json")["threads"], comm(stop))


def check_native_only(sc, t, name):
    """A C thread's entry: no thread state, no `threading` name, its pthread_t, not holding
    the GIL, native frames only, libc's pause among them; `native_name` `name`."""
    tt = native_only(sc)[t["native_id"]]
    assert (t["name"], t["interpreter"], t["thread_state"], t["holds_gil"]) == (None, None, None, False), t
    assert t["thread_id"] == tt["thread_id"], t
    assert t["native_name"] == name, t
    kinds = set(f["kind"] for f in t["frames"])
    assert kinds == {"native"}, t["frames"]
    functions = [(f.get("function") or "").split("@")[0] for f in t["frames"]]
    assert "pause" in functions or "__libc_pause" in functions, functions


def native_all(sc, *where):
    """`--native-all --json` of the process (`where`: `pid PID` or `core CORE`), checked:
    every thread of the process once, the Python threads first in their order without
    --native-all, then the C threads by LWP."""
    report = cli(*where, "--native-all", "--json")
    ids = [t["native_id"] for t in report["threads"]]
    assert sorted(ids) == tasks(sc), ids
    plain = [t["native_id"] for t in cli(*where, "--json")["threads"]]
    assert ids == plain + sorted(native_only(sc)), (ids, plain)
    return report


def test_native_all_lists_every_thread_live(stop):
    report = native_all(stop, "pid", stop.pid)
    names = comm(stop)
    c_ids = set(native_only(stop))
    check_python_threads(stop, [t for t in report["threads"] if t["native_id"] not in c_ids], names)
    for t in report["threads"]:
        if t["native_id"] in c_ids:
            check_native_only(stop, t, names[t["native_id"]])
    assert sorted(s["native_id"] for s in report["native_stops"]) == tasks(stop)


def test_native_all_lists_every_thread_of_the_core(stop):
    """A gcore core: the same threads and frames as live; no thread has a `native_name`."""
    core = stop.make_core()
    report = native_all(stop, "core", core)
    names = {}
    c_ids = set(native_only(stop))
    check_python_threads(stop, [t for t in report["threads"] if t["native_id"] not in c_ids], names)
    check_python_threads(stop, cli("core", core, "--json")["threads"], names)
    for t in report["threads"]:
        if t["native_id"] in c_ids:
            check_native_only(stop, t, None)
    live = cli("pid", stop.pid, "--native-all", "--json")
    strip = lambda r: {t["native_id"]: [(f["kind"], f.get("function"), f.get("line"), f.get("address"))
                                        for f in t["frames"]] for t in r["threads"]}
    assert strip(report) == strip(live)


def test_native_all_frames_of_the_core_are_gdbs(stop):
    """Every thread's native frames, the C threads' too, against plain gdb's unwinding of the
    core (test_native.py's check)."""
    mix = {"interp": stop.interp, "sc": stop, "core": stop.make_core()}
    report = cli("core", mix["core"], "--native-all", "--json")
    check_native_frames_match_gdb(report["threads"], _gdb_frames(mix), [], False)


def header(sc, tid, lines):
    """The text's header line of thread `tid`."""
    mine = [l for l in lines if l.startswith(("Thread %d " % tid, "Thread %d:" % tid))]
    assert len(mine) == 1, (tid, lines)
    return mine[0]


def expected_header(sc, tid, live):
    """The header `--native-all` gives thread `tid`: its `threading` name, the system's in
    brackets only for `named-worker` (the others' is their own name, cut or not, or the
    process's, which they inherited); a thread without a `threading` name by its system name
    (a gcore core has none)."""
    r = role(sc, tid)
    names = comm(sc) if live else {}
    if r == "named-worker" and live:
        return 'Thread %d "named-worker" ["os-named"]:' % tid
    if r in ("c-named", "c-unnamed"):
        named = ' "%s"' % names[tid] if tid in names else ""
        return "Thread %d%s (no Python thread state):" % (tid, named)
    if r == "raw":
        return 'Thread %d "raw-py":' % tid if live else "Thread %d:" % tid
    return 'Thread %d "%s":' % (tid, r)


@pytest.mark.parametrize("where", ["live", "core"])
def test_text_headers(stop, where):
    target = ["pid", stop.pid] if where == "live" else ["core", stop.make_core()]
    lines = cli(*target, "--native-all").splitlines()
    for tid in tasks(stop):
        assert header(stop, tid, lines) == expected_header(stop, tid, where == "live")


def pystack_threads(cmd):
    """{tid: name or None} of pystack's `Traceback for thread TID (NAME) [...]` headers."""
    rc, out, err = harness.run(cmd, TIMEOUT)
    assert rc == 0, "pystack failed:\n%s\n%s" % (out, err)
    threads = {}
    for line in out.splitlines():
        m = re.match(r"Traceback for thread (\d+) (?:\((.*)\) )?\[", line)
        if m:
            assert int(m.group(1)) not in threads, out
            threads[int(m.group(1))] = m.group(2)
    assert threads, out
    return threads


@pytest.mark.parametrize("where", ["live", "core"])
def test_same_threads_and_names_as_pystack(stop, where):
    """`--native-all` lists pystack's `--native-all` threads, with the names it shows live (a
    core: pystack shows the names of the live process of the core's pid, while there is one;
    a gcore core records none)."""
    assert os.access(PYSTACK, os.X_OK), "pystack missing from the test venv (tools/test-env.sh)"
    if where == "live":
        theirs = pystack_threads([PYSTACK, "remote", stop.pid, "--native-all"])
        ours = cli("pid", stop.pid, "--native-all", "--json")
    else:
        core = stop.make_core()
        theirs = pystack_threads([PYSTACK, "core", core, stop.interp.exe, "--native-all"])
        ours = cli("core", core, "--native-all", "--json")
    names = {t["native_id"]: t["native_name"] for t in ours["threads"]}
    assert sorted(names) == sorted(theirs)
    if where == "live":
        assert names == theirs
    else:
        assert set(names.values()) == {None}, names


@pytest.mark.parametrize("where", ["live", "core"])
def test_why_gives_the_c_threads_system_call(stop, where):
    """`--native-all --why`: a C thread is blocked in `pause`, with nothing it waits on that
    Python shows; the verdict names none of them."""
    target = ["pid", stop.pid] if where == "live" else ["core", stop.make_core()]
    report = cli(*target, "--native-all", "--why", "--json")
    c_ids = set(native_only(stop))
    for t in report["threads"]:
        if t["native_id"] in c_ids:
            assert (t["state"], t["syscall"], t["waiting"], t["holding"]) == (
                "syscall", "pause", None, []), t
        else:
            assert t["syscall"] == "futex", t
    text = cli(*target, "--native-all", "--why")
    verdict = text.split("\n\n", 1)[0]
    assert not [tid for tid in c_ids if str(tid) in verdict], verdict
    for tid in c_ids:
        assert header(stop, tid, text.splitlines()).endswith(" [syscall: pause]:"), text


def gdb_names(out):
    line = next(l for l in out.splitlines() if l.startswith("NAMES "))
    return {int(k): v for k, v in json.loads(line[len("NAMES "):]).items()}


@pytest.mark.parametrize("where", ["live", "core"])
def test_gdb_names_threads_as_gdb_does(stop, where):
    """gdb's `py-bt -a --json` and `py-bt -a` name each Python thread as gdb does: live, gdb's
    names are /proc's; on a gcore core gdb names none, nor do we."""
    kw = {"pid": stop.pid} if where == "live" else {"core": stop.make_core()}
    out, _ = run_gdb(stop.interp, GDB_NAMES, "echo @@JSON@@\\n", "py-bt -a --json",
                     "echo @@TEXT@@\\n", "py-bt -a", **kw)
    theirs = gdb_names(out)
    assert sorted(theirs) == tasks(stop)
    if where == "live":
        assert theirs == comm(stop)
        names = theirs
    else:
        assert set(theirs.values()) == {None}, theirs
        names = {}
    js, text = out.split("@@JSON@@\n", 1)[1].split("@@TEXT@@\n")
    check_python_threads(stop, json_from(js)["threads"], names)
    lines = text.splitlines()
    for tid in python_threads(stop):
        # py-bt -a has no native frames; its headers are the CLI's.
        assert header(stop, tid, lines) == expected_header(stop, tid, where == "live")


def test_kernel_core_names_the_main_thread():
    """A core the kernel wrote (the scenario killed with SIGABRT, core_pattern `core`) records
    the main thread's name, the one the scenario gave it (`names-main`, not argv[0]'s
    `python3`): its `native_name`; every other thread's is null, `--native-all` lists them all,
    and the text heads the C threads with no name."""
    with open("/proc/sys/kernel/core_pattern", encoding="ascii") as f:
        assert f.read().strip() == "core", "the test needs the kernel's plain `core` pattern"
    interp = harness.pick(["pyenv-3.12"])[0]
    with harness.Scenario(interp, "thread_names") as sc:
        ids = tasks(sc)
        resource.prlimit(sc.pid, resource.RLIMIT_CORE,
                         (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        os.kill(sc.pid, signal.SIGABRT)
        rc = sc._proc.wait(TIMEOUT)
        sc._reaped = True
        assert rc == -signal.SIGABRT, rc
        cores = sorted(sc.tmpdir.glob("core*"))
        assert len(cores) == 1, cores
        core = str(cores[0])
        report = cli("core", core, "--native-all", "--json")
        assert report["crash"]["signal"] == "SIGABRT", report["crash"]
        assert sorted(t["native_id"] for t in report["threads"]) == ids
        names = {t["native_id"]: t["native_name"] for t in report["threads"]}
        assert names == {t: ("names-main" if t == sc.pid else None) for t in ids}
        c_ids = set(native_only(sc))
        check_python_threads(sc, [t for t in report["threads"] if t["native_id"] not in c_ids],
                             {sc.pid: "names-main"})
        for t in report["threads"]:
            if t["native_id"] in c_ids:
                check_native_only(sc, t, None)
        lines = cli("core", core, "--native-all").splitlines()
        assert header(sc, sc.pid, lines) == 'Thread %d "MainThread":' % sc.pid
        for tid in c_ids:
            assert header(sc, tid, lines) == "Thread %d (no Python thread state):" % tid


def test_group_and_tree_members_carry_the_names(stop):
    """`--group --native-all` and `--tree --native-all`: every member has the thread's
    `native_name`; the C threads, with no Python frame, are one group (and one leaf), named
    by their system names."""
    names = comm(stop)
    grouped = cli("pid", stop.pid, "--group", "--native-all", "--json")
    members = [m for g in grouped["groups"] for m in g["threads"]]
    assert sorted(m["native_id"] for m in members) == tasks(stop)
    for m in members:
        assert (m["name"], m["native_name"]) == (python_threads(stop).get(m["native_id"], {}).get("name"),
                                                 names[m["native_id"]]), m
    (c_group,) = [g for g in grouped["groups"] if not g["frames"]]
    assert sorted(m["native_id"] for m in c_group["threads"]) == sorted(native_only(stop))
    text = cli("pid", stop.pid, "--group", "--native-all")
    want = sorted(names[t] for t in native_only(stop))
    assert "× 2 threads (%s)" % ", ".join(want) in text, text
    tree = cli("pid", stop.pid, "--tree", "--native-all")
    (leaf,) = [l for l in tree.splitlines() if "(no Python frames)" in l]
    for tid in native_only(stop):
        assert 'thread %d "%s"' % (tid, names[tid]) in leaf, leaf

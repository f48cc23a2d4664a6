"""Subinterpreters (issue 40), on tests/scenarios/subinterpreters.py: a thread that entered a
subinterpreter from the main one, one that entered a second from a first (nested), a thread a
subinterpreter started, and a subinterpreter no thread runs in. Each thread is listed once, its
stack one stack: the frames of the interpreter it runs in now, then those of the ones it
entered that one from, each frame with its interpreter's id (`interpreter_id`); the report
lists every interpreter (`interpreters`: id, address, whence). The text marks each crossing
(`--- interpreter 1 (entered from interpreter 0) ---`) and names a thread's interpreter in its
header. Every value comes from the program: each interpreter recorded its own frames, ids and
whence, live and from a gcore core.

3.12 (`_xxsubinterpreters.run_string`) runs a subinterpreter's code in its first thread state,
bound to the main thread that made it (gh-109860): the stack is still the running thread's."""

import json
import os
import re
import resource
import signal

import pytest

import harness
from test_why_state import core_syscalls

INTERPS = harness.pick(["pyenv-3.12", "pyenv-3.12-stripped", "pyenv-3.13", "ft-3.13t",
                        "debian-3.14", "debian-3.15"])
TIMEOUT = 120


@pytest.fixture(scope="module", params=INTERPS, ids=lambda i: i.id)
def stop(request):
    with harness.Scenario(request.param, "subinterpreters") as sc:
        sc.make_core()
        yield sc


def cli(*args):
    return harness.cli_checked(*args, timeout=TIMEOUT)


def targets(sc):
    return [("pid", sc.pid), ("core", sc.make_core())]


def frames_of(frames):
    return [(f["function"], f["file"], f["line"], f["interpreter_id"]) for f in frames]


def check_report(report, truth):
    want = truth["interpreters"]
    got = report["interpreters"]
    assert [(i["id"], i["whence"]) for i in got] == [(i["id"], i["whence"]) for i in want]
    addresses = [i["address"] for i in got]
    assert all(addresses) and len(set(addresses)) == len(addresses), addresses
    address_of = {i["id"]: i["address"] for i in got}
    by_native = {}
    for t in report["threads"]:
        assert t["native_id"] not in by_native, "thread %s listed twice" % t["native_id"]
        by_native[t["native_id"]] = t
    assert sorted(by_native) == sorted(tt["native_id"] for tt in truth["threads"])
    for tt in truth["threads"]:
        t = by_native[tt["native_id"]]
        assert (t["name"], t["thread_id"]) == (tt["name"], tt["thread_id"])
        assert t["interpreter_id"] == tt["interpreter_id"], tt["name"]
        assert t["interpreter"] == address_of[tt["interpreter_id"]], tt["name"]
        assert frames_of(t["frames"]) == frames_of(tt["frames"]), tt["name"]
        assert t["truncated"] is False
    # The interpreter no thread runs in is in `interpreters` only.
    idle = truth["idle_interpreter"]
    assert all(f["interpreter_id"] != idle for t in report["threads"] for f in t["frames"])
    assert report["errors"] == []


def test_json_live_and_core(stop):
    for source, target in targets(stop):
        check_report(cli(source, target, "--json"), stop.truth)


def test_why_locks_per_interpreter(stop):
    """`--why` in a subinterpreter: a thread of A waits for A's RLock, which another thread of A
    holds in a `with` block (each interpreter's locks are its own), live and from the core."""
    lock = stop.truth["rlock"]
    child = harness.scenarios_dir() / "subinterp_child.py"
    with_line = 1 + child.read_text().splitlines().index("    with RLOCK:")
    for source, target in targets(stop):
        report = cli(source, target, "--why", "--json")
        check_report(report, stop.truth)
        threads = {t["native_id"]: t for t in report["threads"]}
        assert threads[lock["waiter"]]["waiting"] == {
            "kind": "rlock", "object": lock["object"], "type": "RLock", "owner": lock["holder"],
            "frame": 0}
        assert threads[lock["holder"]]["holding"] == [{
            "kind": "rlock", "object": lock["object"], "type": "RLock", "count": 1, "frame": 0,
            "line": with_line}]
        assert report["deadlocks"] == []


def test_locals_across_interpreters(stop):
    """`--locals`: the locals of a subinterpreter's frame and of the frame that entered it in
    the main interpreter, live and from the core."""
    out_dir = repr(str(stop.tmpdir / "subinterp-records"))
    tt = next(t for t in stop.truth["threads"] if t["name"] == "to-sub1")
    call = "park_with_worker(%s, 'to-sub1', 'sub1-worker', 'sub1-locker')" % out_dir
    want = {
        ("park_in_sub", tt["interpreter_id"]): [("out_dir", out_dir), ("label", "'to-sub1'")],
        ("enter", 0): [("target_id", str(tt["interpreter_id"])), ("call", repr(call)),
                       ("out_dir", out_dir), ("label", "'to-sub1'")],
    }
    for source, target in targets(stop):
        report = cli(source, target, "--locals", "--json")
        check_report(report, stop.truth)
        t = next(t for t in report["threads"] if t["native_id"] == tt["native_id"])
        got = {(f["function"], f["interpreter_id"]): [(v["name"], v["repr"]) for v in f["locals"]]
               for f in t["frames"] if (f["function"], f["interpreter_id"]) in want}
        assert got == want
        assert all(v["is_arg"] for f in t["frames"] if f["function"] in ("park_in_sub", "enter")
                   for v in f["locals"])


GREENLET_INTERPS = harness.pick(["pyenv-3.12", "pyenv-3.13", "debian-3.14", "debian-3.15"],
                                INTERPS)


@pytest.mark.parametrize("interp", GREENLET_INTERPS, ids=lambda i: i.id)
def test_greenlets_per_interpreter(interp):
    """tests/scenarios/subinterp_greenlet.py: greenlets of a (legacy) subinterpreter, found on
    its GC lists and placed on the thread that entered it: `--greenlets`, live and from the core;
    a suspended greenlet's frames carry the subinterpreter's id, the running one's its thread's."""
    with harness.Scenario(interp, "subinterp_greenlet") as sc:
        for source, target in targets(sc):
            report = cli(source, target, "--greenlets", "--json")
            check_report(report, sc.truth)
            shown = {g["address"]: g for g in report["greenlets"]}
            assert sorted(shown) == sorted(g["address"] for g in sc.truth["greenlets"])
            for want in sc.truth["greenlets"]:
                g = shown[want["address"]]
                fields = ("state", "main", "parent", "type", "thread")
                assert {k: g[k] for k in fields} == {k: want[k] for k in fields}, want
                assert frames_of(g["frames"]) == frames_of(want["frames"]), want


@pytest.mark.parametrize("interp", harness.pick(["debian-3.14", "debian-3.15"], INTERPS),
                         ids=lambda i: i.id)
def test_interpreter_pool_executor(interp):
    """tests/scenarios/subinterp_pool.py: the worker threads of an InterpreterPoolExecutor, each
    running a task in its own interpreter, entered by `_interpreters.call` from the pool's
    worker loop in the main interpreter: one stack each, live and from the core."""
    with harness.Scenario(interp, "subinterp_pool") as sc:
        for source, target in targets(sc):
            check_report(cli(source, target, "--json"), sc.truth)


def group_frames(grouped):
    return sorted([(f["function"], f["file"], f["line"], f["interpreter_id"]) for f in g["frames"]]
                  for g in grouped["groups"])


def test_group_and_merge(stop, tmp_path):
    """`--group`: the interpreter of each frame is part of the key (each thread here is a group
    of its own); `merge` of saved reports, the live one and the core's, keys the same way."""
    want = sorted(frames_of(tt["frames"]) for tt in stop.truth["threads"])
    for source, target in targets(stop):
        assert group_frames(cli(source, target, "--group", "--json")) == want
    saved = tmp_path / "reports.json"
    saved.write_text("".join(json.dumps(cli(source, target, "--json")) + "\n"
                             for source, target in targets(stop)))
    merged = cli("merge", saved, "--json")
    assert group_frames(merged) == want
    assert all(g["count"] == 2 for g in merged["groups"]), merged["groups"]


def tree_paths(nodes, above=()):
    """Each thread's path through a `--tree` (outermost frame first), once per thread."""
    out = []
    for n in nodes:
        path = above + ((n["function"], n["file"], n["line"], n.get("interpreter_id")),)
        out += [path] * len(n.get("threads", []))
        out += tree_paths(n["children"], path)
    return out


def test_tree(stop):
    """`--tree`: a frame's interpreter is part of its node's key, each node carries its
    `interpreter_id`, and the text names a subinterpreter's frames as the debuggers' backtraces
    do (` [interpreter 1]`), live and from the core."""
    want = sorted(tuple(reversed(frames_of(tt["frames"]))) for tt in stop.truth["threads"])
    sub = {(f["function"], f["file"], f["line"], f["interpreter_id"])
           for tt in stop.truth["threads"] for f in tt["frames"] if f["interpreter_id"]}
    assert sub, "the scenario runs no frame in a subinterpreter"
    for source, target in targets(stop):
        assert sorted(tree_paths(cli(source, target, "--tree", "--json")["tree"])) == want
        text = cli(source, target, "--tree")
        for function, file, line, interp in sub:
            assert "%s (%s:%d) [interpreter %d]" % (function, file, line, interp) in text, text
        assert "[interpreter 0]" not in text, text


def check_async(report, truth):
    """The threads as check_report checks them, then every task and loop of each interpreter:
    each task's frames carry the id of the interpreter whose asyncio runs it; a loop's, the ids
    of its thread's interpreters, from the loop outwards."""
    check_report(report, truth)
    tasks = {t["id"]: t for t in report["tasks"]}
    assert sorted(tasks) == sorted(t["id"] for t in truth["tasks"])
    for want in truth["tasks"]:
        t = tasks[want["id"]]
        assert (t["name"], t["native_id"], t["on_cpu"], t["loop"], t["supported"]) == \
            (want["name"], want["native_id"], want["on_cpu"], want["loop"], True), want["name"]
        assert frames_of(t["frames"]) == frames_of(want["frames"]), want["name"]
        assert sorted(t["awaited_by"]) == sorted(want["awaited_by"]), want["name"]
    loops = {lp["id"]: lp for lp in report["loops"]}
    assert sorted(loops) == sorted(lp["id"] for lp in truth["loops"])
    for want in truth["loops"]:
        got = loops[want["id"]]
        assert (got["native_id"], got["running"]) == (want["native_id"], True)
        assert frames_of(got["frames"]) == frames_of(want["frames"])


ASYNC_INTERPS = harness.pick(["pyenv-3.12", "pyenv-3.13", "ft-3.13t", "debian-3.14",
                              "debian-3.15"], INTERPS)


@pytest.mark.parametrize("interp", ASYNC_INTERPS, ids=lambda i: i.id)
def test_asyncio_per_interpreter(interp):
    """tests/scenarios/subinterp_async.py: an event loop in a subinterpreter and one in the main
    interpreter, each with its tasks (each interpreter's `_asyncio` has its own Task type):
    `--async` and `--tasks`, live and from the core; gdb's `py-tasks --json` from the core."""
    from test_stacks import json_from, run_gdb

    with harness.Scenario(interp, "subinterp_async") as sc:
        for source, target in targets(sc):
            for flag in ("--async", "--tasks"):
                check_async(cli(source, target, flag, "--json"), sc.truth)
        out, _ = run_gdb(interp, "py-tasks --json", core=sc.make_core())
        check_async(json_from(out), sc.truth)


GIL_INTERPS = harness.pick(["pyenv-3.12", "pyenv-3.13", "debian-3.14-dbgsym",
                            "debian-3.15-dbgsym"])


def gil_of(interp, core, address):
    """gdb's reading, from the interpreter's debug info, of the interpreter at `address`: its
    id and its GIL (`ceval.gil`, a pointer to its `struct _gil_runtime_state`)."""
    from test_stacks import run_gdb

    state = "((PyInterpreterState *) %d)" % address
    out, _ = run_gdb(interp, "printf \"ID=%%d GIL=%%lu\\n\", (int) %s->id, "
                             "(unsigned long) %s->ceval.gil" % (state, state), core=core)
    m = re.search(r"^ID=(\d+) GIL=(\d+)$", out, re.M)
    assert m, out
    return int(m.group(1)), int(m.group(2))


@pytest.mark.parametrize("interp", GIL_INTERPS, ids=lambda i: i.id)
def test_why_gil_per_interpreter(interp):
    """tests/scenarios/subinterp_gil.py: a subinterpreter's own GIL, held for good by a thread
    running in it; a thread of that interpreter and (3.13+) a thread entering it from the main
    interpreter wait for it: `--why` says `gil_wait`, the GIL is that interpreter's (gdb reads it
    from the debug info) and its owner the holder; the main interpreter's GIL is nobody's. From
    cores, where the waiters sit in futex (a waiter wakes every 5 ms to ask for the GIL: a core
    that caught one awake is made again)."""
    with harness.Scenario(interp, "subinterp_gil") as sc:
        gil = sc.truth["gil"]
        # The core is chosen by the kernel's record (each thread's NT_PRSTATUS), not by what
        # the tool reads of it.
        for attempt in range(5):
            core = sc.make_core_named("gil%d" % attempt)
            kernel = core_syscalls(core)
            if all(kernel[w] == "futex" for w in gil["waiting"]):
                break
        else:
            pytest.fail("no core caught every waiter in futex: %r" % kernel)
        report = cli("core", core, "--why", "--json")
        threads = {t["native_id"]: t for t in report["threads"]}
        assert {n: t["syscall"] for n, t in threads.items()} == kernel
        check_report(report, sc.truth)
        address = {i["id"]: i["address"] for i in report["interpreters"]}
        sub_id, sub_gil = gil_of(interp, core, address[gil["interpreter"]])
        _, main_gil = gil_of(interp, core, address[0])
        assert sub_id == gil["interpreter"] and sub_gil not in (0, main_gil)
        holder = threads[gil["holder"]]
        assert (holder["holds_gil"], holder["state"], holder["waiting"]) == (True, "running", None)
        for tid in gil["waiting"]:
            t = threads[tid]
            assert (t["holds_gil"], t["state"]) == (False, "gil_wait"), t
            assert t["waiting"] == {"kind": "gil", "object": sub_gil, "type": None,
                                    "owner": gil["holder"], "frame": 0}, t
        main = threads[sc.truth["threads"][0]["native_id"]]
        assert (main["holds_gil"], main["state"], main["waiting"]["kind"]) == \
            (False, "syscall", "lock")


def expected_text(truth, tt):
    """A thread's header and traceback lines as the text shows them (source lines left out):
    `File` lines, and a crossing line before the first frame of each interpreter entered
    from."""
    header = 'Thread %d "%s"' % (tt["native_id"], tt["name"])
    if tt["interpreter_id"]:
        header += " (interpreter %d)" % tt["interpreter_id"]
    lines = [header + ":", "Traceback (most recent call first):"]
    last = None
    for f in tt["frames"]:
        if last is not None and f["interpreter_id"] != last:
            lines.append("  --- interpreter %d (entered from interpreter %d) ---"
                         % (last, f["interpreter_id"]))
        last = f["interpreter_id"]
        lines.append('  File "%s", line %d, in %s' % (f["file"], f["line"], f["function"]))
    return lines


def test_native_frames_carry_their_interpreter(stop):
    """`--native --json`: every frame of a thread carries an `interpreter_id`; a native frame
    has the one of the Python frame it belongs with (the next older, which calls it; past the
    oldest, the oldest's), so the C code that crossed into a subinterpreter is its caller's."""
    for source, target in targets(stop):
        report = cli(source, target, "--native", "--json")
        threads = {t["native_id"]: t for t in report["threads"]}
        for tt in stop.truth["threads"]:
            frames = threads[tt["native_id"]]["frames"]
            python = [f for f in frames if f["kind"] == "python"]
            assert frames_of(python) == frames_of(tt["frames"]), tt["name"]
            owners = [f["interpreter_id"] for f in tt["frames"]]
            k = 0
            for f in frames:
                assert f.get("interpreter_id") == owners[min(k, len(owners) - 1)], (tt, f)
                k += f["kind"] == "python"
            assert any(f["kind"] == "native" for f in frames), frames


SHOWN = re.compile(r'^(Thread |Traceback|  File |  --- interpreter )')


@pytest.mark.parametrize("interp", harness.pick(["pyenv-3.12", "debian-3.14"], INTERPS),
                         ids=lambda i: i.id)
def test_kernel_core(interp):
    """A core the kernel wrote (the scenario killed with SIGABRT, core_pattern `core`): the same
    threads, stacks and interpreters as live, the main thread's crash first."""
    with open("/proc/sys/kernel/core_pattern", encoding="ascii") as f:
        assert f.read().strip() == "core", "the test needs the kernel's plain `core` pattern"
    with harness.Scenario(interp, "subinterpreters") as sc:
        resource.prlimit(sc.pid, resource.RLIMIT_CORE,
                         (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        os.kill(sc.pid, signal.SIGABRT)
        rc = sc._proc.wait(TIMEOUT)
        sc._reaped = True
        assert rc == -signal.SIGABRT, rc
        cores = sorted(sc.tmpdir.glob("core*"))
        assert len(cores) == 1, cores
        report = cli("core", cores[0], "--json")
        assert (report["crash"]["signal"], report["crash"]["thread"]) == ("SIGABRT", sc.pid)
        check_report(report, sc.truth)
        assert report["threads"][0]["native_id"] == sc.pid


def test_text_live_and_core(stop):
    """The text, and with `--native` too (native frames in between, each crossing above the C
    code of the call that crossed: the line before a crossing is a Python frame's)."""
    for source, target in targets(stop):
        for flags in ([], ["--native"]):
            out = cli(source, target, *flags)
            blocks = {}
            for block in out.split("\n\n"):
                lines = [line for line in block.splitlines() if SHOWN.match(line)]
                if lines and lines[0].startswith("Thread "):
                    blocks[int(lines[0].split()[1])] = lines
            for tt in stop.truth["threads"]:
                assert blocks.get(tt["native_id"]) == expected_text(stop.truth, tt), out
            assert not re.search(r"\n  \(C\)[^\n]*\n  --- interpreter", out), out


# --- gdb and lldb ---------------------------------------------------------------------------

DEBUGGER_INTERPS = harness.pick(["pyenv-3.12", "pyenv-3.13", "ft-3.13t", "debian-3.14", "debian-3.15"],
                                INTERPS)
# A Python frame of gdb's `bt` (`#8  park_in_sub [interpreter 1] () at …/subinterp_child.py:87`,
# later frames of one eval loop without a number).
GDB_PY = re.compile(r"^(?:#\d+\s+(?!0x)|(?![#\s]))(\S.*?) \(\) at (.+):(\d+)$")
# gdb's `thread apply all` header: `Thread 3 (LWP 22455):`, live `Thread 3 (Thread 0x… (LWP
# 22455) "python3"):`.
GDB_THREAD = re.compile(r"^Thread \d+ \(.*\(?LWP (\d+)\).*:$")


def labelled(tt):
    """The thread's Python frames as a debugger's backtrace names them: a subinterpreter's with
    ` [interpreter N]`."""
    return [(f["function"] + (" [interpreter %d]" % f["interpreter_id"] if f["interpreter_id"]
                              else ""), f["line"]) for f in tt["frames"]]


def by_gdb_thread(out):
    """{lwp: text} of a `thread apply all` output."""
    blocks, lwp = {}, None
    for line in out.splitlines():
        m = GDB_THREAD.match(line)
        if m:
            lwp = int(m.group(1))
            blocks[lwp] = []
        elif lwp is not None:
            blocks[lwp].append(line)
    return {k: "\n".join(v) for k, v in blocks.items()}


def traceback_lines(text):
    return [line for line in text.splitlines()
            if line.startswith(("Traceback", "  File ", "  --- interpreter "))]


def check_py_bt(text, tt):
    """`py-bt` of one thread: its frames and crossings, each crossing above the C function
    (`<built-in method exec …>`) that the interpreter it was entered from calls."""
    assert traceback_lines(text) == expected_text(None, tt)[1:], text
    assert not re.search(r"<built-in [^\n]*\n\s*--- interpreter", text), text


@pytest.mark.parametrize("interp", DEBUGGER_INTERPS, ids=lambda i: i.id)
def test_gdb(interp):
    """gdb, from a core and (3.12, where the thread is found by the stack its code runs on)
    live: `py-bt -a` as the CLI's text, `py-bt` of each thread, and `bt`'s Python frames named
    with their interpreter, by the frame filter and as real frames."""
    from test_stacks import run_gdb

    with harness.Scenario(interp, "subinterpreters") as sc:
        sources = [{"core": sc.make_core()}] + ([{"pid": sc.pid}] if interp.minor == 12 else [])
        for source in sources:
            out, err = run_gdb(interp, "echo @@ALL@@\\n", "py-bt -a", "echo @@BT@@\\n",
                               "thread apply all py-bt", "echo @@NATIVE@@\\n",
                               "thread apply all bt", "set pyunwind-frames real",
                               "echo @@REAL@@\\n", "thread apply all bt", **source)
            harness.assert_no_panic(out + err)
            all_text = out[out.index("@@ALL@@"):out.index("@@BT@@")]
            each = by_gdb_thread(out[out.index("@@BT@@"):out.index("@@NATIVE@@")])
            native = by_gdb_thread(out[out.index("@@NATIVE@@"):out.index("@@REAL@@")])
            real = by_gdb_thread(out[out.index("@@REAL@@"):])
            blocks = {}
            for block in all_text.split("\n\n"):
                lines = [line for line in block.splitlines() if SHOWN.match(line)]
                if lines and lines[0].startswith("Thread "):
                    blocks[int(lines[0].split()[1])] = lines
            for tt in sc.truth["threads"]:
                tid = tt["native_id"]
                assert blocks.get(tid) == expected_text(sc.truth, tt), (source, all_text)
                check_py_bt(each[tid], tt)
                # gdb's frames as the filter decorates them, then as real frames (each
                # Python frame a gdb frame of its own: `set pyunwind-frames real`).
                for bt in (native[tid], real[tid]):
                    shown = [(m.group(1), int(m.group(3)))
                             for m in map(GDB_PY.match, bt.splitlines())
                             if m and not m.group(2).endswith((".c", ".h"))]
                    assert shown == labelled(tt), (source, bt)

"""Exact stacks from real processes and their gcore cores: the CLI's JSON, gdb's `py-bt`
(JSON and text), gdb's `bt` with the frame filter, and the py-* commands, against the truth
each scenario program records about itself."""

import json
import re

import pytest

import harness

STACK_SCENARIOS = ["recursion", "shapes", "unicode_names", "threads", "multiline", "locals"]
INTERPS = harness.interpreters() + harness.provisioned_interpreters()
GDB_TIMEOUT = 120
# Stripped builds whose dynamic symbols lack `_PyEval_EvalFrameDefault` (gdb shows `??`): the
# filter places Python frames by the entry frames on the eval loop's stack instead.
NO_EVAL_SYMBOL = ("debian-3.14", "debian-3.15")


def gdb_cmd(interp, *commands, core=None, pid=None, extra_iex=()):
    cmd = [*harness.gdb_argv(), "-q", "-batch", "-nx",
           "-iex", "set auto-load off",
           # Debian's python3.11-dbg may be installed on this machine (make bench): hide it, as a
           # user without the -dbg package has none.
           "-iex", "set debug-file-directory %s" % (interp.debug_dir or "/nonexistent"),
           "-iex", "set debuginfod enabled off"]
    for i in extra_iex:
        cmd += ["-iex", i]
    cmd += ["-x", str(harness.repo_root() / "gdb-scripts" / "pyunwind-gdb.py")]
    for c in commands:
        cmd += ["-ex", c]
    if core:
        cmd += [interp.exe, core]
    else:
        cmd += ["-p", str(pid)]
    return cmd


def run_gdb(interp, *commands, core=None, pid=None, env=None):
    rc, out, err = harness.run(gdb_cmd(interp, *commands, core=core, pid=pid), GDB_TIMEOUT,
                               env=env or harness.child_env(interp.env))
    assert rc == 0, "gdb failed (%d):\n%s\n%s" % (rc, out, err)
    assert "Traceback (most recent call last)" not in err + out, "a Python error in our gdb script:\n" + err + out
    return out, err


# The scenario each test without a `name` parameter reads.
SCENARIO_OF = {"test_cli_locals": "locals", "test_gdb_locals_print_list_up_down": "locals",
               "test_gdb_mi_stack_list_frames": "shapes", "test_gdb_coexists_with_libpython": "shapes",
               "test_gdb_hide_internal_parameter_and_debugger_memory": "shapes"}


def scenario_key(item):
    """conftest runs this file's tests in this order: those of one interpreter and scenario one
    after another, so that they share its process and core (`stopped`)."""
    params = item.callspec.params if hasattr(item, "callspec") else {}
    interp = params.get("interp")
    return (interp.id if interp else "", params.get("name") or SCENARIO_OF.get(item.originalname, ""))


@pytest.fixture(scope="module")
def stopped():
    """``stopped(interp, name)``: the scenario stopped at its truth, started once for the tests
    that read it in a row (the tests only read it: gdb attaches and detaches), and closed when a
    test asks for another. Starting a process and making its core for every test was about a
    third of this file's time."""
    held = {}

    def get(interp, name):
        key = (interp.id, name)
        if key not in held:
            for s in held.values():
                s.close()
            held.clear()
            held[key] = harness.Scenario(interp, name)
        return held[key]

    yield get
    for s in held.values():
        s.close()


def expected(frames):
    return [(f["function"], f["file"], f["line"]) for f in frames]


def got(frames):
    return [(f.get("function"), f.get("file"), f.get("line")) for f in frames]


def check_report(report, truth, live_cli=False):
    assert report["python"]["version"] == truth["python"]
    assert report["python"]["free_threaded"] is truth["free_threaded"]
    assert "gil_holder" in truth, (
        "the truth of a running scenario has no GIL holder: check_report compares stops only")
    holder = truth["gil_holder"]
    assert holder is None or holder in [tt["thread_id"] for tt in truth["threads"]], holder
    by_id = {t["thread_id"]: t for t in report["threads"]}
    # Exactly the program's threads: an extra (misread or stale) thread is as wrong as a
    # missing one.
    assert sorted(by_id) == sorted(tt["thread_id"] for tt in truth["threads"]), (
        "threads %r, want %r" % (sorted(by_id), sorted(tt["thread_id"] for tt in truth["threads"])))
    for tt in truth["threads"]:
        t = by_id.get(tt["thread_id"])
        assert t is not None, "thread %s (%s) missing from %r" % (tt["thread_id"], tt["name"], list(by_id))
        assert t["name"] == tt["name"]
        # Every version names its threads, 3.10 too (glibc's pthread struct has the LWP).
        assert t["native_id"] == tt["native_id"], tt["name"]
        # The thread the GIL names (`locked`, `last_holder`) holds it: at a stop nobody, as
        # every thread waits in a call that released it. A free-threaded build's is null
        # (docs/report.md), even where PYTHON_GIL=1 turns a GIL on.
        want_gil = None if truth["free_threaded"] else tt["thread_id"] == holder
        assert t["holds_gil"] is want_gil, "thread %s: holds_gil %r, want %r" % (
            tt["name"], t["holds_gil"], want_gil)
        assert got(t["frames"]) == expected(tt["frames"]), "thread %s" % tt["name"]
        assert all(f["kind"] == "python" for f in t["frames"])
        assert t["truncated"] is False, "thread %s" % tt["name"]
    assert report["errors"] == []


def json_from(out):
    start = out.index("{")
    return harness.check_report_schema(json.loads(out[start:out.rindex("}") + 1]))


FILE_LINE = re.compile(r'^  File "(.*)", line (\d+), in (.*)$')


def traceback_frames(text):
    return [(m.group(3), m.group(1), int(m.group(2))) for m in map(FILE_LINE.match, text.splitlines()) if m]


@pytest.mark.parametrize("name", STACK_SCENARIOS)
@pytest.mark.parametrize("interp", INTERPS, ids=lambda i: i.id)
def test_cli_core_and_live(interp, name, stopped):
    sc = stopped(interp, name)
    rc, out, err = harness.run([str(harness.cli_path()), "pid", str(sc.pid), "--json"], 60)
    assert rc == 0, err
    check_report(json.loads(out), sc.truth, live_cli=True)
    core = sc.make_core()
    rc, out, err = harness.run([str(harness.cli_path()), "core", core, "--json"], 60)
    assert rc == 0, err
    check_report(json.loads(out), sc.truth)
    # --exe with the right executable is accepted; text output has every frame.
    rc, out, err = harness.run([str(harness.cli_path()), "core", core, "--exe", sc.exe], 60)
    assert rc == 0, err
    assert len(traceback_frames(out)) == sum(len(t["frames"]) for t in sc.truth["threads"])


# The types whose repr the decoder makes as Python does (`try_repr` in src/cpython/objects.rs),
# within its bounds: 16 items, 3 levels, 256 characters (then `...`), ints of 1000 digits,
# bytes of 4096. The locals scenario keeps its values within them, so a cut shows here as a
# difference. Any other object is `<TP_NAME object at 0xADDR>` (Python's own repr would run
# code in the target), the truth's `local_objects` giving its type's tp_name and its id.
PYTHON_REPR_TYPES = {"NoneType", "bool", "int", "float", "str", "bytes", "tuple", "list", "dict",
                     "set", "frozenset"}


def expected_locals(frame):
    """(name, repr, is_arg) of every local of a truth frame recorded with its locals, in the
    frame's order (that of f_locals: arguments first)."""
    out = []
    for name, want in frame["locals"].items():
        obj = frame["local_objects"][name]
        if obj["type"] not in PYTHON_REPR_TYPES:
            want = "<%s object at %#x>" % (obj["type"], obj["id"])
        out.append((name, want, name in frame["args"]))
    return out


@pytest.mark.parametrize("interp", INTERPS, ids=lambda i: i.id)
def test_cli_locals(interp, stopped):
    """`--locals --json`, live and from the core: the stopped frame's locals, each value as the
    program itself recorded it."""
    sc = stopped(interp, "locals")
    main = sc.truth["threads"][0]
    for source in ("pid", "core"):
        target = str(sc.pid) if source == "pid" else sc.make_core()
        rc, out, err = harness.run(
            [str(harness.cli_path()), source, target, "--locals", "--json"], 60)
        assert rc == 0, err
        report = json.loads(out)
        check_report(report, sc.truth)
        frames = next(t["frames"] for t in report["threads"]
                      if t["thread_id"] == main["thread_id"])
        shown = [(lc["name"], lc["repr"], lc["is_arg"]) for lc in frames[0]["locals"]]
        assert shown == expected_locals(main["frames"][0]), source


@pytest.mark.parametrize("name", STACK_SCENARIOS)
@pytest.mark.parametrize("interp", INTERPS, ids=lambda i: i.id)
@pytest.mark.parametrize("source", ["live", "core"])
def test_gdb_py_bt(interp, name, source, stopped):
    sc = stopped(interp, name)
    where = {"core": sc.make_core()} if source == "core" else {"pid": sc.pid}
    out, err = run_gdb(interp, "py-bt -a --json", "echo @@TEXT@@\\n", "py-bt", **where)
    json_part, text_part = out.split("@@TEXT@@")
    check_report(json_from(json_part), sc.truth)
    # Plain py-bt shows the selected thread (the main thread) in libpython's format.
    main = sc.truth["threads"][0]
    assert "Traceback (most recent call first):" in text_part
    assert traceback_frames(text_part) == expected(main["frames"])


BT_PY = re.compile(r"^(?:#\d+\s+)?(?!0x)(\S.*?) \(\) at (.+\.py):(\d+)$")


@pytest.mark.parametrize("name", ["recursion", "shapes", "threads"])
@pytest.mark.parametrize("interp", INTERPS, ids=lambda i: i.id)
@pytest.mark.parametrize("source", ["live", "core"])
def test_gdb_bt_filter(interp, name, source, stopped):
    sc = stopped(interp, name)
    where = {"core": sc.make_core()} if source == "core" else {"pid": sc.pid}
    # The raw `bt` is only looked at for the eval loop of the innermost Python call, within
    # its first frames; a one-thread program's `thread apply all bt` is its `bt` again. Both
    # whole, the 1,000-level recursion's three backtraces took 12 to 25 s per case.
    one_thread = len(sc.truth["threads"]) == 1
    out, _ = run_gdb(interp, "bt", "echo @@RAW@@\\n", "bt -no-filters 60", "echo @@ALL@@\\n",
                     *([] if one_thread else ["thread apply all bt"]), **where)
    filtered, rest = out.split("@@RAW@@")
    raw, every = rest.split("@@ALL@@")
    every = filtered if one_thread else every
    pyframes = [(m.group(1), m.group(2), int(m.group(3))) for m in map(BT_PY.match, filtered.splitlines()) if m]
    assert pyframes == expected(sc.truth["threads"][0]["frames"])
    assert "_PyEval_EvalFrameDefault" not in filtered
    if interp.id not in NO_EVAL_SYMBOL:
        assert "_PyEval_EvalFrameDefault" in raw
    assert "main" in filtered.splitlines()[-1] or "_start" in filtered.splitlines()[-1]
    # thread apply all bt: every thread's Python frames appear.
    every_py = [(m.group(1), m.group(2), int(m.group(3))) for m in map(BT_PY.match, every.splitlines()) if m]
    want = [f for t in sc.truth["threads"] for f in expected(t["frames"])]
    assert sorted(every_py) == sorted(want)


@pytest.mark.parametrize("interp", INTERPS, ids=lambda i: i.id)
def test_gdb_locals_print_list_up_down(interp, stopped):
    sc = stopped(interp, "locals")
    core = sc.make_core()
    out, _ = run_gdb(interp, "py-locals", "echo @@PRINT@@\\n", "py-print big", "py-print ucs4_text",
                     "py-print Thing", "py-print len", "py-print nosuchname", "echo @@LIST@@\\n", "py-list",
                     "echo @@UP@@\\n", "py-up", "py-list", "echo @@DOWN@@\\n", "py-down",
                     "echo @@FULL@@\\n", "py-bt-full", core=core)
    locals_part, rest = out.split("@@PRINT@@")
    print_part, rest = rest.split("@@LIST@@")
    list_part, rest = rest.split("@@UP@@")
    up_part, rest = rest.split("@@DOWN@@")
    down_part, full_part = rest.split("@@FULL@@")
    truth_frame = sc.truth["threads"][0]["frames"][0]
    shown = dict(line.split(" = ", 1) for line in locals_part.strip().splitlines() if " = " in line)
    assert shown == {name: want for name, want, _ in expected_locals(truth_frame)}
    assert "local 'big' = 1267650600228229401496703205376" in print_part
    assert "local 'ucs4_text' = '𝄞x'" in print_part
    assert "global 'Thing' = <type object at" in print_part
    assert re.search(r"builtin 'len' = <built-in method len of module object at remote 0x[0-9a-f]+>", print_part)
    assert "'nosuchname' not found" in print_part
    line = truth_frame["line"]
    assert (">%d" % line) in list_part
    caller = sc.truth["threads"][0]["frames"][1]
    # py-up / py-down number frames by gdb's frame level, as libpython does.
    assert re.search(r"#\d+ Frame 0x", up_part) and ("line %d, in %s" % (caller["line"], caller["function"])) in up_part
    assert (">%d" % caller["line"]) in up_part
    assert re.search(r"#\d+ Frame 0x", down_part) and ("in %s" % truth_frame["function"]) in down_part
    # py-bt-full numbers each Python frame as py-up does: by gdb's level.
    up_level = int(re.search(r"#(\d+) Frame 0x", up_part).group(1))
    assert re.search(r"^#%d Frame 0x[0-9a-f]+, for file \S+, line %d, in %s " % (
        up_level, caller["line"], re.escape(caller["function"])), full_part, re.M), (up_part, full_part)
    assert "big=1267650600228229401496703205376" in full_part


@pytest.mark.parametrize("interp", harness.pick(("pyenv-3.12", "debian-3.11"), INTERPS), ids=lambda i: i.id)
def test_gdb_mi_stack_list_frames(interp, stopped):
    sc = stopped(interp, "shapes")
    core = sc.make_core()
    cmd = gdb_cmd(interp, core=core)
    cmd = [c for c in cmd if c != "-batch"]
    cmd[1:1] = ["--interpreter=mi"]
    rc, out, err = harness.run(cmd, GDB_TIMEOUT, input="-enable-frame-filters\n-stack-list-frames\n-gdb-exit\n")
    assert rc == 0, err
    frames = re.findall(r'frame=\{(?:level="\d+",)?(?:addr="[^"]*",)?func="([^"]*)",file="([^"]*)",(?:fullname="[^"]*",)?line="(\d+)"', out)
    py = [(f, p, int(l)) for f, p, l in frames if p.endswith(".py")]
    assert py == expected(sc.truth["threads"][0]["frames"]), out[-3000:]


@pytest.mark.parametrize("interp", harness.pick(["pyenv-3.12"], INTERPS), ids=lambda i: i.id)
def test_gdb_hide_internal_parameter_and_debugger_memory(interp, stopped):
    sc = stopped(interp, "shapes")
    out, _ = run_gdb(interp, "bt", "echo @@OFF@@\\n", "set pyunwind-hide-internal off", "bt",
                     "echo @@DBG@@\\n", "set pyunwind-memory debugger", "py-bt -a --json", pid=sc.pid)
    hidden, rest = out.split("@@OFF@@")
    shown, dbg = rest.split("@@DBG@@")
    levels = lambda text: set(re.findall(r"^#(\d+) ", text, re.M))
    # Hidden plumbing frames leave gaps in the numbering; with hiding off they are shown.
    assert levels(hidden) < levels(shown)
    assert len(levels(shown)) == max(map(int, levels(shown))) + 1
    check_report(json_from(dbg), sc.truth)
    assert json_from(dbg)["python"]["source"] == "debugger"


def test_gdb_coexists_with_libpython(stopped):
    """CPython's own python3.X-gdb.py, auto-loaded with the executable, before or after ours:
    our py-* commands answer either way (libpython's py-bt has no --json)."""
    interp = harness.pick(["pyenv-3.12"], INTERPS)[0]
    ours = str(harness.repo_root() / "gdb-scripts" / "pyunwind-gdb.py")
    sc = stopped(interp, "shapes")
    core = sc.make_core()
    for how, ours_arg in (("-iex", "source " + ours), ("-x", ours)):
        # Commands typed at the prompt, as a user with `source` in ~/.gdbinit (-iex) does.
        cmd = [*harness.gdb_argv(), "-q", "-nx", "-iex", "set auto-load safe-path /", how, ours_arg, interp.exe, core]
        rc, out, err = harness.run(cmd, GDB_TIMEOUT, input="py-bt --json\n")
        assert rc == 0, err
        assert "python3.12-gdb.py" not in err, err
        check_report(json_from(out), {**sc.truth, "threads": sc.truth["threads"][:1]})

"""lldb: the py-* commands, live (`lldb -p`) and on gcore cores (`lldb EXE -c CORE`), and on lldb
22+ the frame provider's Python frames in lldb's own `bt`, against the truth each scenario
records about itself. The lldb to drive is $PYUNWIND_LLDB (`make integration-lldb` runs this
file once per lldb version); a missing lldb fails the run."""

import os
import re
import shutil

import pytest

import harness
from test_stacks import (NO_EVAL_SYMBOL, STACK_SCENARIOS, check_report, expected, json_from,
                         traceback_frames)

INTERPS = harness.interpreters()
LLDB_TIMEOUT = 120
SCRIPT = harness.repo_root() / "lldb-scripts" / "pyunwind_lldb.py"


def lldb_path():
    path = os.environ.get("PYUNWIND_LLDB") or shutil.which("lldb")
    if not path or not os.access(path, os.X_OK):
        pytest.fail("no lldb: set PYUNWIND_LLDB (make integration-lldb installs it)", pytrace=False)
    return path


def lldb_major():
    rc, out, err = harness.run([lldb_path(), "--version"], 30)
    m = re.search(r"lldb version (\d+)\.", out)
    assert rc == 0 and m, out + err
    return int(m.group(1))


def mark(name):
    # The echo of this command line does not contain the marker it prints.
    return "script print('@@' + '%s@@')" % name


def failing(command):
    """Run `command` so that its failure does not end lldb's batch run, and print its error."""
    return ("script r = lldb.SBCommandReturnObject(); "
            "lldb.debugger.GetCommandInterpreter().HandleCommand(%r, r); print(r.GetError())" % command)


def run_lldb(interp, *commands, core=None, pid=None):
    cmd = [lldb_path(), "-b", "--no-lldbinit",
           # Debian's python3.11-dbg may be installed here (make bench): hide it, as a user
           # without the -dbg package has none.
           "-O", "settings set symbols.enable-external-lookup false"]
    cmd += [interp.exe, "-c", core] if core else ["-p", str(pid)]
    # lldb's event-handler thread prints the stop (and asks for frames) while batch commands
    # run; let it finish so that every thread's frame provider runs on the main thread.
    cmd += ["-o", "command script import %s" % SCRIPT, "-o", "script import time; time.sleep(0.3)",
            # The main thread (its id is the pid), which the truth lists first. On attach lldb
            # selects the first thread its server saw stop, which a loaded machine may make
            # another one (CI once showed `py-bt` of a worker thread of `threads`).
            "-o", "script lldb.process.SetSelectedThreadByID(lldb.process.GetProcessID())"]
    for c in commands:
        cmd += ["-o", c]
    rc, out, err = harness.run(cmd, LLDB_TIMEOUT, env=harness.child_env(interp.env))
    assert rc == 0, "lldb failed (%d):\n%s\n%s" % (rc, out, err)
    assert "Traceback (most recent call last)" not in out + err, "a Python error in our lldb script:\n" + out + err
    return out


def split(out, names):
    """{marker: text printed after it up to the next marker}."""
    result = {}
    pattern = re.compile(r"^@@(\w+)@@$", re.M)
    found = list(pattern.finditer(out))
    for i, m in enumerate(found):
        end = found[i + 1].start() if i + 1 < len(found) else len(out)
        result[m.group(1)] = out[m.end():end]
    missing = [n for n in names if n not in result]
    assert not missing, "markers %r missing from:\n%s" % (missing, out)
    return result


# `frame #8: leaf at shapes.py:19 [synthetic]`; frames read from the thread state only add
# " [from thread state]" to the name.
BT_PY = re.compile(r"^\s*\*?\s*frame #\d+: (.+?) at (\S+):(\d+) \[synthetic\]$")


def bt_python(text):
    return [(m.group(1), m.group(2), int(m.group(3))) for m in map(BT_PY.match, text.splitlines()) if m]


def basenames(frames):
    return [(f, os.path.basename(p), l) for f, p, l in frames]


@pytest.mark.parametrize("name", STACK_SCENARIOS)
@pytest.mark.parametrize("interp", INTERPS, ids=lambda i: i.id)
def test_lldb_py_bt_and_bt(interp, name):
    check_py_bt_and_bt(interp, name)


# Debian sid's stripped 3.14/3.15 (no debug info) and the free-threaded 3.13, on two scenarios:
# thread stacks, and the Python frames spliced without an eval-loop symbol.
@pytest.mark.parametrize("name", ["threads", "shapes"])
@pytest.mark.parametrize("interp", [i for i in harness.provisioned_interpreters() if not i.debug_dir],
                         ids=lambda i: i.id)
def test_lldb_py_bt_and_bt_314_315_313t(interp, name):
    check_py_bt_and_bt(interp, name)


def check_py_bt_and_bt(interp, name):
    provider = lldb_major() >= 22
    with harness.Scenario(interp, name) as sc:
        core = sc.make_core()
        for where in ({"core": core}, {"pid": sc.pid}):
            commands = [mark("JSON"), "py-bt -a --json", mark("TEXT"), "py-bt"]
            names = ["JSON", "TEXT"]
            if provider:
                commands += [mark("BT"), "thread backtrace all",
                             "pyunwind set frame-provider off", mark("RAW"), "bt",
                             "pyunwind set frame-provider on"]
                names += ["BT", "RAW"]
            commands += ["pyunwind set memory debugger", mark("DBG"), "py-bt -a --json"]
            names += ["DBG"]
            got = split(run_lldb(interp, *commands, **where), names)
            check_report(json_from(got["JSON"]), sc.truth)
            main = sc.truth["threads"][0]
            assert traceback_frames(got["TEXT"]) == expected(main["frames"]), (where, got["TEXT"])
            dbg = json_from(got["DBG"])
            check_report(dbg, sc.truth)
            assert dbg["python"]["source"] == "debugger"
            if provider:
                # Every thread's Python frames, in order, in place of the eval-loop frames.
                want = [f for t in sc.truth["threads"] for f in basenames(expected(t["frames"]))]
                assert sorted(bt_python(got["BT"])) == sorted(want), got["BT"]
                threads = got["BT"].split("thread #")[1:]
                for t in sc.truth["threads"]:
                    shown = [bt_python(text) for text in threads]
                    assert basenames(expected(t["frames"])) in shown, (t["name"], got["BT"])
                assert "_PyEval_EvalFrameDefault" not in got["BT"]
                assert "[from thread state]" not in got["BT"]
                # With the provider off, lldb's own bt as it was.
                assert "[synthetic]" not in got["RAW"]
                if interp.id not in NO_EVAL_SYMBOL:
                    assert "_PyEval_EvalFrameDefault" in got["RAW"]


@pytest.mark.parametrize("interp", harness.pick(("pyenv-3.12",), INTERPS), ids=lambda i: i.id)
def test_lldb_deep_py_bt_written_in_order(interp):
    """A py-bt over 1 MiB (20,000 frames) goes straight to lldb's output: every frame once, in
    order, between what the commands before and after it print, and not into the command's
    result (docs/debugger-commands.md); a small output stays in the result."""
    def scripted(command, name):
        return ("script r = lldb.SBCommandReturnObject(); "
                "lldb.debugger.GetCommandInterpreter().HandleCommand(%r, r); "
                "print('@@%s@@' + str(len(r.GetOutput() or '')))" % (command, name))
    with harness.Scenario(interp, "deep") as sc:
        core = sc.make_core()
        out = run_lldb(interp, mark("BEFORE"), "py-bt", mark("AFTER"), scripted("py-list", "LIST"),
                       mark("SCRIPTED"), scripted("py-bt", "RESULT"), core=core)
        got = split(out, ["BEFORE", "AFTER", "SCRIPTED"])
        main = sc.truth["threads"][0]
        assert len(main["frames"]) > 20_000
        assert traceback_frames(got["BEFORE"]) == expected(main["frames"])
        assert len(got["BEFORE"]) > 1 << 20
        assert traceback_frames(got["AFTER"]) == []
        assert int(re.search(r"^@@LIST@@(\d+)$", out, re.M).group(1)) > 0
        assert traceback_frames(got["SCRIPTED"]) == expected(main["frames"])
        assert re.search(r"^@@RESULT@@0$", out, re.M), out[-2000:]


@pytest.mark.parametrize("interp", INTERPS, ids=lambda i: i.id)
def test_lldb_locals_print_list_up_down(interp):
    with harness.Scenario(interp, "locals") as sc:
        core = sc.make_core()
        for where in ({"core": core}, {"pid": sc.pid}):
            out = run_lldb(interp, mark("LOCALS"), "py-locals", mark("PRINT"), "py-print big",
                           "py-print ucs4_text", "py-print Thing", "py-print len", "py-print nosuchname",
                           mark("LIST"), "py-list", mark("UP"), "py-up", "py-list", mark("DOWN"), "py-down",
                           mark("FULL"), "py-bt-full", mark("HELP"), "help py-bt", **where)
            got = split(out, ["LOCALS", "PRINT", "LIST", "UP", "DOWN", "FULL", "HELP"])
            truth_frame = sc.truth["threads"][0]["frames"][0]
            shown = dict(line.split(" = ", 1) for line in got["LOCALS"].strip().splitlines() if " = " in line)
            for local, want in truth_frame["locals"].items():
                if want.startswith("<"):
                    assert re.match(r"^<\w+ object at 0x[0-9a-f]+>$", shown[local]), (local, shown[local])
                else:
                    assert shown[local] == want, local
            p = got["PRINT"]
            assert "local 'big' = 1267650600228229401496703205376" in p
            assert "local 'ucs4_text' = '𝄞x'" in p
            assert "global 'Thing' = <type object at" in p
            assert re.search(r"builtin 'len' = <built-in method len of module object at remote 0x[0-9a-f]+>", p)
            assert "'nosuchname' not found" in p
            assert (">%d" % truth_frame["line"]) in got["LIST"]
            caller = sc.truth["threads"][0]["frames"][1]
            # py-up numbers frames by the debugger's frame level when lldb's own frames are
            # there (as libpython in gdb), by Python frame index otherwise.
            assert re.search(r"#\d+ Frame 0x", got["UP"])
            assert ("line %d, in %s" % (caller["line"], caller["function"])) in got["UP"]
            assert (">%d" % caller["line"]) in got["UP"]
            assert re.search(r"#\d+ Frame 0x", got["DOWN"]) and ("in %s" % truth_frame["function"]) in got["DOWN"]
            # py-bt-full numbers each Python frame as py-up does.
            up_level = int(re.search(r"#(\d+) Frame 0x", got["UP"]).group(1))
            assert re.search(r"^#%d Frame 0x[0-9a-f]+, for file \S+, line %d, in %s " % (
                up_level, caller["line"], re.escape(caller["function"])), got["FULL"], re.M), got
            assert "big=1267650600228229401496703205376" in got["FULL"]
            assert "Usage: py-bt [-a|--all] [--json]" in got["HELP"]


@pytest.mark.parametrize("interp", INTERPS, ids=lambda i: i.id)
def test_lldb_called_c_function_like_gdb(interp):
    """py-bt shows the C function being called and py-up selects the innermost Python frame
    from below, as in gdb: with lldb 22's frame provider (the default; the core unwinds the
    native frames itself) and with lldb's own frames (the provider off, or lldb 19)."""
    provider = lldb_major() >= 22
    with harness.Scenario(interp, "cfunction_call") as sc:
        core = sc.make_core()
        frames = sc.truth["threads"][0]["frames"]
        for where in ({"core": core}, {"pid": sc.pid}):
            out = run_lldb(interp, mark("BT"), "py-bt", mark("UP"), "py-up", "py-print seconds", "frame info",
                           mark("DOWN"), "py-down", mark("SWITCH"), "pyunwind set frame-provider off", "frame select 0",
                           mark("BT_OFF"), "py-bt", mark("UP_OFF"), "py-up", "py-print seconds", **where)
            got = split(out, ["BT", "UP", "DOWN", "SWITCH", "BT_OFF", "UP_OFF"])
            for bt, up in ((got["BT"], got["UP"]), (got["BT_OFF"], got["UP_OFF"])):
                lines = bt[bt.index("Traceback (most recent call first):"):].splitlines()
                assert re.match(r"^  <built-in method sleep of module object at remote 0x[0-9a-f]+>$", lines[1]), bt
                assert traceback_frames(bt) == expected(frames)
                assert re.search(r"#\d+ Frame 0x[0-9a-f]+, for file %s, line %d, in call_c \(seconds=3600\)"
                                 % (re.escape(frames[0]["file"]), frames[0]["line"]), up), up
                assert "local 'seconds' = 3600" in up
            # py-up selected the frame lldb 22 shows the Python frame at (a provided frame), and
            # py-down comes back to the C function's line.
            # (lldb 19's own unwind stops at PyObject_Vectorcall, before any eval-loop frame:
            # there py-up has no lldb frame to select.)
            if provider:
                level = int(re.search(r"#(\d+) Frame 0x", got["UP"]).group(1))
                assert re.search(r"frame #%d: .*call_c" % level, got["UP"]), got["UP"]
            assert re.search(r"^#\d+ <built-in method sleep of module object at remote 0x[0-9a-f]+>$",
                             got["DOWN"], re.M), got["DOWN"]


@pytest.mark.parametrize("interp", harness.pick(("debian-3.11", "pyenv-3.12"), INTERPS), ids=lambda i: i.id)
def test_lldb_gc_and_method_wrapper_like_gdb(interp):
    """Garbage-collecting under gc.collect and a method-wrapper being called: the same py-bt
    as gdb's, with and without lldb 22's frame provider, on a core."""
    from test_libpython_text import SLEEP, outline

    for scenario, middle in (("gc_finalizer", ["Garbage-collecting",
                                                "<built-in method collect of module object at remote 0x…>"]),
                             ("wrapper_call", ["<method-wrapper '__init__' of MyList object at 0x…>"])):
        with harness.Scenario(interp, scenario) as sc:
            out = run_lldb(interp, mark("ON"), "py-bt", "pyunwind set frame-provider off", mark("OFF"), "py-bt",
                           core=sc.make_core())
            got = split(out, ["ON", "OFF"])
            f = expected(sc.truth["threads"][0]["frames"])
            for mode in ("ON", "OFF"):
                assert outline(got[mode]) == [SLEEP, f[0], *middle, *f[1:]], (mode, got[mode])


def test_lldb_py_up_down_ends_and_usage():
    interp = harness.pick(["pyenv-3.12"], INTERPS)[0]
    with harness.Scenario(interp, "shapes") as sc:
        core = sc.make_core()
        out = run_lldb(interp, mark("DOWN"), "py-down", mark("USAGE"), failing("py-print"),
                       failing("py-bt --bogus"), mark("SHOW"), "pyunwind show", core=core)
        got = split(out, ["DOWN", "USAGE", "SHOW"])
        assert "Unable to find a newer python frame" in got["DOWN"]
        assert "usage: py-print NAME" in got["USAGE"]
        assert "unrecognized arguments: --bogus" in got["USAGE"]
        assert "memory: auto" in got["SHOW"] and "frame-provider: on" in got["SHOW"]


ASYNC_CASES = [("chain3", "c"), ("taskgroup", "py"), ("cycle", "c"), ("recursive_on_cpu", "c"),
               ("executor", "c")]


@pytest.mark.parametrize("case,impl", ASYNC_CASES, ids=lambda x: x)
@pytest.mark.parametrize("interp", [i for i in INTERPS if i.minor >= 11 and not i.id.endswith("stripped")]
                         + [i for i in harness.provisioned_interpreters() if not i.debug_dir],
                         ids=lambda i: i.id)
def test_lldb_asyncio(scenario, interp, case, impl):
    """py-bt-async --json and py-tasks in lldb, on a core and live: the same graph as the truth."""
    from test_asyncio import CASES_SCRIPT, check_async, check_tree_text

    s = scenario(interp, "asyncio-" + case, script=CASES_SCRIPT, args=(case, impl))
    core = s.make_core()
    for where in ({"core": core}, {"pid": s.pid}):
        out = run_lldb(interp, mark("json"), "py-bt-async --json", mark("tree"), "py-tasks",
                       mark("end"), **where)
        parts = split(out, ["json", "tree", "end"])
        check_async(json_from(parts["json"]), s.truth)
        check_tree_text(parts["tree"], s.truth)

"""JIT and perf-trampoline frames in lldb, on Debian sid's stripped 3.14 and 3.15 (PYTHON_JIT=1,
-X perf, -X perf_jit), live and from gcore cores, against the truth each scenario records.

lldb 22+ (the frame provider): `bt` reaches `_start` with no gap; a JIT frame is named
`[jit] qualname (file:line)` (its executor's code object, as in gdb) and sits right above the
Python frames of its eval loop; a trampoline is named `[trampoline] qualname (file)` after the
function it started. lldb 19 (no provider): the py-* commands are exact, and `bt` is lldb's own
(what it shows is asserted here, as the README describes it). The lldb to drive is
$PYUNWIND_LLDB, as for test_lldb.py.
"""

import os
import re

import pytest

import harness
import jit_harness as jh
from test_lldb import basenames, bt_python, lldb_major, mark, run_lldb, split
from test_stacks import check_report, expected, got, json_from, traceback_frames

SID = jh.sid_interps()
FRAME = re.compile(r"^\s*\*?\s*frame #(\d+): (?:(0x[0-9a-f]+) ?)?(.*?)( \[synthetic\])?$")

# Steps the selected thread (lldb's own frames: run with the provider off) one instruction at a
# time until its pc is in JIT code of this stop's map, as jit_gdb_helper's
# pyunwind-test-step-to-jit does in gdb.
STEP_TO_JIT = r'''
import lldb, pyunwind_lldb_host as P
lldb.debugger.SetAsync(False)
t = lldb.debugger.GetSelectedTarget(); p = t.GetProcess(); th = p.GetSelectedThread()
rows = P.session(P.LldbHost(t, p, th)).jit_regions()
n = 0
while not any(r[0] <= th.GetFrameAtIndex(0).GetPC() < r[1] and r[2] == "jit" for r in rows):
    th.StepInstruction(False)
    n += 1
    assert n < 100000, "PC never reached JIT code"
print("@@" + "STEPS@@ %d" % n)
'''


def frames(text):
    """(pc or None, text, synthetic) of each frame line of the `bt` in ``text`` (what lldb's
    event thread printed around it left out)."""
    out = []
    lines = text.splitlines()
    if "(lldb) bt" in lines:
        lines = lines[lines.index("(lldb) bt") + 1:]
    for n, line in enumerate(lines):
        if n and (line.startswith("(lldb)") or re.match(r"^\*? +thread #", line)):
            break
        m = FRAME.match(line)
        if m:
            out.append((int(m.group(2), 16) if m.group(2) else None, m.group(3), bool(m.group(4))))
    return out


def kind(frame):
    text = frame[1]
    if bt_python(" frame #0: %s [synthetic]" % text):
        return "python"
    if text.startswith("[jit] "):
        return "jit"
    if text.startswith("[trampoline] "):
        return "trampoline"
    return "native"


def check_to_start(bt, anon=None):
    """No gap: every native frame has a pc (in a mapped file's code unless it is JIT or
    trampoline code) and the oldest frame is `_start`."""
    fs = frames(bt)
    assert fs and re.search(r"`_start \+ \d+$", fs[-1][1]), bt
    for f in fs:
        if kind(f) == "native":
            assert f[0] is not None and "`" in f[1], bt
            if anon is not None:
                assert not jh.in_ranges(anon, f[0]), bt
    assert "[from thread state]" not in bt and "_PyEval_EvalFrameDefault" not in bt, bt
    return fs


def check_json(report, sc):
    """The report of a stop: check_report, or for a running scenario (no GIL holder at a fixed
    point) the same without the GIL check, the spinning main thread holding it."""
    if "gil_holder" in sc.truth:
        check_report(report, sc.truth)
        return
    main = sc.truth["threads"][0]
    t = [t for t in report["threads"] if t["native_id"] == main["native_id"]]
    assert len(t) == 1 and t[0]["name"] == main["name"], report
    assert got(t[0]["frames"]) == expected(main["frames"]), report
    assert t[0]["holds_gil"] is True and t[0]["truncated"] is False, report
    assert report["errors"] == [], report


def py_commands():
    return [mark("PYBT"), "py-bt", mark("JSON"), "py-bt -a --json", mark("LIST"), "py-list",
            mark("UP"), "py-up", mark("DOWN"), "py-down", mark("END")]


def check_py_commands(got_, sc):
    """py-bt, py-bt -a --json, py-list, py-up and py-down, exact on the scenario's truth."""
    main = sc.truth["threads"][0]["frames"]
    assert traceback_frames(got_["PYBT"]) == expected(main), got_["PYBT"]
    check_json(json_from(got_["JSON"]), sc)
    assert re.search(r"^ *>%d " % main[0]["line"], got_["LIST"], re.M), got_["LIST"]
    assert "line %d, in %s" % (main[1]["line"], main[1]["function"]) in got_["UP"], got_["UP"]
    assert "line %d, in %s" % (main[0]["line"], main[0]["function"]) in got_["DOWN"], got_["DOWN"]


def run(interp, sc, where, *extra):
    commands = list(extra) + [mark("BT"), "bt", mark("ALL"), "thread backtrace all"] + py_commands()
    return split(run_lldb(interp, *commands, **where),
                 ["BT", "ALL", "PYBT", "JSON", "LIST", "UP", "DOWN", "END"])


def check_all_threads(text, sc):
    """lldb 22: every thread of the truth shows its Python frames, in order, each thread's
    placed by an eval-loop frame (none read from the thread state only)."""
    threads = text.split("thread #")[1:]
    shown = [bt_python(t) for t in threads]
    for t in sc.truth["threads"]:
        assert basenames(expected(t["frames"])) in shown, (t["name"], text)
    assert "[from thread state]" not in text, text


def check_jit_bt(bt, sc, script, func, anon, innermost):
    """lldb 22: natives, one JIT frame named after `func`'s code, right above the main thread's
    Python frames, natives to `_start`. `innermost`: the JIT frame is frame #0."""
    fs = check_to_start(bt, anon)
    kinds = [kind(f) for f in fs]
    assert kinds.count("jit") == 1, bt
    j = kinds.index("jit")
    assert (j == 0) == innermost, bt
    assert fs[j][1] == "[jit] %s (%s:%d)" % (func, sc.script, jh.def_line(script, func)), bt
    # A pc, where lldb has no symbol for it (3.14); 3.15's registered executor objects have one
    # (`py::jit:executor`), which lldb's bt would show instead of the name: no pc there.
    if fs[j][0] is not None:
        assert jh.in_ranges(anon, fs[j][0]), bt
    assert all(k == "native" for k in kinds[:j]), bt
    main = basenames(expected(sc.truth["threads"][0]["frames"]))
    shown = bt_python("\n".join(" frame #0: %s [synthetic]" % f[1] for f in fs if kind(f) == "python"))
    assert shown == main, bt
    n = len(main)
    assert kinds[j + 1:j + 1 + n] == ["python"] * n, bt
    assert all(k == "native" for k in kinds[j + 1 + n:]), bt


def check_lldb19_bt(bt, interp, anon, jit_innermost):
    """lldb 19's own bt (no provider), as docs/debugger-commands.md describes it: no Python
    frame; JIT code of 3.14 is a bare address (no symbol, no CFI), and a JIT frame that is not
    frame #0 is the last frame lldb finds; 3.15's is `JIT(0x…)`py::jit:executor`, the ELF object
    CPython registers through the GDB JIT interface, which lldb unwinds through to `_start`."""
    assert "[synthetic]" not in bt, bt
    fs = frames(bt)
    jit = [i for i, f in enumerate(fs) if jh.in_ranges(anon, f[0])]
    assert jit, bt
    if interp.minor == 14:
        assert all(fs[i][1] == "" for i in jit), bt
        if not jit_innermost:
            assert jit == [len(fs) - 1], bt
    else:
        assert re.match(r"^JIT\(0x[0-9a-f]+\)`py::jit:executor \+ \d+$", fs[jit[0]][1]), bt
        assert re.search(r"`_start \+ \d+$", fs[-1][1]), bt
    if jit_innermost:
        assert jit[0] == 0, bt


def check_lldb19_trampolines(bt, anon):
    """lldb 19 unwinds perf trampolines (`push rbp; mov rsp,rbp; call`) by their frame pointer
    to `_start`, each a bare address."""
    assert "[synthetic]" not in bt, bt
    fs = frames(bt)
    tramps = [f for f in fs if jh.in_ranges(anon, f[0])]
    assert len(tramps) >= 5 and all(f[1] == "" for f in tramps), bt
    assert re.search(r"`_start \+ \d+$", fs[-1][1]), bt


@pytest.mark.parametrize("interp", SID, ids=lambda i: i.id)
def test_lldb_jit_call_from_jit_code(interp):
    """A C function called by JIT code blocks: C frames, the JIT frame, its eval loop's Python
    frames, the interpreter's start-up to `_start`; on a gcore core, then live."""
    provider = lldb_major() >= 22
    with harness.Scenario(interp, "jit_call", env={"PYTHON_JIT": "1"}) as sc:
        assert sc.truth["jit"] is True
        anon = jh.anon_exec_ranges(sc.pid)
        for where in ({"core": sc.make_core()}, {"pid": sc.pid}):
            got_ = run(interp, sc, where)
            check_py_commands(got_, sc)
            if provider:
                check_jit_bt(got_["BT"], sc, "jit_call.py", "leaf", anon, innermost=False)
                check_all_threads(got_["ALL"], sc)
            else:
                check_lldb19_bt(got_["BT"], interp, anon, jit_innermost=False)


@pytest.mark.parametrize("interp", SID, ids=lambda i: i.id)
def test_lldb_jit_pc_inside_jit_code(interp):
    """The pc itself is in JIT code (a hot pure-Python loop): the JIT frame is frame #0. The
    core is gdb's gcore after stepping into JIT code (jit_gdb_helper); live, lldb steps there
    itself."""
    provider = lldb_major() >= 22
    with harness.Scenario(interp, "jit_spin", env={"PYTHON_JIT": "1"}) as sc:
        assert sc.truth["jit"] is True
        anon = jh.anon_exec_ranges(sc.pid)
        core = str(sc.tmpdir / "jit-pc.core")
        jh.run_gdb(interp, "pyunwind-test-step-to-jit", "gcore %s" % core, pid=sc.pid)
        # Thread stacks with guard pages, as make_core does (the other thread is blocked).
        harness.refill_guarded_mappings(core, sc.pid)
        step = ["pyunwind set frame-provider off", "script exec(%r)" % STEP_TO_JIT,
                "pyunwind set frame-provider on", "script import time; time.sleep(0.3)"]
        for where, extra in (({"core": core}, []), ({"pid": sc.pid}, step)):
            got_ = run(interp, sc, where, *extra)
            check_py_commands(got_, sc)
            if provider:
                check_jit_bt(got_["BT"], sc, "jit_spin.py", "spin", anon, innermost=True)
                check_all_threads(got_["ALL"], sc)
            else:
                check_lldb19_bt(got_["BT"], interp, anon, jit_innermost=True)


@pytest.mark.parametrize("perf", ["PYTHONPERFSUPPORT", "PYTHON_PERF_JIT_SUPPORT"], ids=["perf", "perf_jit"])
@pytest.mark.parametrize("interp", SID, ids=lambda i: i.id)
def test_lldb_trampolines(interp, perf):
    """-X perf / -X perf_jit: each Python frame, then the trampoline that started it, named
    after it; nothing else between them, and natives to `_start`."""
    provider = lldb_major() >= 22
    with harness.Scenario(interp, "perf_calls", env={perf: "1"}) as sc:
        assert sc.truth["perf"] is True
        anon = jh.anon_exec_ranges(sc.pid)
        main = sc.truth["threads"][0]["frames"]
        for where in ({"core": sc.make_core()}, {"pid": sc.pid}):
            got_ = run(interp, sc, where)
            check_py_commands(got_, sc)
            bt = got_["BT"]
            if not provider:
                check_lldb19_trampolines(bt, anon)
                continue
            check_all_threads(got_["ALL"], sc)
            fs = check_to_start(bt)
            shown = [f[1] for f in fs if kind(f) in ("python", "trampoline")]
            want = []
            for f in main:
                want += ["%s at %s:%d" % (f["function"], os.path.basename(f["file"]), f["line"]),
                         "[trampoline] %s (%s)" % (f["function"], f["file"])]
            assert shown == want, bt
            kinds = [kind(f) for f in fs]
            first = kinds.index("python")
            assert kinds[first:first + len(want)] == ["python", "trampoline"] * len(main), bt
            for f in fs:
                if kind(f) == "trampoline":
                    assert jh.in_ranges(anon, f[0]), bt


@pytest.mark.parametrize("entry", ["Session.jit_lookup", "Session.own_natives"])
def test_lldb_jit_provider_error_is_one_line(entry):
    """lldb 22: a failure where the provider looks for JIT code or unwinds past it (a panic
    injected there) leaves lldb's own frames, with the one fallback line; lldb 19 has no
    provider and says nothing."""
    from test_lldb import lldb_path
    from test_lldb_robust import fallback_line

    provider = lldb_major() >= 22
    interp = [i for i in SID if i.minor == 14][0]
    with harness.Scenario(interp, "jit_call", env={"PYTHON_JIT": "1"}) as sc:
        cmd = [lldb_path(), "-b", "--no-lldbinit", interp.exe, "-c", sc.make_core(),
               "-o", "command script import %s" % (harness.repo_root() / "lldb-scripts" / "pyunwind_lldb.py"),
               "-o", "script import time; time.sleep(0.3)", "-o", mark("BT"), "-o", "bt", "-o", mark("END")]
        rc, out, err = harness.run(cmd, 120, env=harness.child_env(dict(interp.env, PYUNWIND_TEST_PANIC=entry)))
    assert rc == 0 and "Traceback" not in out + err, out + err
    lines = [l for l in (out + err).splitlines() if "pyunwind:" in l]
    bt = split(out, ["BT", "END"])["BT"]
    assert "[synthetic]" not in bt and frames(bt), bt
    if provider:
        assert len(lines) == 1 and fallback_line(entry).match(lines[0]), out + err
        # lldb's own unwind of 3.14 ends at the JIT frame.
        assert frames(bt)[-1][1] == "", bt
    else:
        assert lines == [], out + err

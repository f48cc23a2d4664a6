"""JIT and perf-trampoline frames in gdb, on Debian sid's 3.14 and 3.15, live and from gcore
cores: the unwinder takes `bt` through them to `_start` with no junk frame, names JIT frames
after their executor's code, and leaves every other frame to gdb."""

import json
import re

import pytest

import harness
import jit_harness as jh

# Minutes with few tests: it runs first under pytest-xdist (conftest.py).
pytestmark = pytest.mark.long_file

SID = jh.sid_interps()
FRAME = re.compile(r"^#(\d+)\s+(?:(0x[0-9a-f]+) in )?(.*?) \([^()]*\)(?: at | from |$)")


def frames(text):
    """(level, pc or None, function) of each `bt` line (inline frames have no pc)."""
    out = []
    for line in text.splitlines():
        m = FRAME.match(line)
        if m:
            out.append((int(m.group(1)), int(m.group(2), 16) if m.group(2) else None, m.group(3)))
    return out


def regions(out):
    return json.loads(out.split("@@REGIONS@@", 1)[1].splitlines()[0])


def check_rows(rows, kind, anon):
    """Our region list of `kind` is not empty and lies in the process's anonymous executable
    mappings."""
    mine = [r for r in rows if r[2] == kind]
    assert mine and all(jh.in_ranges(anon, r[0]) and jh.in_ranges(anon, r[1] - 1) for r in mine), (
        rows, anon)


def check_whole_stack(raw, text, anon):
    """Reaches _start; every frame gdb cannot name is JIT/trampoline code (an anonymous
    executable mapping) or libc's own unnamed start-up frame."""
    assert "Backtrace stopped" not in text, text
    assert raw[-1][2] == "_start", text
    lines = [l for l in text.splitlines() if FRAME.match(l)]
    for f, line in zip(raw, lines):
        if f[2] == "??":
            assert "libc.so.6" in line or jh.in_ranges(anon, f[1]), text


def check_jit_stack(sc, script, func, out, anon):
    """JIT frames are told by /proc/PID/maps (``anon``: no perf trampolines in these
    scenarios, so every anonymous executable mapping is JIT code), not by our region list."""
    check_rows(regions(out)["rows"], "jit", anon)
    raw_text = out.split("@@RAW@@")[1].split("@@FILTERED@@")[0]
    filtered = out.split("@@FILTERED@@")[1]
    raw = frames(raw_text)
    check_whole_stack(raw, raw_text, anon)
    jit_levels = [i for i, f in enumerate(raw) if jh.in_ranges(anon, f[1])]
    # One JIT frame (one shim activation), directly older than it the eval loop.
    assert len(jit_levels) == 1, raw_text
    j = jit_levels[0]
    assert raw[j][2] in ("??", "py::jit:executor"), raw_text
    assert raw[j + 1][2] == "_PyEval_EvalFrameDefault", raw_text
    assert "_PyEval_EvalFrameDefault" not in [f[2] for f in raw[:j]], raw_text
    want = "[jit] %s (%s:%d)" % (func, sc.script, jh.def_line(script, func))
    assert [f[2] for f in frames(filtered) if f[2].startswith("[jit]")] == [want], filtered
    return raw, j


BT = ("pyunwind-test-regions", "echo @@RAW@@\\n", "bt -no-filters", "echo @@FILTERED@@\\n", "bt")


@pytest.mark.parametrize("interp", SID, ids=lambda i: i.id)
def test_jit_call_from_jit_code(interp):
    """A C function called by JIT code blocks: C frames, the JIT frame, the eval loop, main."""
    with harness.Scenario(interp, "jit_call", env={"PYTHON_JIT": "1"}) as sc:
        assert sc.truth["jit"] is True
        out, _ = jh.run_gdb(interp, *BT, pid=sc.pid)
        anon = jh.anon_exec_ranges(sc.pid)
        raw, j = check_jit_stack(sc, "jit_call.py", "leaf", out, anon)
        # The C frames above the JIT frame are the lock's acquire path.
        assert any("acquire" in f[2] or "Vectorcall" in f[2] or "Call" in f[2] for f in raw[:j]), out
        core = sc.make_core()
        out_core, _ = jh.run_gdb(interp, *BT, core=core)
        raw_core, jc = check_jit_stack(sc, "jit_call.py", "leaf", out_core, anon)
        assert [f[2] for f in raw_core] == [f[2] for f in raw]


@pytest.mark.parametrize("interp", SID, ids=lambda i: i.id)
def test_jit_pc_inside_jit_code(interp):
    """The PC itself is in JIT code (a hot pure-Python loop): the JIT frame is #0."""
    with harness.Scenario(interp, "jit_spin", env={"PYTHON_JIT": "1"}) as sc:
        assert sc.truth["jit"] is True
        core = str(sc.tmpdir / "jit-pc.core")
        out, _ = jh.run_gdb(interp, "pyunwind-test-step-to-jit", *BT, "gcore %s" % core, pid=sc.pid)
        anon = jh.anon_exec_ranges(sc.pid)
        raw, j = check_jit_stack(sc, "jit_spin.py", "spin", out, anon)
        assert j == 0, out
        out_core, _ = jh.run_gdb(interp, *BT, core=core)
        raw_core, jc = check_jit_stack(sc, "jit_spin.py", "spin", out_core, anon)
        assert jc == 0 and [f[:1] + f[2:] for f in raw_core] == [f[:1] + f[2:] for f in raw]


@pytest.mark.parametrize("perf", ["PYTHONPERFSUPPORT", "PYTHON_PERF_JIT_SUPPORT"],
                         ids=["perf", "perf_jit"])
@pytest.mark.parametrize("interp", SID, ids=lambda i: i.id)
def test_trampolines(interp, perf):
    """-X perf / -X perf_jit: every trampoline frame unwinds to the eval call plumbing, with
    no junk frame (gdb alone reads the saved %rbp as a return address)."""
    with harness.Scenario(interp, "perf_calls", env={perf: "1"}) as sc:
        assert sc.truth["perf"] is True
        for where in ({"pid": sc.pid}, {"core": sc.make_core()}):
            out, _ = jh.run_gdb(interp, *BT, **where)
            # JIT off: every anonymous executable mapping holds perf trampolines.
            anon = jh.anon_exec_ranges(sc.pid)
            check_rows(regions(out)["rows"], "trampoline", anon)
            raw_text = out.split("@@RAW@@")[1].split("@@FILTERED@@")[0]
            raw = frames(raw_text)
            check_whole_stack(raw, raw_text, anon)
            tramps = [i for i, f in enumerate(raw) if jh.in_ranges(anon, f[1])]
            # outer, middle x3, leaf, plus <module> and the runpy-free entry: at least 5.
            assert len(tramps) >= 5, raw_text
            for i in tramps:
                # A trampoline calls the eval loop and is called by the call plumbing.
                assert raw[i - 1][2] == "_PyEval_EvalFrameDefault", raw_text
                assert raw[i + 1][2].lstrip("_").startswith("PyEval_"), raw_text
            assert "_PyRuntime" not in [f[2] for f in raw], raw_text
            filtered = frames(out.split("@@FILTERED@@")[1])
            assert sum(f[2].startswith("[trampoline]") for f in filtered) == len(tramps)


@pytest.mark.parametrize("interp", SID + harness.pick(["pyenv-3.12"]),
                         ids=lambda i: i.id)
def test_unwinder_leaves_native_frames_to_gdb(interp):
    """No JIT code on the stack: `bt -no-filters` is the same with the unwinder and without."""
    with harness.Scenario(interp, "shapes") as sc:
        for where in ({"pid": sc.pid}, {"core": sc.make_core()}):
            out, _ = jh.run_gdb(interp, "echo @@ON@@\\n", "bt -no-filters",
                                "disable unwinder global pyunwind-jit", "maint flush register-cache",
                                "echo @@OFF@@\\n", "bt -no-filters", **where)
            on = out.split("@@ON@@")[1].split("@@OFF@@")[0]
            off = out.split("@@OFF@@")[1]
            assert frames(on) == frames(off) and len(frames(on)) > 5, out


@pytest.mark.parametrize("interp", SID, ids=lambda i: i.id)
def test_unwinder_only_claims_jit_frames(interp):
    """On a JIT stack, every frame newer than the JIT frame is the same with and without the
    unwinder (gdb's own), and the unwinder is what carries bt past the JIT frame."""
    with harness.Scenario(interp, "jit_call", env={"PYTHON_JIT": "1"}) as sc:
        out, _ = jh.run_gdb(interp, "pyunwind-test-regions", "echo @@ON@@\\n", "bt -no-filters",
                            "disable unwinder global pyunwind-jit", "maint flush register-cache",
                            "echo @@OFF@@\\n", "bt -no-filters", pid=sc.pid)
        anon = jh.anon_exec_ranges(sc.pid)
        check_rows(regions(out)["rows"], "jit", anon)
        on = frames(out.split("@@ON@@")[1].split("@@OFF@@")[0])
        off = frames(out.split("@@OFF@@")[1])
        j = next(i for i, f in enumerate(on) if jh.in_ranges(anon, f[1]))
        assert on[: j + 1] == off[: j + 1]
        assert on[-1][2] == "_start"


@pytest.mark.parametrize("interp", SID, ids=lambda i: i.id)
def test_py_bt_in_hot_jit_code(interp):
    with harness.Scenario(interp, "jit_spin", env={"PYTHON_JIT": "1"}) as sc:
        out, _ = jh.run_gdb(interp, "pyunwind-test-step-to-jit", "py-bt", pid=sc.pid)
        got = re.findall(r'^  File "(.*)", line (\d+), in (.*)$', out, re.M)
        want = [(f["file"], str(f["line"]), f["function"]) for f in sc.truth["threads"][0]["frames"]]
        assert got == want, out


@pytest.mark.parametrize("interp", SID, ids=lambda i: i.id)
def test_trampolines_named_after_their_code(interp):
    with harness.Scenario(interp, "perf_calls", env={"PYTHONPERFSUPPORT": "1"}) as sc:
        out, _ = jh.run_gdb(interp, "bt", pid=sc.pid)
        named = [f[2] for f in frames(out) if f[2].startswith("[trampoline]")]
        main = sc.truth["threads"][0]["frames"]
        want = ["[trampoline] %s (%s)" % (f["function"], f["file"]) for f in main]
        assert named == want, out

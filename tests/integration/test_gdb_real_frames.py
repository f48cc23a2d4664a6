"""Real gdb frames (`set pyunwind-frames real`): each Python frame is a gdb frame of its own,
with its own number, reached by `frame N`, `up`, `down`, `info frame` and MI (with and without
frame filters); `finish`, `return` and `next` from a Python frame work or refuse, never run
away; `py-finish` runs until the selected Python frame returns. On pyenv 3.12 and 3.13 and
Debian's stripped 3.11, on cores (shapes) and live processes (finish); and on Debian sid's 3.14
and 3.15, stripped and with their debug info, whose eval loop runs in
`_PyEval_EvalFrameDefault.cold`, a function with no dynamic symbol: there the eval-loop frame
is the one whose stack frame holds its run's entry frame."""

import re

import pytest

import harness
from test_dap import MI_FRAME
from test_stacks import expected, gdb_cmd

INTERPS = harness.pick(("pyenv-3.12", "pyenv-3.13", "debian-3.11"))
SID = harness.pick(("debian-3.14", "debian-3.14-dbgsym", "debian-3.15", "debian-3.15-dbgsym"))
GDB_TIMEOUT = 120
EVAL = "_PyEval_EvalFrameDefault"
# What `bt -no-filters` names an eval-loop frame: sid's stripped builds have no symbol for the
# `.cold` part the eval loop waits in (a `??` frame).
RAW_EVAL = {"debian-3.14": "??", "debian-3.15": "??"}
# gdb frames between two Python frames of one eval-loop call: with debug info, 3.14's eval
# loop calls through `PyObject_Vectorcall` and `_PyObject_VectorcallTstate`, inlined at the
# call's return address, and gdb shows them as inline frames before every copy (bt hides
# them after the first).
INLINE_AT_CALL = {"debian-3.14-dbgsym": ("_PyObject_VectorcallTstate", "PyObject_Vectorcall")}
# `#8  leaf () at /x/shapes.py:19`, `#2  0x00007f… in acquire (...) at Python/x.c:486`,
# `decorated () at …` (no number: a second Python frame of one eval-loop frame, default mode).
BT_LINE = re.compile(r"^(?:#(\d+)\s+)?(?:0x[0-9a-f]+ in )?(\S+) \(.*?\)(?: (?:at|from) (\S+?)(?::(\d+))?)?$")


def test_interpreters_present():
    assert sorted(i.id for i in INTERPS) == ["debian-3.11", "pyenv-3.12", "pyenv-3.13"]
    assert sorted(i.id for i in SID) == ["debian-3.14", "debian-3.14-dbgsym", "debian-3.15",
                                         "debian-3.15-dbgsym"]


def gdb(interp, commands, core=None, pid=None, errors=False):
    """gdb's output (and its error lines, which it prints apart, when `errors`)."""
    cmd = gdb_cmd(interp, "set print frame-arguments none", *commands, core=core, pid=pid)
    rc, out, err = harness.run(cmd, GDB_TIMEOUT, env=harness.child_env(interp.env))
    assert rc == 0, err
    assert "Traceback (most recent call last)" not in out + err, out + err
    assert "Python Exception" not in out + err, out + err
    return (out, err) if errors else out


def sections(out):
    """{marker: text} for the `echo @@NAME\\n` markers the commands print."""
    parts = re.split(r"^@@(\w+)$", out, flags=re.M)
    return {parts[i]: parts[i + 1].strip("\n") for i in range(1, len(parts) - 1, 2)}


def mark(name):
    return "echo @@%s\\n" % name


def bt_rows(text):
    """(level or None, function, file, line) of each frame line of a `bt`."""
    rows = []
    for line in text.splitlines():
        m = BT_LINE.match(line)
        assert m, "not a bt line: %r" % line
        lv, fn, path, ln = m.groups()
        rows.append((int(lv) if lv else None, fn, path, int(ln) if ln else None))
    return rows


def raw_pc(text, level):
    """The PC `bt -no-filters` prints for frame `level`."""
    m = re.search(r"^#%d\s+0x([0-9a-f]+) in " % level, text, re.M)
    assert m, (level, text)
    return int(m.group(1), 16)


def python_rows(rows):
    return [r for r in rows if r[2] and r[2].endswith(".py")]


def short(function):
    return function.rpartition(".")[2]


@pytest.fixture(scope="module", params=INTERPS + SID, ids=lambda i: i.id)
def shapes(request):
    """(interp, truth frames, core, the outputs of one gdb run on the core: bt in default
    mode, bt and `bt -no-filters` in real mode, bt back in default mode)."""
    interp = request.param
    with harness.Scenario(interp, "shapes") as sc:
        core = sc.make_core()
        out = gdb(interp, [mark("DEFAULT"), "bt", mark("FULLDEFAULT"), "py-bt-full", "set pyunwind-frames real",
                           mark("REAL"), "bt", mark("RAW"), "bt -no-filters", mark("FULLREAL"), "py-bt-full",
                           "set pyunwind-frames default", mark("BACK"), "bt", mark("END")],
                  core=core)
        yield interp, sc.truth["threads"][0]["frames"], core, sections(out)


def test_bt_numbers_every_python_frame(shapes):
    interp, truth, _core, s = shapes
    default, real, raw = bt_rows(s["DEFAULT"]), bt_rows(s["REAL"]), bt_rows(s["RAW"])
    # Default mode is as it was, and comes back: Python frames after the first of an eval-loop
    # frame have no number.
    assert s["BACK"] == s["DEFAULT"]
    assert [(f, p, ln) for _, f, p, ln in python_rows(default)] == expected(truth)
    assert any(lv is None for lv, *_ in python_rows(default))
    # Real mode: the same frames, each with its own number, numbered as gdb's own frames.
    assert [(f, p, ln) for _, f, p, ln in python_rows(real)] == expected(truth)
    assert all(lv is not None for lv, *_ in real), s["REAL"]
    levels = [lv for lv, *_ in real]
    assert levels == sorted(set(levels))
    assert [lv for lv, *_ in raw] == list(range(len(raw)))
    assert levels[-1] == len(raw) - 1
    for lv, *_ in python_rows(real):
        assert raw[lv][1] == RAW_EVAL.get(interp.id, EVAL), raw[lv]
    # Python frames of one eval-loop call are consecutive gdb frames (but for the inline
    # frames of its call site).
    py_levels = [lv for lv, *_ in python_rows(real)]
    inline = INLINE_AT_CALL.get(interp.id, ())
    assert py_levels[1] == py_levels[0] + 1 + len(inline), py_levels
    assert [raw[lv][1] for lv in range(py_levels[0] + 1, py_levels[1])] == list(inline)
    if interp.id in RAW_EVAL:
        # Where `??` cannot tell frames apart: the copies of the innermost eval-loop frame
        # are at its one PC (gdb prints it for frames with no symbol).
        assert raw_pc(s["RAW"], py_levels[0]) == raw_pc(s["RAW"], py_levels[1]), s["RAW"]
    # The native frames are default mode's.
    natives = lambda rows: [f for _, f, p, _ in rows if not (p and p.endswith(".py"))]  # noqa: E731
    assert natives(real) == natives(default)


def test_py_bt_full_numbers_frames_as_bt(shapes):
    """py-bt-full numbers a Python frame by its gdb frame, as libpython does (and py-up): by
    default the eval-loop frame's level, which the Python frames it runs share; in real frames
    its own."""
    interp, truth, _core, s = shapes
    full_line = re.compile(r"^#(\d+) Frame 0x[0-9a-f]+, for file \S+, line \d+, in (\S+) ", re.M)
    for bt, full in (("DEFAULT", "FULLDEFAULT"), ("REAL", "FULLREAL")):
        levels, last = [], None
        for lv, _fn, path, _ln in bt_rows(s[bt]):
            last = lv if lv is not None else last
            if path and path.endswith(".py"):
                levels.append(last)
        assert len(levels) == len(truth)
        got = [(int(n), fn) for n, fn in full_line.findall(s[full])]
        assert got == [(lv, f["function"]) for lv, f in zip(levels, truth)], s[full]


def test_frame_up_down_info_frame(shapes):
    interp, truth, core, s = shapes
    py = python_rows(bt_rows(s["REAL"]))
    commands = ["set pyunwind-frames real"]
    for k, (lv, *_rest) in enumerate(py):
        commands += ["frame %d" % lv, mark("LOCALS%d" % k), "py-locals"]
    first = py[0][0]
    commands += ["frame %d" % first, mark("INFO"), "info frame", "up", mark("UP"), "info frame", "py-locals",
                 "down", mark("DOWN"), "py-locals", mark("PYUP"), "py-up", mark("END")]
    s2 = sections(gdb(interp, commands, core=core))
    # py-locals starts with the selected Python frame (then the older ones of its eval-loop
    # call, as libpython's).
    for k, f in enumerate(truth):
        assert locals_heading(s2["LOCALS%d" % k]) == "Locals for %s" % short(f["function"]), k
    assert "Stack level %d, frame at" % first in s2["INFO"]
    assert "Stack level %d, frame at" % (first + 1) in s2["UP"]
    assert locals_heading(s2["UP"]) == "Locals for %s" % short(truth[1]["function"])
    assert locals_heading(s2["DOWN"]) == "Locals for %s" % short(truth[0]["function"])
    # py-up selects the calling Python frame's own gdb frame, and says its number.
    caller = truth[1]
    assert re.match(r"#%d Frame 0x[0-9a-f]+, for file %s, line %d, in %s " % (
        py[1][0], re.escape(caller["file"]), caller["line"], re.escape(caller["function"])), s2["PYUP"]), s2["PYUP"]


def locals_heading(text):
    return next(line for line in text.splitlines() if line.startswith("Locals for "))


def test_mi_frames(shapes):
    """MI without frame filters lists every copy with its own level (the eval loop's name);
    with them, each Python frame by name, file and line, at the level `bt` gives it."""
    interp, truth, core, s = shapes
    cmd = [c for c in gdb_cmd(interp, core=core) if c != "-batch"]
    cmd[1:1] = ["--interpreter=mi"]
    rc, out, err = harness.run(cmd, GDB_TIMEOUT, env=harness.child_env(interp.env),
                               input="\n".join(["-gdb-set pyunwind-frames real", "-stack-list-frames",
                                                "-enable-frame-filters", "-stack-list-frames", "-gdb-exit", ""]))
    assert rc == 0, err
    stacks = re.findall(r"\^done,stack=\[(.*)\]", out)
    assert len(stacks) == 2, out[-3000:]
    raw, filtered = (MI_FRAME.findall(x) for x in stacks)
    raw_bt = bt_rows(s["RAW"])
    assert [int(lv) for lv, *_ in raw] == list(range(len(raw_bt)))
    assert [f for _, f, _, _ in raw] == [f for _, f, _, _ in raw_bt]
    py = [(int(lv), f, p, int(ln)) for lv, f, p, ln in filtered if p.endswith(".py")]
    assert [(f, p, ln) for _, f, p, ln in py] == expected(truth)
    assert [lv for lv, *_ in py] == [lv for lv, *_ in python_rows(bt_rows(s["REAL"]))]
    assert all(lv for lv, *_ in filtered)


@pytest.fixture(scope="module", params=INTERPS + SID, ids=lambda i: i.id)
def finishing(request):
    with harness.Scenario(request.param, "finish") as sc:
        yield request.param, sc


def top_frame(py_bt):
    """(function, line) of the first frame of a py-bt."""
    m = re.search(r'File "[^"]+", line (\d+), in (\S+)', py_bt)
    assert m, py_bt
    return m.group(2), int(m.group(1))


def test_finish_return_next_py_finish_live(finishing):
    interp, sc = finishing
    truth = sc.truth["threads"][0]["frames"]
    middle, main = truth[1]["line"], truth[2]["line"]
    helper = harness.repo_root() / "tests" / "integration" / "gdb_select_python.py"
    out, err = gdb(interp, [
        "source %s" % helper, "set pyunwind-frames real", "select-python inner",
        mark("FINISH"), "finish", mark("RETURN"), "return", mark("NEXT"), "next",
        "shell echo go > %s" % (sc.tmpdir / "go"),
        mark("PYFINISH"), "py-finish", "py-bt",
        mark("NEXT0"), "frame 0", "next",
        mark("CONT1"), "continue", "select-python middle", "finish", mark("FINISHED"), "py-bt",
        mark("CONT2"), "continue", "select-python middle", mark("PYFINISH2"), "py-finish", "py-bt", mark("END"),
    ], pid=sc.pid, errors=True)
    s = sections(out)
    # From inner, which shares its eval-loop call with middle, each refuses (gdb prints errors
    # apart from its output) and the target stays where it was.
    refused = [line for line in err.splitlines() if line.startswith("pyunwind:")]
    assert len(refused) == 3, err
    assert re.match(r"pyunwind: finish cannot stop when Python frame #\d+ inner returns", refused[0]), err
    assert re.match(r"pyunwind: return cannot pop Python frame #\d+ inner", refused[1]), err
    assert re.match(r"pyunwind: next steps the innermost frame \(#0\), not Python frame #\d+ inner", refused[2]), err
    assert s["FINISH"] == s["RETURN"] == s["NEXT"] == "", out
    # py-finish stops right after inner returned: middle is the innermost Python frame.
    assert "py-finish: inner returned" in s["PYFINISH"], out
    assert top_frame(s["PYFINISH"]) == ("middle", middle)
    # next from the eval loop at frame 0 steps one line of it, no further.
    assert "SIGTRAP" not in s["NEXT0"], out
    # Step 1 stops itself; finish from middle (the entry frame of its eval-loop call, whose
    # return is that call's) works as gdb's finish.
    assert "SIGTRAP" in s["CONT1"], out
    assert top_frame(s["FINISHED"]) == ("main", main)
    # Step 2: py-finish from middle.
    assert "SIGTRAP" in s["CONT2"], out
    assert "py-finish: middle returned" in s["PYFINISH2"], out
    assert top_frame(s["PYFINISH2"]) == ("main", main)

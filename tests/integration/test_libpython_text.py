"""The text libpython.py prints, from target memory only, on every interpreter of the matrix
(stripped builds included: Debian's python3.11, sid's LTO 3.14 and 3.15, stripped copies of
pyenv's libpython; and the free-threaded build), live and from a core: the C function a Python frame is calling, and
py-up from the C frames below the Python stack; a method-wrapper being called."""

import re

import pytest

import harness
from test_stacks import INTERPS, expected, run_gdb, traceback_frames

# The builds with symbols run CPython's own test_gdb (cpython_gdb_suite.py); these have
# none (or no single GIL): the text must come from memory and native PCs alone.
MEMORY_ONLY = ("debian-3.11", "pyenv-3.10-stripped", "pyenv-3.12-stripped", "debian-3.14",
               "debian-3.15", "ft-3.13t")
MEMORY_ONLY_INTERPS = harness.pick(MEMORY_ONLY, INTERPS)

CALL_LINE = re.compile(r"^  <built-in method sleep of module object at remote 0x[0-9a-f]+>$")
FULL_CALL_LINE = re.compile(r"^#\d+ <built-in method sleep of module object at remote 0x[0-9a-f]+>$")
SLEEP = "<built-in method sleep of module object at remote 0x…>"
ADDRESS = re.compile(r"0x[0-9a-f]+")


def outline(bt):
    """py-bt's entries, as libpython prints them, with addresses elided: a Python frame as its
    (function, file, line), a native line as its text."""
    out = []
    for line in bt[bt.index("Traceback (most recent call first):"):].splitlines()[1:]:
        frame = traceback_frames(line)
        if frame:
            out += frame
        elif line.startswith("  ") and not line.startswith("    "):
            out.append(ADDRESS.sub("0x…", line.strip()))
    return out


@pytest.mark.parametrize("source", ["live", "core"])
@pytest.mark.parametrize("interp", MEMORY_ONLY_INTERPS, ids=lambda i: i.id)
def test_called_c_function_and_py_up(interp, source):
    assert len(MEMORY_ONLY_INTERPS) == len(MEMORY_ONLY)
    with harness.Scenario(interp, "cfunction_call") as sc:
        where = {"core": sc.make_core()} if source == "core" else {"pid": sc.pid}
        out, _ = run_gdb(interp, "py-bt", "echo @@FULL@@\\n", "py-bt-full", "echo @@UP@@\\n", "py-up",
                         "py-print seconds", **where)
        bt, rest = out.split("@@FULL@@")
        full, up = rest.split("@@UP@@")
        frames = sc.truth["threads"][0]["frames"]
        lines = bt[bt.index("Traceback (most recent call first):"):].splitlines()
        # The C function comes first, then the Python frames as the truth has them.
        assert CALL_LINE.match(lines[1]), bt
        assert traceback_frames(bt) == expected(frames)
        full_lines = full.strip().splitlines()
        assert FULL_CALL_LINE.match(full_lines[0]), full
        assert "in call_c (seconds=3600)" in full_lines[1], full
        # From the C frames below, py-up selects the innermost Python frame (as libpython).
        innermost = frames[0]
        assert re.search(r"#\d+ Frame 0x[0-9a-f]+, for file %s, line %d, in call_c \(seconds=3600\)"
                         % (re.escape(innermost["file"]), innermost["line"]), up), up
        assert "local 'seconds' = 3600" in up


@pytest.mark.parametrize("source", ["live", "core"])
@pytest.mark.parametrize("interp", MEMORY_ONLY_INTERPS, ids=lambda i: i.id)
def test_method_wrapper(interp, source):
    """libpython's `<method-wrapper '__init__' of MyList object at 0x…>` between the frame a
    method-wrapper's slot runs and the frame calling it; named without `wrapper_call`'s
    symbol, by the C functions a native frame runs."""
    with harness.Scenario(interp, "wrapper_call") as sc:
        where = {"core": sc.make_core()} if source == "core" else {"pid": sc.pid}
        out, _ = run_gdb(interp, "py-bt", **where)
        f = expected(sc.truth["threads"][0]["frames"])
        assert [x[0] for x in f] == ["items", f[1][0], "main", "<module>"], f
        assert outline(out) == [SLEEP, f[0], "<method-wrapper '__init__' of MyList object at 0x…>", *f[1:]], out

"""`--native` between two Python frames: the interpreter's call plumbing is hidden, the C
functions doing the program's work stay (tests/scenarios/native_builtins.py: `sorted` with a
`functools.partial` key whose function subscripts a dict subclass with `__missing__`).

With symbols (pyenv 3.12, 3.13) the frames are compared one by one, live and from a gcore
core, with `pystack remote|core --native`, an independent reader. Without symbols (Debian's
stripped 3.11, a stripped copy of pyenv 3.12's libpython) the frame running the called builtin
is named from its `PyMethodDef`, checked against the builtin's own address. gdb's `bt` with
pyunwind's frame filter shows the same native frames as `--native`.
"""

import json
import os
import re
import sys

import pytest

from harness import Scenario, cli_path, interpreters, repo_root, run

TIMEOUT = 120
PYSTACK = os.path.join(os.path.dirname(sys.executable), "pystack")
WITH_SYMBOLS = ("pyenv-3.12", "pyenv-3.13")
STRIPPED = ("debian-3.11", "pyenv-3.12-stripped")

# Where our rule and pystack's name rule (pystack/types.py `frame_type`) part, by design:
# - pystack hides every symbol containing "vectorcall"; a type's own vectorcall is the builtin
#   being called, which we keep: `partial_vectorcall` (functools.partial,
#   Modules/_functoolsmodule.c), `list_vectorcall` (`list(...)`, Objects/listobject.c);
# - pystack hides `slot_tp_call` only of the type slots that call a class's Python dunder
#   (Objects/typeobject.c `slot_*`); we hide them all (`slot_mp_subscript` here).
OURS_ONLY = {"partial_vectorcall", "list_vectorcall"}
PYSTACK_ONLY = re.compile(r"slot_")


def _interp(interp_id):
    for i in interpreters():
        if i.id == interp_id:
            return i
    raise AssertionError("no interpreter %s in the test matrix" % interp_id)


def _json(cmd):
    rc, out, err = run(cmd, TIMEOUT)
    assert rc == 0, "%s failed:\n%s" % (" ".join(map(str, cmd)), err)
    return json.loads(out)


def on(ids):
    """Run a test on the stops (live and core) of these interpreters, shared by the module."""
    return pytest.mark.parametrize("stop", ids, indirect=True)


def _debug_files(interp):
    """The CLI's separate debug files: the interpreter's own, else none. Debian's python3.11-dbg
    may be installed on this machine (make bench): hidden, as a user without it has none."""
    return ["--debug-file-directory", interp.debug_dir or "/nonexistent"]


@pytest.fixture(scope="module")
def stop(request):
    interp = _interp(request.param)
    with Scenario(interp, "native_builtins") as sc:
        live = _json([cli_path(), "pid", sc.pid, "--native", "--json"] + _debug_files(interp))
        pystack_live = None
        if request.param in WITH_SYMBOLS:
            rc, pystack_live, err = run([PYSTACK, "remote", sc.pid, "--native"], TIMEOUT)
            assert rc == 0, "pystack failed:\n%s\n%s" % (pystack_live, err)
        core = sc.make_core()
        yield {
            "interp": interp,
            "sc": sc,
            "core": core,
            "live": live,
            "pystack_live": pystack_live,
            "core_report": _json([cli_path(), "core", core, "--native", "--json"] + _debug_files(interp)),
        }


def _between(items, is_python):
    """The items from the innermost to the outermost Python frame, both included."""
    py = [i for i, x in enumerate(items) if is_python(x)]
    assert py, items
    return items[py[0]:py[-1] + 1]


def _base(name):
    return None if name is None else name.split("@")[0].split(".")[0]


def _ours(report):
    """The main thread's frames between its Python frames, innermost first: ("py", file,
    line) and ("c", function, source file name, line, inlined)."""
    frames = _between(report["threads"][0]["frames"], lambda f: f["kind"] == "python")
    out = []
    for f in frames:
        if f["kind"] == "python":
            out.append(("py", os.path.basename(f["file"]), f["line"]))
        else:
            out.append(("c", _base(f.get("function")), os.path.basename(f.get("file") or ""),
                        f.get("line"), bool(f.get("inlined"))))
    return out


def _pystack(text, tid):
    """pystack's frames of thread `tid`, in the same shape, innermost first."""
    lines, cur = [], None
    for line in text.splitlines():
        m = re.match(r"Traceback for thread (\d+)", line)
        if m:
            cur = int(m.group(1))
            continue
        if cur != tid:
            continue
        m = re.match(r'\s+\(Python\) File "([^"]*)", line (\d+), in ', line)
        if m:
            lines.append(("py", os.path.basename(m.group(1)), int(m.group(2))))
            continue
        m = re.match(r'\s+\(C\) File "([^"]*)", line (\d+), in (\S+)( \(inlined\))? \((.*)\)$', line)
        if m:
            lines.append(("c", _base(m.group(3)), os.path.basename(m.group(1)), int(m.group(2)),
                          bool(m.group(4))))
    lines.reverse()
    return _between(lines, lambda x: x[0] == "py")


@on(WITH_SYMBOLS)
@pytest.mark.parametrize("where", ["core", "live"])
def test_frames_match_pystack(stop, where):
    """Between the Python frames, our native frames are pystack's, one by one: name, source
    file and line, inlined or not (but for OURS_ONLY and PYSTACK_ONLY)."""
    assert os.access(PYSTACK, os.X_OK), "pystack missing from the test venv (tools/test-env.sh)"
    if where == "core":
        rc, text, err = run([PYSTACK, "core", stop["core"], stop["interp"].exe, "--native"], TIMEOUT)
        assert rc == 0, "pystack failed:\n%s\n%s" % (text, err)
        ours = _ours(stop["core_report"])
    else:
        text, ours = stop["pystack_live"], _ours(stop["live"])
    theirs = _pystack(text, stop["sc"].pid)
    # The differences are there, as described; nothing else differs.
    assert [x[1] for x in ours if x[0] == "c" and x[1] in OURS_ONLY] == ["partial_vectorcall"], ours
    assert [x[1] for x in theirs if x[0] == "c" and PYSTACK_ONLY.match(x[1])] == ["slot_mp_subscript"], theirs
    ours = [x for x in ours if not (x[0] == "c" and x[1] in OURS_ONLY)]
    theirs = [x for x in theirs if not (x[0] == "c" and PYSTACK_ONLY.match(x[1]))]
    assert ours == theirs, "\nours:    %s\npystack: %s" % (ours, theirs)
    names = [x[1] for x in ours if x[0] == "c"]
    assert names == ["dict_subscript", "list_sort_impl", "list_sort", "builtin_sorted"], ours


@on(WITH_SYMBOLS + STRIPPED)
def test_live_matches_core(stop):
    strip = lambda r: [(f["kind"], f.get("function"), f.get("line"), f.get("address"))
                       for f in r["threads"][0]["frames"]]
    assert strip(stop["live"]) == strip(stop["core_report"])


def _sorted_entry(interp):
    """Where `sorted`'s C function starts, independently of pyunwind: (module file name,
    [start, end) as offsets in it when known by symbol, else the absolute `ml_meth`)."""
    if interp.id == "pyenv-3.12-stripped":
        # The same build with its symbols: builtin_sorted's range in the unstripped file.
        lib = _interp("pyenv-3.12").libpython
        rc, out, err = run(["nm", "-S", "--defined-only", lib], TIMEOUT)
        assert rc == 0, err
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 4 and parts[3] == "builtin_sorted":
                start, size = int(parts[0], 16), int(parts[1], 16)
                return "libpython3.12.so.1.0", (start, start + size)
        raise AssertionError("no builtin_sorted in %s" % lib)
    # Debian's executable is not position-independent: `sorted`'s PyMethodDef (`m_ml` after
    # the 16-byte object header, Include/cpython/methodobject.h) gives `ml_meth` (second field,
    # Include/methodobject.h) at the address every process of it uses.
    code = ("import ctypes; ml = ctypes.c_void_p.from_address(id(sorted) + 16).value; "
            "print(ctypes.c_void_p.from_address(ml + 8).value)")
    rc, out, err = run([interp.exe, "-c", code], TIMEOUT)
    assert rc == 0, err
    return "python3.11", int(out)


@on(STRIPPED)
@pytest.mark.parametrize("where", ["core", "live"])
def test_stripped_builds_name_the_builtin(stop, where):
    """Without symbols the plumbing and the builtins' helpers cannot be told apart: between
    `drive` and `keyfunc` one frame stays, the one running `sorted`, named from its
    PyMethodDef; between `keyfunc` and `__missing__` none (dict_subscript is called by a type
    slot, not by a Python frame)."""
    report = stop["core_report"] if where == "core" else stop["live"]
    frames = _between(report["threads"][0]["frames"], lambda f: f["kind"] == "python")
    shape = [f.get("function") if f["kind"] == "python" else "C " + str(f.get("function"))
             for f in frames]
    assert shape == ["Missing.__missing__" if stop["interp"].minor >= 11 else "__missing__",
                     "keyfunc", "C sorted (builtin)", "drive", "main", "<module>"], shape
    f = frames[2]
    module, where_fn = _sorted_entry(stop["interp"])
    assert f["module"] == module, f
    if isinstance(where_fn, tuple):
        assert where_fn[0] <= f["offset"] < where_fn[1], (f, where_fn)
    else:
        # Its return address lies in the function: past its entry, within 64 KiB.
        assert 0 < f["address"] - where_fn < 1 << 16, (f, hex(where_fn))


@on(WITH_SYMBOLS + STRIPPED)
def test_text_names_the_builtin(stop):
    rc, out, err = run([cli_path(), "core", stop["core"], "--native"] + _debug_files(stop["interp"]),
                       TIMEOUT)
    assert rc == 0, err
    want = "sorted (builtin)" if stop["interp"].id in STRIPPED else "builtin_sorted"
    assert re.search(r"\(C\) 0x[0-9a-f]+ %s \(" % re.escape(want), out), out


# What gdb's `bt` shows through its frame filters (pyunwind's among them): `PY` for a Python
# frame, `C pc` for a native frame on the stack (not an inlined call, not a tail call).
FILTERED_SCRIPT = r'''
import gdb
import gdb.frames
def show(d):
    f = d.inferior_frame()
    if str(d.filename() or "").endswith(".py"):
        print("PY")
    elif f.type() not in (gdb.INLINE_FRAME, gdb.TAILCALL_FRAME):
        print("C %#x" % f.pc())
    for e in d.elided() or []:
        show(e)
for d in gdb.frames.execute_frame_filters(gdb.newest_frame(), 0, -1) or []:
    show(d)
'''


@on(WITH_SYMBOLS + STRIPPED)
def test_gdb_bt_shows_the_same_frames(stop):
    """gdb's `bt` with pyunwind's frame filter keeps, between the Python frames, the native
    frames `--native` keeps: the one rule, with and without symbols."""
    interp = stop["interp"]
    script = os.path.join(stop["sc"].tmpdir, "filtered.py")
    with open(script, "w") as f:
        f.write(FILTERED_SCRIPT)
    cmd = ["gdb", "-nx", "-batch", "-iex", "set debuginfod enabled off",
           "-iex", "set debug-file-directory %s" % _debug_files(interp)[1], "-x",
           str(repo_root() / "gdb-scripts" / "pyunwind-gdb.py"), "-ex", "source %s" % script,
           interp.exe, stop["core"]]
    rc, out, err = run(cmd, TIMEOUT, env=dict(os.environ, **interp.env))
    assert rc == 0, "gdb failed (%d):\n%s\n%s" % (rc, out, err)
    assert "Traceback (most recent call last)" not in out + err, out + err
    lines = [l.split() for l in out.splitlines() if l == "PY" or l.startswith("C ")]
    shown = _between(lines, lambda l: l[0] == "PY")
    frames = _between(stop["core_report"]["threads"][0]["frames"], lambda f: f["kind"] == "python")
    ours = [["PY"] if f["kind"] == "python" else ["C", "%#x" % f["address"]]
            for f in frames if f["kind"] == "python" or not f.get("inlined")]
    assert shown == ours, "gdb:  %s\nours: %s" % (shown, ours)


@on(STRIPPED)
def test_gdb_bt_names_the_builtin_without_symbols(stop):
    """gdb has no symbol for the frame running `sorted` on a stripped build: `bt` names it as
    the CLI does, from the builtin's PyMethodDef (`sorted (builtin)`), once."""
    interp = stop["interp"]
    cmd = ["gdb", "-nx", "-batch", "-iex", "set debuginfod enabled off", "-iex",
           "set debug-file-directory /nonexistent", "-x",
           str(repo_root() / "gdb-scripts" / "pyunwind-gdb.py"), "-ex", "bt", interp.exe,
           stop["core"]]
    rc, out, err = run(cmd, TIMEOUT, env=dict(os.environ, **interp.env))
    assert rc == 0, "gdb failed (%d):\n%s\n%s" % (rc, out, err)
    named = [l for l in out.splitlines() if re.match(r"#\d+\s+0x[0-9a-f]+ in sorted \(builtin\) \(", l)]
    assert len(named) == 1, out


@pytest.fixture(scope="module")
def mix(request):
    interp = _interp(request.param)
    with Scenario(interp, "native_mix") as sc:
        core = sc.make_core()
        rc, text, err = run([PYSTACK, "core", core, interp.exe, "--native"], TIMEOUT)
        assert rc == 0, "pystack failed:\n%s\n%s" % (text, err)
        yield _json([cli_path(), "core", core, "--native", "--json"]), text


def _unnamed_as_pystack(frames):
    """Our frames with pystack's spelling of what is unknown: `???` for a function without a
    symbol or a file without DWARF, line 0."""
    return [x if x[0] == "py" else ("c", x[1] or "???", x[2] or "???", x[3] or 0, x[4])
            for x in frames]


@pytest.mark.parametrize("mix", WITH_SYMBOLS, indirect=True)
def test_native_mix_matches_pystack(mix):
    """tests/scenarios/native_mix.py (ctypes callbacks from libc's qsort, a signal handler
    run by `signal.raise_signal`, `map` under a `sorted` key; two blocked workers): every
    thread's frames between its Python frames are pystack's, but for OURS_ONLY and the name
    of the kernel's signal return trampoline (`__restore_rt`, which pystack names from glibc;
    gdb finds no symbol there either, test_native.py checks ours against gdb's)."""
    report, text = mix
    for t in report["threads"]:
        ours = [x for x in _unnamed_as_pystack(_ours({"threads": [t]}))
                if not (x[0] == "c" and x[1] in OURS_ONLY)]
        # Without a symbol pystack gives the library as the file.
        theirs = [("c", "???", "???", 0, x[4]) if x[0] == "c" and x[1] in ("???", "__restore_rt")
                  else x for x in _pystack(text, t["native_id"])]
        assert ours == theirs, "\nours:    %s\npystack: %s" % (ours, theirs)

"""`--native` between two Python frames: the interpreter's call plumbing is hidden, the C
functions doing the program's work stay (tests/scenarios/native_builtins.py: `sorted` with a
`functools.partial` key whose function subscripts a dict subclass with `__missing__`).

With symbols (pyenv 3.12, 3.13) the frames are compared one by one, live and from a gcore
core, with `pystack remote|core --native`, an independent reader. Without symbols (Debian's
stripped 3.11, a stripped copy of pyenv 3.12's libpython) the frame running the called builtin
is named from its `PyMethodDef`, checked against the builtin's own address. gdb's `bt` with
pyunwind's frame filter shows the same native frames as `--native`.
"""

import copy
import json
import os
import re
import sys

import pytest

from harness import Scenario, cli_path, gdb_argv, interpreters, repo_root, run

TIMEOUT = 120
PYSTACK = os.path.join(os.path.dirname(sys.executable), "pystack")
WITH_SYMBOLS = ("pyenv-3.12", "pyenv-3.13")
STRIPPED = ("debian-3.11", "pyenv-3.12-stripped")

# Where our rule and pystack's name rule (pystack/types.py `frame_type`) part, by design:
# pystack hides every symbol containing "vectorcall", and every one starting with `_Py`. A
# type's own vectorcall is the builtin being called, which we keep: `partial_vectorcall`
# (functools.partial, Modules/_functoolsmodule.c), `list_vectorcall` (`list(...)`,
# Objects/listobject.c); and `_PyList_Extend` (3.13, Objects/listobject.c) is the work of
# `PySequence_List`, not call plumbing.
OURS_ONLY = {"partial_vectorcall", "list_vectorcall", "_PyList_Extend"}


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


def _pystack_threads(text):
    """pystack's frames of every thread it shows, in the same shape, innermost first:
    {native id: frames}."""
    threads, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"Traceback for thread (\d+)", line)
        if m:
            assert int(m.group(1)) not in threads, "thread %s twice:\n%s" % (m.group(1), text)
            cur = threads[int(m.group(1))] = []
            continue
        if cur is None:
            continue
        m = re.match(r'\s+\(Python\) File "([^"]*)", line (\d+), in ', line)
        if m:
            cur.append(("py", os.path.basename(m.group(1)), int(m.group(2))))
            continue
        m = re.match(r'\s+\(C\) File "([^"]*)", line (\d+), in (\S+)( \(inlined\))? \((.*)\)$', line)
        if m:
            cur.append(("c", _base(m.group(3)), os.path.basename(m.group(1)), int(m.group(2)),
                        bool(m.group(4))))
    for frames in threads.values():
        frames.reverse()
    return threads


def check_same_threads(report, theirs, reference):
    """The report's threads are exactly the reference's (by native id): a thread either side
    drops fails, not only a frame of a thread both show."""
    ours = sorted(t["native_id"] for t in report["threads"])
    assert len(set(ours)) == len(ours), ("a thread twice", ours)
    assert ours == sorted(theirs), "threads: ours %s, %s %s" % (ours, reference, sorted(theirs))


def check_matches_pystack(report, text, main):
    """Every thread pystack shows is ours and ours are pystack's; between each thread's Python
    frames, our native frames are pystack's, one by one: name, source file and line, inlined
    or not (but for OURS_ONLY, at its exact place on thread `main`, the one that runs
    native_builtins.py's calls)."""
    pystack = _pystack_threads(text)
    check_same_threads(report, pystack, "pystack")
    for t in report["threads"]:
        ours = _ours({"threads": [t]})
        theirs = _between(pystack[t["native_id"]], lambda x: x[0] == "py")
        if t["native_id"] == main:
            # The difference is there, as described; nothing else differs.
            assert [x[1] for x in ours if x[0] == "c" and x[1] in OURS_ONLY] == [
                "partial_vectorcall"], ours
        ours = [x for x in ours if not (x[0] == "c" and x[1] in OURS_ONLY)]
        assert ours == theirs, "\nthread %d\nours:    %s\npystack: %s" % (
            t["native_id"], ours, theirs)
        if t["native_id"] == main:
            names = [x[1] for x in ours if x[0] == "c"]
            assert names == ["dict_subscript", "slot_mp_subscript", "list_sort_impl",
                             "list_sort", "builtin_sorted"], ours


def _pystack_text(stop, where):
    if where == "live":
        return stop["pystack_live"]
    rc, text, err = run([PYSTACK, "core", stop["core"], stop["interp"].exe, "--native"], TIMEOUT)
    assert rc == 0, "pystack failed:\n%s\n%s" % (text, err)
    return text


@on(WITH_SYMBOLS)
@pytest.mark.parametrize("where", ["core", "live"])
def test_frames_match_pystack(stop, where):
    """Our threads are pystack's; between the Python frames, our native frames are pystack's,
    one by one (check_matches_pystack)."""
    assert os.access(PYSTACK, os.X_OK), "pystack missing from the test venv (tools/test-env.sh)"
    report = stop["core_report"] if where == "core" else stop["live"]
    check_matches_pystack(report, _pystack_text(stop, where), stop["sc"].pid)


@on(WITH_SYMBOLS + STRIPPED)
def test_live_matches_core(stop):
    strip = lambda r: [(f["kind"], f.get("function"), f.get("line"), f.get("address"))
                       for f in r["threads"][0]["frames"]]
    assert strip(stop["live"]) == strip(stop["core_report"])


def _fde_ranges(path):
    """[start, end) of each FDE in the file's CFI, as readelf decodes it: the extent the
    compiler gave each function's code (its out-of-line `.cold` part, if any, has an FDE of
    its own). A stripped file keeps its .eh_frame: it is needed to unwind. Only the file's own
    sections: readelf otherwise follows its debuglink and fails (exit 1, a warning per path
    tried) when a -dbg package holds no file under that name."""
    rc, out, err = run(["readelf", "--debug-dump=frames", "--debug-dump=no-follow-links", path],
                       TIMEOUT)
    assert rc == 0, err
    ranges = [(int(a, 16), int(b, 16))
              for a, b in re.findall(r" FDE cie=[0-9a-f]+ pc=([0-9a-f]+)\.\.([0-9a-f]+)", out)]
    assert ranges, "no FDE in %s" % path
    return ranges


def _fde_at(path, start):
    """The [start, end) of the FDE that begins exactly at `start` (a function's entry)."""
    found = [r for r in _fde_ranges(path) if r[0] == start]
    assert len(found) == 1, "%s: FDEs starting at %#x: %s" % (path, start, found)
    return found[0]


def _sorted_bounds(interp):
    """Where `sorted`'s C function (builtin_sorted) lies, independently of pyunwind: (module
    file name, [start, end) as link-time addresses in it, the `offset` of a frame).

    With a symbol table (the unstripped copy of the stripped pyenv 3.12): the symbol's value
    and size (`nm -S`); the FDE that starts there ends where the symbol does (checked), which
    makes it the bound where there is no symbol. Debian's python3.11 has no symbol table
    (python3.11-dbg is not installed for the tests): the function starts at `sorted`'s
    `ml_meth`, and ends where its FDE in the executable's .eh_frame ends."""
    if interp.id == "pyenv-3.12-stripped":
        lib = _interp("pyenv-3.12").libpython
        rc, out, err = run(["nm", "-S", "--defined-only", lib], TIMEOUT)
        assert rc == 0, err
        found = [(int(p[0], 16), int(p[0], 16) + int(p[1], 16))
                 for p in map(str.split, out.splitlines())
                 if len(p) == 4 and p[3] == "builtin_sorted"]
        assert len(found) == 1, "builtin_sorted in %s: %s" % (lib, found)
        assert _fde_at(lib, found[0][0]) == found[0], (found, lib)
        return "libpython3.12.so.1.0", found[0]
    # Debian's executable is not position-independent: `sorted`'s PyMethodDef (`m_ml` after
    # the 16-byte object header, Include/cpython/methodobject.h) gives `ml_meth` (second field,
    # Include/methodobject.h) at the address every process of it uses, its link-time address.
    code = ("import ctypes; ml = ctypes.c_void_p.from_address(id(sorted) + 16).value; "
            "print(ctypes.c_void_p.from_address(ml + 8).value)")
    rc, out, err = run([interp.exe, "-c", code], TIMEOUT)
    assert rc == 0, err
    return "python3.11", _fde_at(os.path.realpath(interp.exe), int(out))


def check_names_the_builtin(report, interp, bounds):
    """Without symbols the plumbing and the builtins' helpers cannot be told apart: between
    `drive` and `keyfunc` one frame stays, the one running `sorted`, named from its
    PyMethodDef, its return address inside builtin_sorted (`bounds`, from _sorted_bounds);
    between `keyfunc` and `__missing__` none (dict_subscript is called by a type slot, not
    by a Python frame)."""
    frames = _between(report["threads"][0]["frames"], lambda f: f["kind"] == "python")
    shape = [f.get("function") if f["kind"] == "python" else "C " + str(f.get("function"))
             for f in frames]
    assert shape == ["Missing.__missing__" if interp.minor >= 11 else "__missing__",
                     "keyfunc", "C sorted (builtin)", "drive", "main", "<module>"], shape
    f = frames[2]
    module, (start, end) = bounds
    assert f["module"] == module, f
    # A return address: past the function's entry, before its end.
    assert start < f["offset"] < end, (f, hex(start), hex(end))


@on(STRIPPED)
@pytest.mark.parametrize("where", ["core", "live"])
def test_stripped_builds_name_the_builtin(stop, where):
    """check_names_the_builtin, live and from the core."""
    report = stop["core_report"] if where == "core" else stop["live"]
    check_names_the_builtin(report, stop["interp"], _sorted_bounds(stop["interp"]))


@on(STRIPPED)
def test_builtin_check_fails_outside_builtin_sorted(stop):
    """check_names_the_builtin fails on a copy of the core's report whose `sorted` frame is
    moved to builtin_sorted's end (inside the 64 KiB past `ml_meth` an earlier check
    accepted) or to its entry (no return address)."""
    interp = stop["interp"]
    bounds = _sorted_bounds(interp)
    check_names_the_builtin(stop["core_report"], interp, bounds)
    start, end = bounds[1]
    for moved in (end, start):
        broken = copy.deepcopy(stop["core_report"])
        f = _between(broken["threads"][0]["frames"], lambda f: f["kind"] == "python")[2]
        f["address"] += moved - f["offset"]
        f["offset"] = moved
        assert 0 <= moved - start < 1 << 16
        with pytest.raises(AssertionError):
            check_names_the_builtin(broken, interp, bounds)


def _drop_frame(report, function):
    frames = report["threads"][0]["frames"]
    (i,) = [k for k, f in enumerate(frames) if _base(f.get("function")) == function]
    del frames[i]


def _move_line(report, function):
    (f,) = [f for f in report["threads"][0]["frames"] if _base(f.get("function")) == function]
    f["line"] += 1


@on(["pyenv-3.12"])
def test_pystack_check_fails_on_broken_reports(stop):
    """check_matches_pystack fails on copies of the core's report with its only thread
    dropped, a native frame dropped (dict_subscript), a C frame's line moved (list_sort_impl)
    or a Python frame's (keyfunc)."""
    text = _pystack_text(stop, "core")
    main = stop["sc"].pid
    check_matches_pystack(stop["core_report"], text, main)
    mutations = [lambda r: r["threads"].clear(), lambda r: _drop_frame(r, "dict_subscript"),
                 lambda r: _move_line(r, "list_sort_impl"), lambda r: _move_line(r, "keyfunc")]
    for mutate in mutations:
        broken = copy.deepcopy(stop["core_report"])
        mutate(broken)
        with pytest.raises(AssertionError):
            check_matches_pystack(broken, text, main)


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
    cmd = [*gdb_argv(), "-nx", "-batch", "-iex", "set debuginfod enabled off",
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
    cmd = [*gdb_argv(), "-nx", "-batch", "-iex", "set debuginfod enabled off", "-iex",
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


def check_mix_matches_pystack(report, text):
    """Every thread pystack shows is ours and ours are pystack's; between each thread's Python
    frames, our frames are pystack's, but for OURS_ONLY and the name of the kernel's signal
    return trampoline (`__restore_rt`, which pystack names from glibc; gdb finds no symbol
    there either, test_native.py checks ours against gdb's)."""
    pystack = _pystack_threads(text)
    check_same_threads(report, pystack, "pystack")
    for t in report["threads"]:
        ours = [x for x in _unnamed_as_pystack(_ours({"threads": [t]}))
                if not (x[0] == "c" and x[1] in OURS_ONLY)]
        # Without a symbol pystack gives the library as the file.
        theirs = [("c", "???", "???", 0, x[4]) if x[0] == "c" and x[1] in ("???", "__restore_rt")
                  else x for x in _between(pystack[t["native_id"]], lambda x: x[0] == "py")]
        assert ours == theirs, "\nthread %d\nours:    %s\npystack: %s" % (
            t["native_id"], ours, theirs)


@pytest.mark.parametrize("mix", WITH_SYMBOLS, indirect=True)
def test_native_mix_matches_pystack(mix):
    """tests/scenarios/native_mix.py (ctypes callbacks from libc's qsort, a signal handler
    run by `signal.raise_signal`, `map` under a `sorted` key; two blocked workers): the
    threads are pystack's, each with pystack's frames (check_mix_matches_pystack)."""
    report, text = mix
    check_mix_matches_pystack(report, text)


@pytest.mark.parametrize("mix", ["pyenv-3.12"], indirect=True)
def test_mix_check_fails_on_broken_reports(mix):
    """check_mix_matches_pystack fails on copies of the report with a thread dropped (each in
    turn), a thread's native id changed, or the main thread's innermost Python line moved."""
    report, text = mix
    check_mix_matches_pystack(report, text)
    assert len(report["threads"]) == 3, report["threads"]
    brokens = []
    for i in range(len(report["threads"])):
        broken = copy.deepcopy(report)
        del broken["threads"][i]
        brokens.append(broken)
    broken = copy.deepcopy(report)
    broken["threads"][1]["native_id"] += 1
    brokens.append(broken)
    broken = copy.deepcopy(report)
    next(f for f in broken["threads"][0]["frames"] if f["kind"] == "python")["line"] += 1
    brokens.append(broken)
    for broken in brokens:
        with pytest.raises(AssertionError):
            check_mix_matches_pystack(broken, text)


@pytest.fixture(scope="module")
def gens(request):
    """tests/scenarios/native_generators.py stopped: our report and pystack's text, live and
    from a gcore core."""
    interp = _interp(request.param)
    with Scenario(interp, "native_generators") as sc:
        out = {"interp": interp, "sc": sc}
        out["live"] = _json([cli_path(), "pid", sc.pid, "--native", "--json"] + _debug_files(interp))
        if request.param in WITH_SYMBOLS:
            rc, out["pystack_live"], err = run([PYSTACK, "remote", sc.pid, "--native"], TIMEOUT)
            assert rc == 0, "pystack failed:\n%s" % err
        core = sc.make_core()
        out["core"] = _json([cli_path(), "core", core, "--native", "--json"] + _debug_files(interp))
        if request.param in WITH_SYMBOLS:
            rc, out["pystack_core"], err = run([PYSTACK, "core", core, interp.exe, "--native"],
                                               TIMEOUT)
            assert rc == 0, "pystack failed:\n%s" % err
        yield out


# What resumes Python code from C in native_generators.py, innermost first, as CPython names
# it (3.12, 3.13: Objects/genobject.c, Python/bltinmodule.c): the C iterators over Python
# functions, `sorted` and `next()` over a generator (its `tp_iternext`), a coroutine's `send`.
GENERATOR_CALLERS = ["map_next", "filter_next", "gen_iternext", "builtin_sorted", "gen_iternext",
                     "builtin_next", "gen_send"]


# Frames whose line pystack takes from elsewhere: at `next()`'s call of the iterator, the line
# table's row is `Py_TYPE`'s, a header function inlined there with no inlined-subroutine entry
# of its own. gdb's `bt` and ours give that row (3.12: `builtin_next_impl (...) at
# ./Include/object.h:220`, inlined; 3.13: `builtin_next (...) at ./Include/object.h:336`);
# pystack (libdw's scopes) gives the line in bltinmodule.c. Those frames are compared by name
# and inlining only.
PYSTACK_LINE_DIFFERS = {"builtin_next_impl", "builtin_next"}


def _name_only(frames):
    return [x[:2] + (None, None, x[4]) if x[0] == "c" and x[1] in PYSTACK_LINE_DIFFERS else x
            for x in frames]


def check_gens_match_pystack(report, text, main):
    """Every thread pystack shows is ours and ours are pystack's, each with pystack's frames
    between its Python frames (but for OURS_ONLY); on thread `main`, the frames that resume
    Python code from C (GENERATOR_CALLERS) are there in order, each generator's own
    `gen_send_ex2` inlined into it."""
    pystack = _pystack_threads(text)
    check_same_threads(report, pystack, "pystack")
    for t in report["threads"]:
        ours = _name_only([x for x in _ours({"threads": [t]})
                           if not (x[0] == "c" and x[1] in OURS_ONLY)])
        theirs = _name_only(_between(pystack[t["native_id"]], lambda x: x[0] == "py"))
        assert ours == theirs, "\nthread %d\nours:    %s\npystack: %s" % (
            t["native_id"], ours, theirs)
        if t["native_id"] == main:
            outer = [x[1] for x in ours if x[0] == "c" and not x[4]]
            assert [n for n in outer if n in GENERATOR_CALLERS] == GENERATOR_CALLERS, ours
            inlined = [x[1] for x in ours if x[0] == "c" and x[4] and x[1].startswith("gen_")]
            assert inlined == ["gen_send_ex2", "gen_send_ex2", "gen_send_ex2", "gen_send_ex"], ours


def _truth_frames(truth):
    (main,) = truth["threads"]
    return [(f["function"], f["file"], f["line"]) for f in main["frames"]]


def _python_frames(report):
    return [(f["function"], f["file"], f["line"]) for f in report["threads"][0]["frames"]
            if f["kind"] == "python"]


@pytest.mark.parametrize("gens", WITH_SYMBOLS, indirect=True)
@pytest.mark.parametrize("where", ["core", "live"])
def test_generators_match_pystack(gens, where):
    """A generator resumed by `next()` and by `sorted`, a coroutine driven by `send`, `map` and
    `filter` over Python functions: the C frames that resume the Python code stay, and every
    frame between the Python frames is pystack's (check_gens_match_pystack); the Python frames
    are the program's own."""
    report = gens[where]
    check_gens_match_pystack(report, gens["pystack_" + where], gens["sc"].pid)
    truth = _truth_frames(gens["sc"].truth)
    assert _python_frames(report) == truth, (_python_frames(report), truth)


@pytest.mark.parametrize("gens", ["pyenv-3.12"], indirect=True)
def test_generator_check_fails_on_broken_reports(gens):
    """check_gens_match_pystack fails on copies of the core's report with a generator's frame
    dropped (the `gen_iternext` under `sorted`), or its inlined `gen_send_ex2` dropped."""
    text, main = gens["pystack_core"], gens["sc"].pid
    check_gens_match_pystack(gens["core"], text, main)
    for drop in ("gen_iternext", "gen_send_ex2"):
        broken = copy.deepcopy(gens["core"])
        frames = broken["threads"][0]["frames"]
        k = [i for i, f in enumerate(frames) if _base(f.get("function")) == drop][1]
        del frames[k]
        with pytest.raises(AssertionError):
            check_gens_match_pystack(broken, text, main)


@pytest.mark.parametrize("gens", ["debian-3.11"], indirect=True)
@pytest.mark.parametrize("where", ["core", "live"])
def test_stripped_generators_name_the_builtins(gens, where):
    """Without symbols the frames that run `sorted` and `next()` are named from their
    PyMethodDef, between the Python frames that call them and the generator they resume."""
    frames = _between(gens[where]["threads"][0]["frames"], lambda f: f["kind"] == "python")
    shape = [f["function"] if f["kind"] == "python" else "C " + str(f.get("function"))
             for f in frames]
    assert shape == ["leaf", "keep", "item", "numbers.<locals>.<genexpr>", "C sorted (builtin)",
                     "numbers", "C next (builtin)", "by_next", "coro", "drive", "main",
                     "<module>"], shape

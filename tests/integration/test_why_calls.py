"""--why names the call a thread's innermost frame is making (issue 49 item 9), not a callable
that only sits on its value stack (tests/scenarios/why_calls.py): `time.sleep` inside `with
lock:` is a `sleep` wait and `signal.pause()` inside `with rlock:` a `native` wait in
`_signal.pause` (the lock's `__exit__` below the call is the block's, not the call's); libc's
`pause` called through a `ctypes` function pointer is a `native` wait named by the pointer's
name and library, `pause (libc.so.6)`, and so is a C++ library's C entry
(tests/scenarios/why_calls_lib.cpp, built here with g++), whose own C++ function `--native`
names. A Cython function (tests/scenarios/why_calls_cy.pyx, turned into C by the pinned Cython
of tools/calls.sh and built here with gcc for each interpreter) is named by its module and
qualified name; a cffi ABI-mode function pointer by the native frame that runs it (`--native`:
its function and library), and without native frames not at all (`function` null); a
`functools.partial` by what it calls; an `operator.methodcaller` by its C type's `__call__`.
Live and from a gcore core, with and without `--native`, on 3.10 to 3.15 and the
free-threaded 3.13t."""

import os
import re
import shutil
import sys
import tempfile

import pytest

import harness
from test_why_io import INTERPS, SOURCES, by_native_id, cli, report, verdict
from test_why_native import BUILD_TIMEOUT, build_extension

# The C++ function both entries of why_calls_lib.cpp wait under, as --native names it.
CPP_FUNCTION = "calls::park_forever(int)"
LIBRARY = "libpyunwind_calls.so"


def cffi_dir(interp=None):
    """Where tools/calls.sh put cffi for ``interp``'s ABI (default: the test venv's)."""
    if interp is None:
        abi = "cp3%d" % sys.version_info.minor
    else:
        abi = "cp313t" if interp.id == "ft-3.13t" else "cp3%d" % interp.minor
    path = harness.cache_dir() / "calls" / "cffi" / abi
    assert (path / "STAMP").exists(), "no cffi for %s in %s: run tools/calls.sh" % (abi, path)
    return str(path)


def cythonize(directory):
    """why_calls_cy.pyx turned into C in ``directory`` by tools/calls.sh's Cython; the path of
    the C file and the name of the C function `Worker.block` runs (Cython's
    `__pyx_pf_..._Worker_block`, which the Python-callable wrapper calls: the build is not
    optimized, so it keeps a frame of its own)."""
    cython = harness.cache_dir() / "calls" / "cython"
    assert (cython / "STAMP").exists(), "no Cython in %s: run tools/calls.sh" % cython
    out = os.path.join(directory, "why_calls_cy.c")
    rc, _, err = harness.run(
        [sys.executable, "-m", "cython", "-3", str(harness.scenarios_dir() / "why_calls_cy.pyx"),
         "-o", out], BUILD_TIMEOUT, env=dict(os.environ, PYTHONPATH=str(cython)))
    assert rc == 0, "Cython failed:\n%s" % err
    with open(out) as f:
        (function,) = set(re.findall(r"\b(__pyx_pf_\w+_block)\(", f.read()))
    return out, function


def cffi_api_source(directory):
    """The C of a cffi API-mode module, `why_calls_api`, whose `lib.calls_wait` calls
    why_calls_lib.cpp's entry: written in ``directory`` by tools/calls.sh's cffi, run by the
    test venv's Python."""
    out = os.path.join(directory, "why_calls_api.c")
    code = ("import cffi, sys; ffi = cffi.FFI(); ffi.cdef('int calls_wait(int why);');"
            " ffi.set_source('why_calls_api', 'int calls_wait(int why);');"
            " ffi.emit_c_code(sys.argv[1])")
    env = dict(os.environ, PYTHONPATH=cffi_dir())
    rc, _, err = harness.run([sys.executable, "-c", code, out], BUILD_TIMEOUT, env=env)
    assert rc == 0, "cffi failed:\n%s" % err
    return out


def build(interp, directory):
    """The C++ library, the Cython module and the cffi API-mode module for ``interp`` in
    ``directory``; the name of the C function the Cython method runs."""
    rc, out, err = harness.run(
        ["g++", "-shared", "-fPIC", "-O1", "-g",
         str(harness.scenarios_dir() / "why_calls_lib.cpp"),
         "-o", os.path.join(directory, LIBRARY)], BUILD_TIMEOUT)
    assert rc == 0, "building the C++ library failed:\n%s%s" % (out, err)
    source, cython_function = cythonize(directory)
    build_extension(interp, directory, source, "why_calls_cy", "gcc", "-O0")
    # cffi's C asks for the Limited API on its own, which the free-threaded 3.13 has not:
    # build_extension asks for it where it must (sid's 3.14 and 3.15).
    build_extension(interp, directory, cffi_api_source(directory), "why_calls_api", "gcc",
                    "-O0", ["-D_CFFI_NO_LIMITED_API", "-L", directory, "-l" + LIBRARY[3:-3],
                            "-Wl,-rpath," + directory])
    return cython_function


@pytest.fixture(scope="module", params=INTERPS, ids=lambda i: i.id)
def scenario(request):
    directory = tempfile.mkdtemp(prefix="pyunwind-calls-")
    try:
        cython_function = build(request.param, directory)
        env = {"PYUNWIND_CALLS_DIR": directory, "PYUNWIND_CFFI": cffi_dir(request.param)}
        with harness.Scenario(request.param, "why_calls", env=env) as sc:
            sc.core = sc.make_core()
            sc.cython_function = cython_function
            yield sc
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def native(function, native_function=None, on=None, on_type=None):
    return {"kind": "native", "object": on, "type": on_type, "owner": None, "frame": 0,
            "function": function, "native_function": native_function}


SLEEP = {"kind": "sleep", "object": None, "type": None, "owner": None, "frame": 0}


def expected(sc, with_natives):
    """{thread name: its `waiting`}, without or with native frames."""
    library = sc.truth["library"]
    assert library == LIBRARY
    assert sc.truth["cffi_type"] == "_cffi_backend._CDataBase"

    def cpp(function, *on):
        return native(function, CPP_FUNCTION if with_natives else None, *on)
    return {
        "sleeper": SLEEP,
        "pauser": native(sc.truth["pause"]),
        "ctyper": native("pause (libc.so.6)"),
        "cpp_ctyper": cpp("calls_park (%s)" % library),
        "cffier": cpp("calls_wait (%s)" % library if with_natives else None),
        # API mode's `lib.calls_wait`: a builtin bound to the module's `Lib` object.
        "cffi_apier": cpp("%s.calls_wait" % sc.truth["cffi_lib_type"], sc.truth["cffi_lib"],
                          sc.truth["cffi_lib_type"]),
        "cythoner": native(sc.truth["cython"], sc.cython_function if with_natives else None),
        "partialer": SLEEP,
        "caller": native(sc.truth["methodcaller"] + ".__call__"),
    }


@pytest.mark.parametrize("source", SOURCES)
def test_the_call_being_made_is_named(scenario, source):
    sc = scenario
    threads = by_native_id(report(sc, source))
    wrong = {}
    for name, want in expected(sc, False).items():
        t = threads[sc.truth[name]]
        if t["waiting"] != want:
            wrong[name] = t["waiting"]
        assert t["state"] == "syscall", (name, t)
        truth = next(x for x in sc.truth["threads"] if x["name"] == name)["frames"][0]
        assert (t["frames"][0]["function"], t["frames"][0]["line"]) == (
            truth["function"], truth["line"]), (name, t["frames"][0])
    # Every thread's, so that one wrong name does not hide another.
    assert not wrong, wrong


def words(sc, with_natives):
    """{thread name: its verdict line's words}."""
    out = {}
    for name, w in expected(sc, with_natives).items():
        if w["kind"] == "sleep":
            out[name] = "sleeps (time.sleep)"
            continue
        out[name] = "is blocked in native code"
        if w["function"]:
            out[name] += ": " + w["function"]
        if w["native_function"]:
            out[name] += ", in " + w["native_function"]
    return out


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("natives", [False, True], ids=["python", "native"])
def test_verdict_lines(scenario, source, natives):
    sc = scenario
    lines = verdict(cli(sc, source, *(["--native"] if natives else [])))
    want = ['thread %d "%s" %s' % (sc.truth[name], name, w)
            for name, w in words(sc, natives).items()]
    assert [w for w in want if w not in lines] == [], lines
    assert not any("__exit__" in line for line in lines), lines


@pytest.mark.parametrize("source", SOURCES)
def test_native_frames_match_the_call(scenario, source):
    """With native frames the callable is the one whose C function a native frame runs:
    libc's `pause` under the ctypes pointer, `signal_pause` under `_signal.pause`, the C++
    library's entry under the ctypes and cffi pointers, the Cython function's wrapper. Their
    `native_function` is the innermost frame outside the runtimes, ctypes' and cffi's
    plumbing and the interpreter: the C++ library's own function, the Cython module's C
    function; null where that is libc's, under ctypes' plumbing or the interpreter."""
    sc = scenario
    threads = by_native_id(report(sc, source, "--native"))
    wrong = {}
    for name, want in expected(sc, True).items():
        t = threads[sc.truth[name]]
        python = [i for i, f in enumerate(t["frames"]) if f["kind"] == "python"]
        if t["waiting"] != dict(want, frame=python[0]):
            wrong[name] = (t["waiting"], [(f.get("function"), f.get("module"))
                                          for f in t["frames"][:python[0]]])
    assert not wrong, wrong

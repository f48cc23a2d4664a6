"""--why on a thread blocked in native code (issue 37, `waiting` kind `native`): a C++
extension (tests/scenarios/why_native_ext.cpp, built here with g++ against each interpreter's
headers) whose `park(n)` releases the GIL and waits for good in
`std::condition_variable::wait` under `blocker::park(int)`; tests/scenarios/why_native.py calls
it from the thread `parker`. `function` is the C function the Python frame calls, a module's
builtin named by its module and its own name (`pyunwind_blocker.park`, docs/report.md); with
`--native` (live `pid --native`, and from the cores), `native_function` is the extension's own
C++ function, demangled, not libstdc++'s nor libc's. Live, from a gcore core and from the
kernel's core of a second run (killed by SIGABRT), on 3.10 to 3.15 and the free-threaded 3.13t
(the extension is built for its ABI too)."""

import os
import shutil
import tempfile

import pytest

import harness
from test_why_io import (ALL_SOURCES, INTERPS, KernelCore, by_native_id, cli, line_of, report,
                         verdict, view)

BUILD_TIMEOUT = 120
NATIVE_FUNCTION = "blocker::park(int)"
STABLE_ABI_HEADERS = "/usr/include/python3.11"


def build_extension(interp, directory, source="why_native_ext.cpp", name="pyunwind_blocker",
                    compiler="g++", optimize="-O2", extra=()):
    """tests/scenarios/``source`` (why_native_ext.cpp) built with ``compiler`` as
    ``name<EXT_SUFFIX>`` (`pyunwind_blocker`) in ``directory``, for ``interp``, with ``extra``
    (more options: macros, libraries). ``source`` may also be a path."""
    rc, out, err = harness.run(
        [interp.exe, "-c", "import sysconfig; print(sysconfig.get_paths()['include']);"
         " print(sysconfig.get_config_var('EXT_SUFFIX'))"], BUILD_TIMEOUT,
        env=harness.child_env(interp.env))
    assert rc == 0, err
    include, suffix = out.split()
    flags = []
    if not os.path.exists(os.path.join(include, "Python.h")):
        # sid's root (tools/pythons.sh) has no headers of its 3.14 and 3.15 (no
        # libpython3.N-dev): the stable ABI then, against Debian's 3.11 headers
        # (libpython3.11-dev, tools/test-env.sh), which 3.14 and 3.15 load as `.abi3.so`.
        include, suffix = STABLE_ABI_HEADERS, ".abi3.so"
        flags = ["-DPy_LIMITED_API=0x030a0000"]
    src = harness.scenarios_dir() / source
    rc, out, err = harness.run([compiler, "-shared", "-fPIC", optimize, "-g"] + flags
                               + ["-I", include, str(src),
                                  "-o", os.path.join(directory, name + suffix)] + list(extra),
                               BUILD_TIMEOUT)
    assert rc == 0, "building the extension %s failed:\n%s%s" % (src, out, err)


@pytest.fixture(scope="module", params=INTERPS, ids=lambda i: i.id)
def scenario(request):
    directory = tempfile.mkdtemp(prefix="pyunwind-blocker-")
    try:
        build_extension(request.param, directory)
        env = {"PYUNWIND_BLOCKER_DIR": directory}
        # The kernel's core of a second run (killed by SIGABRT).
        kernel = KernelCore(request.param, "why_native", env=env)
        try:
            with harness.Scenario(request.param, "why_native", env=env) as sc:
                sc.core = sc.make_core()
                sc.kernel = kernel
                yield sc
        finally:
            kernel.close()
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def parker(sc, source, *extra):
    return by_native_id(report(sc, source, *extra))[sc.truth["parker"]]


@pytest.mark.parametrize("source", ALL_SOURCES)
def test_blocked_in_native_code(scenario, source):
    sc, source = view(scenario, source)
    t = parker(sc, source)
    assert sc.truth["function"] == "pyunwind_blocker.park"
    assert t["waiting"] == {"kind": "native", "object": None, "type": None, "owner": None,
                            "frame": 0, "function": sc.truth["function"],
                            "native_function": None}, t
    assert t["state"] == "syscall" and t["idle"] is None, t
    assert t["syscall"] == "futex"
    want = next(x for x in sc.truth["threads"] if x["name"] == "parker")["frames"][0]
    assert (t["frames"][0]["function"], t["frames"][0]["line"]) == (want["function"], want["line"])


@pytest.mark.parametrize("source", ALL_SOURCES)
def test_native_names_the_extensions_own_function(scenario, source):
    sc, source = view(scenario, source)
    t = parker(sc, source, "--native")
    w = t["waiting"]
    # `frame`: the index of the innermost Python frame, among native frames now.
    python = [i for i, f in enumerate(t["frames"]) if f["kind"] == "python"]
    assert w == {"kind": "native", "object": None, "type": None, "owner": None,
                 "frame": python[0], "function": sc.truth["function"],
                 "native_function": NATIVE_FUNCTION}, w
    want = NATIVE_ORDER[:-1] if sc.interp.id in INLINED_CALL else NATIVE_ORDER
    assert native_order(t["frames"][:python[0]]) == want, t["frames"][:python[0]]


# The native frames of `park(n)`, innermost first, as native_order() names them: libc's wait
# ending in its entry point (the frames inside it are glibc's own), libstdc++'s wait (when not
# a tail call), the extension's function and its C entry point, then the interpreter's call.
NATIVE_ORDER = ["libc", "pthread_cond_wait", "blocker::park(int)", "ext_park(_object*, _object*)",
                "interpreter"]
# sid's LTO build of 3.14 inlines the call (`cfunction_vectorcall_O`) into the eval loop, whose
# frame the Python frames replace: nothing of the interpreter's is left below them (its 3.15
# keeps a frame of its own there).
INLINED_CALL = ("debian-3.14",)


def native_order(natives):
    """The native frames below the Python one, innermost first, as a list with one entry per
    run: "libc" for libc's frames inside its wait, its entry point and the extension's frames
    by function name, nothing for libstdc++'s, "interpreter" for those after the extension
    (libpython's, or the executable's). A frame in the wrong place shows as an entry
    NATIVE_ORDER does not have at that place."""
    out = []
    for f in natives:
        module = os.path.basename(f.get("module") or "")
        if module.startswith("libc.so"):
            name = "pthread_cond_wait" if f.get("function") == "pthread_cond_wait" else "libc"
        elif module.startswith("libstdc++"):
            continue
        elif module.startswith("pyunwind_blocker"):
            name = f.get("function")
        else:
            name = "interpreter" if "ext_park(_object*, _object*)" in out else module
        if not out or out[-1] != name or name not in ("libc", "interpreter"):
            out.append(name)
    return out


@pytest.mark.parametrize("source", ALL_SOURCES)
def test_verdict_line(scenario, source):
    sc, source = view(scenario, source)
    n = sc.truth["parker"]
    lines = verdict(cli(sc, source, "--native"))
    crashed = sc is scenario.kernel
    if crashed:
        # The kernel's core is of a process killed by SIGABRT: the crash comes first.
        assert lines[0].startswith("Crashed: SIGABRT "), lines
        lines = lines[1:]
    main = sc.truth["threads"][0]["native_id"]
    at = line_of(lines, n, "parker")
    assert lines[at] == 'thread %d "parker" is blocked in native code: %s, in %s' % (
        n, sc.truth["function"], NATIVE_FUNCTION), lines
    # A wait on the outside world comes before a wait with no owner (main on _truth.HELD).
    assert at < line_of(lines, main, "MainThread"), lines
    plain = verdict(cli(sc, source))[crashed:]
    assert plain[line_of(plain, n, "parker")] == (
        'thread %d "parker" is blocked in native code: %s' % (n, sc.truth["function"])), plain

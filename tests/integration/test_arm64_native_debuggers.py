"""gdb and lldb as arm64 programs: Debian's own arm64 debuggers run on this x86-64 machine under
qemu-user, with pyunwind's aarch64 build loaded into their embedded Python, reading qemu's arm64
cores (arm64_harness, the cores of test_arm64's fixture).

- gdb 13.1 (bookworm's `gdb`, embedding python3.11) and lldb 19 (bookworm's `lldb-19`, python3.11),
  from $PYUNWIND_CACHE/arm64/bookworm-debuggers, and lldb 22 (sid's `lldb-22`, python3.14, the
  first with the scripted frame provider), from $PYUNWIND_CACHE/arm64/sid-debuggers
  (tools/arm64.sh, `make arm64`), each run as `qemu-aarch64 -L DEBUGGER_ROOT
  DEBUGGER_ROOT/usr/bin/...`, the scenario's root as the debugger's sysroot.
- pyunwind is the aarch64 wheel (`make wheel`, tools/cross-aarch64.sh), unpacked as pip installs
  it: the debugger sources the gdb or lldb script from the package, which loads the package's
  `_pyunwind.abi3.so` (arm64 code, abi3) beside it. Each session prints which module its Python
  loaded, and on which machine it runs (`aarch64`).
- Checked exactly against each scenario's truth, as test_arm64 and test_lldb_arm64 check
  gdb-multiarch and the host's lldb (their checks, reused): gdb's `py-bt` and `py-bt -a --json`,
  the `bt` frame filter's Python frames in every thread (bookworm's 3.11 and sid's 3.14),
  `py-locals` and `py-up`,
  `py-bt-async --json` and `py-tasks`; lldb 22's `py-bt`, `py-bt -a --json` (memory read
  directly and through lldb), its own `bt` to `_start` through sid's signed return addresses
  and the frame provider's Python frames in `bt`; lldb 19's `py-locals`, `py-list`, `py-up`,
  `py-bt-async --json` and `py-tasks`.

What qemu-user cannot do: it implements no ptrace(2) for its guest (the call fails with ENOSYS),
so a debugger under qemu can neither attach to a process nor run one: gdb says `ptrace: Function
not implemented` for `-p PID` and cannot trace what it runs (`During startup program exited
with code 127`); lldb attaches through lldb-server, which it execs as a process of its own (an
arm64 binary the host cannot exec without a binfmt handler: `execve failed: Exec format error`),
and which would need ptrace too. These debuggers read cores only. (test_arm64 attaches
gdb-multiarch to `qemu-aarch64 -g PORT` for the live case.)
lldb 22 runs on qemu's Neoverse N1 CPU (no pointer authentication; arm64_harness.DEBUGGERS says
why), the other debuggers and every scenario on qemu's default `max` CPU (sid's python3.14 signs
its return addresses there).

Scenarios: bookworm's python3.11 threads, locals and asyncio cores, and sid's python3.14 threads
core (signed return addresses), each made once for the module. A missing debugger, root, wheel
or qemu fails the tests (make arm64, make wheel); nothing is skipped.
"""

import os
import re

import pytest

import arm64_harness
from test_arm64 import check_gdb_bt_all, gdb_json, gdb_with_pyunwind, stop  # noqa: F401
from test_arm64_cross import wheel  # noqa: F401 (the unpacked aarch64 wheel)
from test_asyncio import check_async, check_tree_text
from test_lldb_arm64 import (check_lldb_arm64_asyncio, check_lldb_arm64_core,
                             check_lldb_arm64_locals_list)
from test_stacks import check_report, expected, expected_locals, json_from, traceback_frames

# It needs the aarch64 wheel, which `make integration` builds at the lowest priority: it runs
# after the lldb tests, with test_arm64_cross.py (the aarch64_wheel marker). Minutes with few
# tests: it runs first of those under pytest-xdist (conftest.py).
pytestmark = [pytest.mark.long_file, pytest.mark.aarch64_wheel]

BOOKWORM, SID = "arm64-bookworm-3.11", "arm64-sid-3.14"
# The debugger's Python names the `_pyunwind` it loaded and the machine it runs on.
SHOW_MODULE = ("import sys, platform; "
               "print('@@MODULE@@', sys.modules['_pyunwind'].__file__, platform.machine())")


def on(*ids):
    return pytest.mark.parametrize("stop", ids, indirect=True)


def check_module(out, wheel):
    """The debugger ran as arm64 code and its Python loaded the wheel's module."""
    found = re.findall(r"^@@MODULE@@ (\S+) (\S+)$", out, re.M)
    assert found == [(str(wheel[1] / "pyunwind" / "_pyunwind.abi3.so"), "aarch64")], (found, out)


def gdb(stop, wheel, *commands):
    """bookworm's arm64 gdb under qemu on the core of `stop`, with the wheel's gdb script:
    `commands`, then SHOW_MODULE (checked). Its stdout. A sid core is read from its copy with
    the PAC mask notes (test_arm64.Stop.pac_core): gdb 13 unwinds no signed return address
    without them, natively on arm64 as in gdb-multiarch."""
    core = stop.pac_core() if stop.interp.minor >= 14 else stop.core
    out = gdb_with_pyunwind(stop.root, stop.interp.guest_exe, [core],
                            [*commands, "python " + SHOW_MODULE],
                            gdb=arm64_harness.debugger("gdb"),
                            script=wheel[1] / "pyunwind" / "pyunwind-gdb.py")
    check_module(out, wheel)
    return out


def lldb(name, wheel):
    """run_lldb's arguments for arm64 lldb `name` under qemu with the wheel's lldb script."""
    return {"lldb": arm64_harness.debugger(name),
            "script": wheel[1] / "pyunwind" / "pyunwind_lldb.py",
            "extra": ["script " + SHOW_MODULE]}


def marks(out, *names):
    """{name: what gdb printed after `echo @@NAME@@`, up to the next one}."""
    parts = re.split(r"^@@(%s)@@$" % "|".join(names), out, flags=re.M)
    got = dict(zip(parts[1::2], parts[2::2]))
    assert sorted(got) == sorted(names), (names, out)
    return got


# --- gdb 13 (bookworm) ---------------------------------------------------------------------


@on("%s:threads" % BOOKWORM, "%s:threads" % SID)
def test_gdb_threads(stop, wheel):
    """`py-bt` is the main thread's Python stack; `py-bt -a --json` is every thread of the
    truth; `thread apply all bt` has, through the frame filter, each thread's Python frames in
    gdb's own stack (test_arm64.check_gdb_bt_all)."""
    out = gdb(stop, wheel, "echo @@TEXT@@\\n", "py-bt", "echo @@ALL@@\\n", "py-bt -a --json",
              "thread apply all bt")
    got = marks(out, "TEXT", "ALL")
    assert traceback_frames(got["TEXT"]) == expected(stop.truth["threads"][0]["frames"]), got["TEXT"]
    check_gdb_bt_all(got["ALL"], stop.truth)


@on("%s:locals" % BOOKWORM)
def test_gdb_locals(stop, wheel):
    """`py-locals` shows the stopped frame's locals as the program recorded them, `py-up` its
    caller; `py-bt -a --json` is the truth."""
    out = gdb(stop, wheel, "echo @@LOCALS@@\\n", "py-locals", "echo @@UP@@\\n", "py-up",
              "echo @@JSON@@\\n", "py-bt -a --json")
    got = marks(out, "LOCALS", "UP", "JSON")
    frame = stop.truth["threads"][0]["frames"][0]
    shown = [line.split(" = ", 1) for line in got["LOCALS"].strip().splitlines() if " = " in line]
    assert [(n, r) for n, r in shown] == [(n, r) for n, r, _ in expected_locals(frame)], got["LOCALS"]
    caller = stop.truth["threads"][0]["frames"][1]
    assert "line %d, in %s" % (caller["line"], caller["function"]) in got["UP"], got["UP"]
    check_report(gdb_json(got["JSON"]), stop.truth)


@on("%s:asyncio" % BOOKWORM)
def test_gdb_asyncio(stop, wheel):
    """`py-bt-async --json` is the truth's task graph (every task, edge and frame); `py-tasks`
    prints its tree."""
    out = gdb(stop, wheel, "echo @@JSON@@\\n", "py-bt-async --json", "echo @@TREE@@\\n", "py-tasks")
    got = marks(out, "JSON", "TREE")
    check_async(json_from(got["JSON"]), stop.truth)
    check_tree_text(got["TREE"], stop.truth)


# --- lldb 22 (sid), lldb 19 (bookworm) -------------------------------------------------------


@on("%s:threads" % SID)
def test_lldb22_core_and_provider(stop, wheel):
    """lldb 22 on sid's core (signed return addresses, no PAC mask note): test_lldb_arm64's
    core checks (`py-bt`, `py-bt -a --json` read directly and through lldb, lldb's own `bt`
    to `_start`, the frame provider's Python frames in `bt`)."""
    out, err = check_lldb_arm64_core(stop, 22, **lldb("lldb-22", wheel))
    check_module(out, wheel)


@on("%s:locals" % BOOKWORM)
def test_lldb19_locals(stop, wheel):
    """lldb 19: `py-locals`, `py-list`, `py-up` (test_lldb_arm64's checks)."""
    out, err = check_lldb_arm64_locals_list(stop, **lldb("lldb-19", wheel))
    check_module(out, wheel)


@on("%s:asyncio" % BOOKWORM)
def test_lldb19_asyncio(stop, wheel):
    """lldb 19: `py-bt-async --json` is the truth's task graph, `py-tasks` prints its tree."""
    out, err = check_lldb_arm64_asyncio(stop, **lldb("lldb-19", wheel))
    check_module(out, wheel)


def test_debuggers_are_arm64():
    """Each debugger is an arm64 executable (EM_AARCH64) in its root, not a host program."""
    for name, (root_name, exe) in arm64_harness.DEBUGGERS.items():
        path = os.path.realpath(arm64_harness.root(root_name) / exe)
        with open(path, "rb") as f:
            head = f.read(20)
        assert head[:4] == b"\x7fELF" and int.from_bytes(head[18:20], "little") == \
            arm64_harness.EM_AARCH64, (name, path)

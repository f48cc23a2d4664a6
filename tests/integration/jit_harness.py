"""Test helpers for JIT and trampoline frames: Debian sid's 3.14 and 3.15 (JIT compiled in) and
gdb command lines that load their debug info and the JIT test helper."""

import pathlib

import harness

# tools/pythons.sh puts Debian sid's python3.14/3.15 (JIT compiled in, off unless PYTHON_JIT=1)
# and their -dbg debug files here.
SID_ROOT = harness.pythons_dir() / "debian-sid"
GDB_HELPER = pathlib.Path(__file__).resolve().parent / "jit_gdb_helper.py"
GDB_TIMEOUT_SECONDS = 180


def sid_interps():
    """Debian sid's 3.14 and 3.15 (harness.provisioned_interpreters: HarnessError, a failure,
    never a skip, when one is missing); gdb_cmd gives gdb their debug info."""
    return [i for i in harness.provisioned_interpreters() if i.minor in (14, 15) and not i.debug_dir]


def gdb_cmd(interp, *commands, core=None, pid=None):
    """gdb with pyunwind, the JIT test helper and the sid debug files, so that native frames
    have names (the unwinder itself needs none)."""
    debug_dir = SID_ROOT / "usr" / "lib" / "debug"
    cmd = [*harness.gdb_argv(), "-q", "-batch", "-nx", "-iex", "set auto-load off",
           "-iex", "set debug-file-directory %s" % debug_dir, "-iex", "set debuginfod enabled off",
           "-x", str(harness.repo_root() / "gdb-scripts" / "pyunwind-gdb.py"), "-x", str(GDB_HELPER)]
    for c in commands:
        cmd += ["-ex", c]
    cmd += [interp.exe, core] if core else ["-p", str(pid)]
    return cmd


def run_gdb(interp, *commands, **kw):
    rc, out, err = harness.run(gdb_cmd(interp, *commands, **kw), GDB_TIMEOUT_SECONDS,
                               env=harness.child_env())
    assert rc == 0, "gdb failed (%d):\n%s\n%s" % (rc, out, err)
    assert "Traceback (most recent call last)" not in out + err, out + err
    return out, err


def def_line(script, name):
    """Line of `def NAME(` in a scenario: the co_firstlineno a JIT frame's name shows."""
    lines = harness.scenarios_dir().joinpath(script).read_text(encoding="utf-8").splitlines()
    return 1 + next(i for i, text in enumerate(lines) if text.startswith("def %s(" % name))


def anon_exec_ranges(pid):
    """[start, end) of every anonymous executable mapping of a live process, from
    /proc/PID/maps: where JIT code and perf trampolines live. The tests classify frames with
    it, not with the unwinder's own region list, so that a wrong region list fails them."""
    ranges = []
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            fields = line.split()
            if "x" in fields[1] and len(fields) == 5:  # no path: anonymous
                start, end = (int(x, 16) for x in fields[0].split("-"))
                ranges.append((start, end))
    assert ranges, "no anonymous executable mapping in process %d" % pid
    return ranges


def in_ranges(ranges, pc):
    return pc is not None and any(start <= pc < end for start, end in ranges)

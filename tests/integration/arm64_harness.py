"""arm64 (aarch64) scenarios: Debian's own arm64 interpreters run under qemu-user on this x86-64
machine, stopped at their known point, and the guest core files qemu writes of them.

    for interp in arm64_harness.interpreters():       # bookworm 3.11, sid 3.14, sid 3.15
        with arm64_harness.Scenario(interp, "threads") as s:
            s.truth                                    # as harness.Scenario
            core = s.make_core()                       # qemu_python3.X_<date>-<time>_<pid>.core
            interp.root                                # what `pyunwind core --sysroot` is given

The roots come from tools/arm64.sh (`make arm64`), in $PYUNWIND_CACHE/arm64/{bookworm,sid}: the
packages unpacked, each interpreter run as ``qemu-aarch64 -L ROOT ROOT/usr/bin/python3.X``.
Debian's arm64 debuggers are in roots of their own beside them (``debugger(name)``: the command
that runs one under qemu). A missing root or qemu is a HarnessError, a failure: never a skip.

How a core is made: qemu-user has no gcore and no ptrace of the guest, but it writes an ELF core
of the guest itself (EM_AARCH64; notes NT_PRSTATUS per thread, NT_PRPSINFO, NT_AUXV; no NT_FILE,
no NT_SIGINFO; executable ELF-headed mappings left empty) when a signal whose default action
dumps core kills the guest. The scenario process is qemu itself (its wrapper execs it), so
`kill(pid, SIGABRT)` reaches it; qemu 7.2 queues it for the guest, which takes the default
action: qemu stops every guest thread, writes `qemu_<prog>_<date>-<time>_<pid>.core` into its
current directory (the scenario's temp dir) when RLIMIT_CORE allows, then kills itself with
SIGABRT. (SIGQUIT does not work: qemu 7.2 exits 0 or ignores it.) The host kernel would then
write its own x86-64 core of qemu too (~160 MiB, core_pattern `core`): a directory named `core`
(and `core.PID`) in that temp dir keeps it from being written, and any host core found anyway
is deleted. The process is dead afterwards, so a scenario gives one core.
"""

import dataclasses
import functools
import os
import pathlib
import shutil
import signal
import struct
import subprocess
import time

import harness
from corefile import program_headers

# (test id, root, minor): the arm64 matrix. tools/arm64.sh provides all of them.
ARM64_INTERPRETERS = (
    ("arm64-bookworm-3.11", "bookworm", 11),
    ("arm64-sid-3.14", "sid", 14),
    ("arm64-sid-3.15", "sid", 15),
)
EM_AARCH64 = 183
ET_CORE = 4
NT_PRSTATUS, NT_PRPSINFO, NT_AUXV, NT_FILE = 1, 3, 6, 0x46494C45
# struct elf_prstatus on arm64 (392 bytes): pr_cursig at 12, pr_pid (the thread's TID) at 32,
# pr_reg (x0..x30, sp, pc, pstate) at 112.
PRSTATUS_SIZE = 392
CORE_TIMEOUT_SECONDS = 120.0
# Under qemu, the scenarios start several times slower than natively (sid's 3.14 imports
# asyncio in ~3 s): more than harness.READY_TIMEOUT_SECONDS on a loaded 2-core machine.
READY_TIMEOUT_SECONDS = 120.0


def arm64_dir():
    return harness.cache_dir() / "arm64"


def qemu():
    path = shutil.which("qemu-aarch64")
    if not path:
        raise harness.HarnessError("qemu-aarch64 is missing (run `make arm64`: tools/arm64.sh "
                                   "installs qemu-user)")
    return path


def root(name):
    """The root tools/arm64.sh made, complete (its STAMP file exists), else HarnessError."""
    path = arm64_dir() / name
    if not (path / "STAMP").is_file():
        raise harness.HarnessError("the arm64 root %s is missing (run `make arm64`: "
                                   "tools/arm64.sh)" % path)
    return path


# The arm64 debuggers tools/arm64.sh unpacks: name -> (root, the debugger in it). Each root's
# QEMU_CPU file names the CPU qemu gives its debuggers (sid's lldb 22 runs on a Neoverse N1,
# without pointer authentication: sid builds it with -mbranch-protection=standard, and qemu 7.2
# computes the default `max` CPU's PAC in software, at every call and return: 65 s for
# `lldb-22 --version` there, 8 s on the N1).
DEBUGGERS = {
    "gdb": ("bookworm-debuggers", "usr/bin/gdb"),
    "lldb-19": ("bookworm-debuggers", "usr/bin/lldb-19"),
    "lldb-22": ("sid-debuggers", "usr/bin/lldb-22"),
}


def debugger(name):
    """The command that runs arm64 debugger `name` (DEBUGGERS) under qemu, as a list; a
    HarnessError when its root is missing."""
    root_name, exe = DEBUGGERS[name]
    r = root(root_name)
    if not os.access(r / exe, os.X_OK):
        raise harness.HarnessError("%s missing from %s (run `make arm64`: tools/arm64.sh)"
                                   % (exe, r))
    cpu = (r / "QEMU_CPU").read_text().strip()
    return [qemu(), "-cpu", cpu, "-L", str(r), str(r / exe)]


@dataclasses.dataclass(frozen=True)
class Interp(harness.Interp):
    """An arm64 interpreter: ``exe`` is a wrapper that runs ``guest_exe`` under qemu (what
    harness.Scenario starts), ``root`` the sysroot it runs in."""
    root: str = None
    guest_exe: str = None

    def __hash__(self):
        return hash(self.id)


WRAPPER = """\
#!/bin/sh
# Written by tests/integration/arm64_harness.py: {guest} under qemu-user, as an arm64 scenario
# process (harness.Scenario starts it in the scenario's temp dir). qemu writes the guest's core
# there when a signal kills it, if RLIMIT_CORE allows; a directory named core (core.PID)
# keeps the host kernel from writing its own core of qemu. exec: the scenario's pid is qemu's.
ulimit -c unlimited || exit 125
[ -d core ] || mkdir core || exit 125
[ -d core.$$ ] || mkdir core.$$ || exit 125
exec {qemu} -L {root} {guest} "$@"
"""


def _wrapper(interp_id, root_dir, guest):
    """The wrapper script of one interpreter, in <cache>/arm64/run/ (rewritten when it
    differs: written to a temp name and renamed, as parallel runs may share the cache)."""
    text = WRAPPER.format(qemu=qemu(), root=root_dir, guest=guest)
    path = arm64_dir() / "run" / (interp_id + ".sh")
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        if path.read_text() == text and os.access(path, os.X_OK):
            return path
    except OSError:
        pass
    tmp = path.with_name(".%s.%d.tmp" % (path.name, os.getpid()))
    tmp.write_text(text)
    os.chmod(tmp, 0o755)
    os.replace(tmp, path)
    return path


@functools.lru_cache(maxsize=None)
def interpreters():
    """The arm64 matrix. Raises HarnessError when qemu or any root or interpreter is missing."""
    found, missing = [], []
    qemu()
    for interp_id, root_name, minor in ARM64_INTERPRETERS:
        r = root(root_name)
        guest = r / "usr" / "bin" / ("python3.%d" % minor)
        if not os.access(guest, os.X_OK):
            missing.append(str(guest))
            continue
        found.append(Interp(interp_id, str(_wrapper(interp_id, r, guest)), {}, minor, True, None,
                            root=str(r), guest_exe=str(guest)))
    if missing:
        raise harness.HarnessError("missing arm64 interpreters (run `make arm64`): "
                                   + ", ".join(missing))
    return tuple(found)


def pick(interp_id):
    return harness.pick([interp_id], among=interpreters())[0]


# --- guest cores ----------------------------------------------------------------------------


@dataclasses.dataclass
class CoreNotes:
    machine: int
    threads: list  # the TIDs of the NT_PRSTATUS notes, in the core's order (the signalled first)
    signals: list  # their pr_cursig
    types: set  # every note type present


def read_core_notes(path):
    """The ELF header's machine and the notes of a 64-bit little-endian core."""
    with open(path, "rb") as f:
        data = f.read(64)
        if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
            raise harness.HarnessError("%s is not a 64-bit little-endian ELF file" % path)
        e_type, e_machine = struct.unpack_from("<HH", data, 16)
        if e_type != ET_CORE:
            raise harness.HarnessError("%s: e_type %d, not a core (4)" % (path, e_type))
        phoff, = struct.unpack_from("<Q", data, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
        notes = CoreNotes(e_machine, [], [], set())
        for i in range(phnum):
            p_type, _, p_offset, _, _, p_filesz = struct.unpack_from("<IIQQQQ", table,
                                                                     i * phentsize)
            if p_type != 4:  # PT_NOTE
                continue
            f.seek(p_offset)
            blob = f.read(p_filesz)
            off = 0
            while off + 12 <= len(blob):
                namesz, descsz, ntype = struct.unpack_from("<III", blob, off)
                desc = off + 12 + (namesz + 3) // 4 * 4
                notes.types.add(ntype)
                if ntype == NT_PRSTATUS:
                    if descsz != PRSTATUS_SIZE:
                        raise harness.HarnessError("%s: NT_PRSTATUS of %d bytes, not %d"
                                                   % (path, descsz, PRSTATUS_SIZE))
                    cursig, = struct.unpack_from("<H", blob, desc + 12)
                    tid, = struct.unpack_from("<I", blob, desc + 32)
                    notes.threads.append(tid)
                    notes.signals.append(cursig)
                off = desc + (descsz + 3) // 4 * 4
    return notes


def anon_exec_ranges(path):
    """[start, end) of the guest's anonymous executable mappings in a qemu core: where JIT code
    (and qemu's signal trampoline page) lives. qemu leaves every executable mapping that starts
    with an ELF header empty (FileSiz 0) and dumps the others, and Debian's arm64 binaries have
    their headers and text in one `R E` segment: an executable PT_LOAD with bytes, not starting
    with an ELF header, is anonymous memory. (The live process's maps are qemu's, not the
    guest's: jit_harness.anon_exec_ranges cannot tell.)"""
    ranges = []
    _, headers = program_headers(path)
    with open(path, "rb") as f:
        for p_type, p_flags, p_offset, p_vaddr, p_filesz, p_memsz in headers:
            if p_type != 1 or not p_flags & 1 or not p_filesz:  # PT_LOAD, PF_X
                continue
            f.seek(p_offset)
            if f.read(4) != b"\x7fELF":
                ranges.append((p_vaddr, p_vaddr + p_memsz))
    return ranges


def check_guest_core(path, truth):
    """Raise HarnessError unless ``path`` is an arm64 core of the scenario that wrote ``truth``:
    EM_AARCH64, one NT_PRSTATUS per thread of the truth (their TIDs), killed by SIGABRT.
    Returns its CoreNotes."""
    notes = read_core_notes(path)
    if notes.machine != EM_AARCH64:
        raise harness.HarnessError("%s: e_machine %d, not EM_AARCH64 (%d)"
                                   % (path, notes.machine, EM_AARCH64))
    want = sorted(t["native_id"] for t in truth["threads"])
    if sorted(notes.threads) != want:
        raise harness.HarnessError("%s: threads %r, the truth's %r" % (path, notes.threads, want))
    if notes.signals[:1] != [signal.SIGABRT]:
        raise harness.HarnessError("%s: first thread's pr_cursig %r, not SIGABRT"
                                   % (path, notes.signals[:1]))
    if not {NT_PRPSINFO, NT_AUXV} <= notes.types:
        raise harness.HarnessError("%s: no NT_PRPSINFO or NT_AUXV note (%r)" % (path, notes.types))
    return notes


class Scenario(harness.Scenario):
    """harness.Scenario under qemu: the same truth and ready FIFO; ``make_core`` kills the
    process with SIGABRT and returns the guest core qemu wrote (made once)."""

    def __init__(self, interp, name, timeout=READY_TIMEOUT_SECONDS, **kwargs):
        if not isinstance(interp, Interp):
            raise harness.HarnessError("%s is not an arm64 interpreter" % interp.id)
        self.notes = None
        super().__init__(interp, name, timeout=timeout, **kwargs)

    def make_core(self):
        if self._core is not None:
            return str(self._core)
        started = time.monotonic()
        os.kill(self.pid, signal.SIGABRT)
        try:
            rc = self._proc.wait(CORE_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            raise harness.HarnessError("%s: qemu still running %.0f s after SIGABRT:\n%s"
                                       % (self, CORE_TIMEOUT_SECONDS, self.stderr_text()))
        self._reaped = True
        # The host kernel's core of qemu itself (x86-64), had the wrapper's directories not
        # kept it out: never the one to read.
        for p in self.tmpdir.iterdir():
            if (p.name == "core" or p.name.startswith("core.")) and p.is_file():
                p.unlink()
        if rc != -signal.SIGABRT:
            raise harness.HarnessError("%s: qemu exit status %r after SIGABRT, expected %d:\n%s"
                                       % (self, rc, -signal.SIGABRT, self.stderr_text()))
        cores = sorted(self.tmpdir.glob("qemu_*_%d.core" % self.pid))
        if len(cores) != 1:
            raise harness.HarnessError("%s: qemu wrote %d guest cores (%s) in %s:\n%s"
                                       % (self, len(cores), cores, self.tmpdir,
                                          self.stderr_text()))
        self.notes = check_guest_core(cores[0], self.truth)
        self.core_seconds = time.monotonic() - started
        self._core = cores[0]
        return str(self._core)

    def make_core_named(self, stem):
        raise harness.HarnessError("a qemu scenario gives one core (make_core): the signal "
                                   "that makes qemu write it ends the process")


def _self_check():
    """Start each scenario the arm64 tests use under each arm64 interpreter, make its core and
    print a table."""
    rows = []
    for interp in interpreters():
        for name in ("recursion", "threads", "locals"):
            try:
                with Scenario(interp, name) as s:
                    core = s.make_core()
                    rows.append((interp.id, name, "%.1f" % s.start_seconds,
                                 "%.1f" % s.core_seconds, "%d" % (os.path.getsize(core) >> 20),
                                 "%d" % len(s.notes.threads), "ok"))
            except harness.HarnessError as e:
                rows.append((interp.id, name, "-", "-", "-", "-", str(e).splitlines()[0]))
    header = ("interpreter", "scenario", "ready s", "core s", "core MiB", "threads", "check")
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    for row in [header] + rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    return 0 if all(r[-1] == "ok" for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(_self_check())

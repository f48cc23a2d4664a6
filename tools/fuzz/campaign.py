"""Corrupted-core campaign: real cores of every supported interpreter, corrupted at real
structures, each run through the CLI (and a sample through gdb and lldb), every bad outcome
counted.

    python tools/fuzz/campaign.py --cores 10000 --seed 1 [--gdb 40] [--lldb 20] [--jobs 2]
    python tools/fuzz/campaign.py --arch arm64 --cores 600 --seed 20261127
    python tools/fuzz/campaign.py --replay tests/fuzz_specs/*.json

Base cores: one core per (interpreter, scenario), made during the run a batch at a time, each
batch removed once its cores have run, so that the bases and the workers' copies of them stay
within `--tmp-budget` GB of /tmp (nothing big is committed): `threads` (four threads, frames at several depths), `locals` (str, int, float,
bytes, tuple, list, dict, set and instance locals) and the asyncio `gather` case (tasks,
futures, coroutines, a gather), plus x86-64's `why_waits`, `why_async_locks`, `why_state`
(threads blocked in `read` on a pipe, `recv` on a socket, `poll` of one fd: the waits on the
outside world, src/why/resources.rs), `greenlets_raw` and `greenlets_gevent` (gevent's
cooperative sockets, whose real socket is in a `__slots__` member) and `heap_holders` (read
with --heap: its retainers are `container` structures). Every structure a mutation aims at is found in the CLI's own JSON report of
the untouched core (`thread_state`, `interpreter`, each frame's `address`, `tasks[].id`,
`loops[].id`, `awaiting.id`, the locals' order) plus the layouts' known offsets (the frame's
code pointer, the code object's names, a frame's `localsplus`, a task's coroutine), and the
`_Py_DebugOffsets` cookie (3.13+). On x86-64 also each thread's NT_PRSTATUS at the registers
`--why` reads of a system call (`syscall_regs`: `orig_rax`, `rdi`, `rsi`, `rdx`, `r10`, by
file offset: the fd, a poll's array and its `nfds`, a child's pid) and the `struct pollfd` array
of a thread in `poll` (`pollfd`, found at its `rdi`); the socket objects `--why` reads are
among `waited` (each wait's `object`). `--arch` and `--interp` choose the interpreters (all of both
architectures by default), `--scenario` the scenarios.

x86-64 (`--arch x86_64`): gcore cores of the pyenv builds, Debian's stripped 3.11, sid's 3.14
and 3.15 and the free-threaded 3.13t, each read with `--exe`.

arm64 (`--arch arm64`): qemu-user cores of Debian's own arm64 interpreters, made as
tests/integration/arm64_harness.py makes them (the roots `make arm64`, tools/arm64.sh, unpacks):
bookworm's 3.11, sid's 3.14, sid's 3.14 again with PYTHON_JIT=1 (`arm64-sid-3.14-jit`, which
also has the `jit_call` scenario: a C call from JIT code) and sid's 3.15; `threads`, `locals`
and `gather` each. They are read with `--sysroot ROOT` only: such a core has no NT_FILE, so the
modules come from its NT_AUXV and the dynamic linker's list in memory, the registers from the
arm64 NT_PRSTATUS (sid's return addresses carry PAC bits). On top of the kinds above, their
mutations aim at those (`locate_arm64`): each thread's NT_PRSTATUS (`prstatus`: x29, x30, sp
or pc), the NT_AUXV's AT_PHDR, AT_BASE and AT_ENTRY entries (`at_phdr`, `at_base`,
`at_entry`: the value or the type word; these and `prstatus` are patched by file offset, in the
notes), the executable's DT_DEBUG entry (`dt_debug`), the dynamic linker's `r_debug` and every
`link_map` node (`l_addr`, `l_name`, `l_ld`, `l_next`, `l_prev`), found as
src/memory/link_map.rs finds them (AT_PHDR places the executable, whose dynamic section's
DT_DEBUG points to r_debug), the objects' names (`l_name`), the frame records of each
thread's x29 chain (`frame_record`: the saved x29 or the signed return address), and with the
JIT on, its executors (`executor`: links, code, jit_size, jit_code) and the interpreter's slots
that hold them (`executor_roots`), at src/native/jit/tables.rs's arm64 offsets. Every third
arm64 core also goes through the native unwind (`--json --native --locals --why` and the text
of `--native-all`, in turn). The gdb sample reads arm64 cores with gdb-multiarch (`set sysroot
ROOT`); the lldb sample skips them (tests/integration/test_lldb_arm64.py reads qemu cores in
lldb).

A mutation is a JSON spec, replayable on a fresh core of the same scenario (structures are
named by kind and index, not by address):

    {"interp": "pyenv-3.12", "scenario": "threads",
     "patches": [{"at": ["frame", 3], "off": 8, "size": 8, "value": ["ref", "frame", 1, 0]}],
     "cut": null}

`value` is an integer, or ["self", delta] (the structure's own address plus delta), or
["ref", kind, index, delta] (another located structure: an address, so never a file-offset
kind), or ["xor", mask] (the base core's own value there, those bits flipped: other PAC or tag
bits in a register or return address). `cut` is null, ["file", fraction]
(the core cut at that fraction of its size) or ["segment", index, fraction] (a PT_LOAD's
p_filesz cut). Patches are written into a per-worker copy of the base core and undone after
the run, so a run costs no copy of the core.

Outcomes counted (each must be zero): crash (killed by a signal), hang (over 10 s), panic
(a panic caught by the boundary: its marker, `_pyunwind.PANIC_MARKER`, or the CLI's exit status
for it; or an uncaught one: exit 101, "panicked at", PanicException; see harness.panic_in),
invalid JSON (exit 0 and stdout not one JSON object), multi-line
error (exit 1 and stderr not exactly one `pyunwind: ` line, or another exit status), and, for
gdb (gdb-multiarch) and lldb, a Python traceback or a panic in their output. Each failure is
written as its spec to the output directory, ready to become a regression test
(tests/fuzz_specs/).
"""

import argparse
import dataclasses
import json
import multiprocessing
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))

import arm64_harness  # noqa: E402
import harness  # noqa: E402
from corefile import CoreFile, program_headers  # noqa: E402

RUN_TIMEOUT_SECONDS = 10.0
DEBUGGER_TIMEOUT_SECONDS = 60.0
CASES_SCRIPT = os.path.join(ROOT, "tests", "scenarios", "asyncio", "cases.py")
GDB_SCRIPT = os.path.join(ROOT, "gdb-scripts", "pyunwind-gdb.py")
LLDB_SCRIPT = os.path.join(ROOT, "lldb-scripts", "pyunwind_lldb.py")
# why_waits: threads in each kind of wait and a lock-order deadlock (lock objects, with blocks'
# value stacks, exception tables); why_async_locks: asyncio tasks in async with blocks (3.11+);
# jit_call (arm64, PYTHON_JIT=1 only): a C call from JIT code, a JIT frame on the native stack;
# subinterpreters (3.12+): threads that entered subinterpreters, nested, and one no thread runs
# in (the interpreter list, each interpreter's thread list, the nested thread states);
# why_loops: a loop blocked in a task (its _ready, _scheduled and timer handles);
# why_task_waits: tasks awaiting executor jobs, sleeps, a child, futures and sockets;
# why_task_timeouts: tasks inside asyncio.timeout() blocks (the managers on their value stacks).
# heap_holders (x86-64): containers held by a module global, a class attribute, a closure and a
# thread's local, and an unreachable cycle, for --heap's census, retainers and paths (issue 51).
SCENARIOS = ("threads", "locals", "gather", "why_waits", "why_async_locks", "why_state",
             "greenlets_raw", "greenlets_gevent", "jit_call", "subinterpreters", "why_loops",
             "why_task_waits", "why_task_timeouts", "heap_holders")
# The scenarios read with --tasks (their tasks' waits: the loop's queues and timers, executor
# jobs, sleeps' timer handles, children, futures' reference counts, sockets behind transports).
TASK_SCENARIOS = ("gather", "why_async_locks", "why_loops", "why_task_waits",
                  "why_task_timeouts")
# The scenarios read with --greenlets.
GREENLET_SCENARIOS = ("greenlets_raw", "greenlets_gevent")
# The scenarios whose base report is read with --heap: its retainers are the `container`
# structures (each container's header, length and items or table pointer).
HEAP_SCENARIOS = ("heap_holders",)
ARCHES = ("x86_64", "arm64")
X86_64_INTERPRETERS = ("pyenv-3.10", "pyenv-3.11", "pyenv-3.12", "pyenv-3.13", "debian-3.11",
                       "debian-3.14", "debian-3.15", "ft-3.13t")
# Debian's arm64 interpreters under qemu-user (tests/integration/arm64_harness.py) and sid's
# 3.14 again with its JIT on: qemu cores, read with --sysroot.
ARM64_JIT = "arm64-sid-3.14-jit"
ARM64_INTERPRETERS = ("arm64-bookworm-3.11", "arm64-sid-3.14", ARM64_JIT, "arm64-sid-3.15")
# The others stay x86-64's: no arm64 greenlet is installed, and each arm64 base costs seconds
# of qemu; the registers --why reads are reached through the `prstatus` kind.
ARM64_SCENARIOS = ("threads", "locals", "gather", "jit_call")

# --- layouts (src/cpython/layout/v3_1X.rs; free-threaded 3.13: object fields +16) ----------
# `f_code` of PyFrameObject (3.10) / `f_executable` of _PyInterpreterFrame (3.11+).
FRAME_CODE = {10: 32, 11: 32, 12: 0, 13: 0, 14: 0, 15: 0}
# `f_back` (3.10) / `previous`.
FRAME_PREVIOUS = {10: 24, 11: 48, 12: 8, 13: 8, 14: 8, 15: 8}
# `f_localsplus` (3.10) / `localsplus`.
FRAME_LOCALSPLUS = {10: 352, 11: 72, 12: 72, 13: 72, 14: 80, 15: 80}
# co_filename, co_name, co_qualname of PyCodeObject (3.10 has no co_qualname).
CODE_STRINGS = {10: (104, 112), 11: (112, 120, 128), 12: (112, 120, 128), 13: (112, 120, 128),
                14: (112, 120, 128), 15: (112, 120, 128)}
FREE_THREADED_OBJECT_DELTA = 16
# TaskObj's task_coro (src/asyncio/layout.rs; checked against DWARF by tests/layout_dwarf.rs).
TASK_CORO = {11: 136, 12: 136, 13: 120, 14: 128, 15: 128}
# `PyInterpreterState.next` (`interp_list` starts there: `next`, `id`, `_whence` and, past
# them, `threads.head`, within its span) and `threads.head` (src/cpython/layout/v3_1X.rs).
INTERP_NEXT = {10: 0, 11: 0, 12: 0, 13: 7264, 14: 7272, 15: 7264}
INTERP_THREADS_HEAD = {10: 8, 11: 16, 12: 72, 13: 7344, 14: 7344, 15: 7336}
# `PyThreadState.next`, every version.
TSTATE_NEXT = 8
# Thread states read per interpreter's list (the scenarios have a few).
MAX_LISTED_TSTATES = 64
# Free-threaded 3.13: each thread state's mimalloc heaps, which --heap walks instead of GC
# lists (src/cpython/mimalloc.rs, offsets from the DWARF of our 3.13.15 build):
# `_PyThreadStateImpl.mimalloc.heaps` (`mi_heap_t[4]`, 3064 bytes each; the GC heaps are 2
# and 3), a heap's `pages` queues (75 × {first, last, block_size}) and `thread_delayed_free`.
MI_TSTATE_HEAPS, MI_HEAP_SIZE, MI_GC_HEAPS = 352 + 8, 3064, (2, 3)
MI_HEAP_PAGES, MI_PAGE_QUEUES, MI_PAGE_NEXT = 1040, 75, 56
# Pages aimed at per heap (the first of each non-empty queue, then along `next`).
MAX_MI_PAGES = 16
# Bytes of each kind of structure a patch may land in (a word at a random aligned offset).
SPAN = {"tstate": 256, "interp": 1024, "frame": 96, "code": 192, "str": 64, "local": 64,
        "task": 192, "coro": 128, "future": 128, "loop": 64, "debug_offsets": 1024,
        "waited": 64, "greenlet": 48, "greenlet_impl": 160, "pollfd": 16, "interp_list": 96,
        # a heap's page queues and its delayed-free list; a page's fields up to `next`
        "mi_heap": MI_PAGE_QUEUES * 24 + 8, "mi_page": 64,
        # What a scenario's truth names under `aim` (issue 49): an event loop's `_ready` deque
        # and `_scheduled` list, its first TimerHandles (`__slots__`: `_when` among them), and
        # streams' transports from their managed dict pointer on (AIM_BEFORE).
        "loop_queue": 48, "timer": 96, "transport": 24 + 64,
        # a list's or dict's header up to its items, allocated or keys/values fields (lying
        # lengths, wild tables), free-threaded's 16 bytes more included
        "container": 64}
# Bytes before the object a kind's span starts at: a Python object's managed dict (or values)
# pointer is the third word before it (Include/internal/pycore_object.h, 3.11 to 3.15).
AIM_BEFORE = {"transport": 24}
# `PyGreenlet.pimpl` (greenlet.h: after the header, `weakreflist` and `dict`; default builds).
GREENLET_PIMPL = 32
STACKREF_TAG_BITS = 3

VALUES = [0, 0x10, 0xffffffffffffffff, 1 << 63, (1 << 63) - 1, 1 << 62, 1 << 31, (1 << 31) - 1,
          1 << 32, (1 << 32) - 1, 1 << 40, 1 << 48, 0x8000000000000001, 0xdeadbeefcafebabe, 1, 7]


# --- base cores ------------------------------------------------------------------------------


def interpreters(arches=ARCHES):
    """Every supported interpreter the tests use, of these architectures (a missing one raises,
    never skips)."""
    found = {}
    ids = []
    if "x86_64" in arches:
        found.update((i.id, i) for i in harness.interpreters() + harness.provisioned_interpreters())
        ids += X86_64_INTERPRETERS
    if "arm64" in arches:
        for i in arm64_harness.interpreters():
            found[i.id] = i
        found[ARM64_JIT] = dataclasses.replace(found["arm64-sid-3.14"], id=ARM64_JIT,
                                               env={"PYTHON_JIT": "1"})
        ids += ARM64_INTERPRETERS
    return [found[i] for i in ids]


def is_arm64(interp):
    return isinstance(interp, arm64_harness.Interp)


def supports(interp, scenario):
    """Whether the scenario runs on the interpreter (decided before any base is made)."""
    if is_arm64(interp):
        if scenario not in ARM64_SCENARIOS:
            return False
        return scenario != "jit_call" or interp.env.get("PYTHON_JIT") == "1"
    if scenario == "jit_call":
        return False
    if scenario in TASK_SCENARIOS:
        return interp.minor >= 11
    if scenario == "subinterpreters":
        return interp.minor >= 12
    # Free-threaded builds: greenlets are not decoded there (the report says so), and gevent
    # has no free-threaded wheel.
    return scenario not in GREENLET_SCENARIOS or not interp.id.startswith("ft-")


def scenario_for(interp, scenario):
    if not supports(interp, scenario):
        return None
    if is_arm64(interp):
        if scenario == "gather":
            return arm64_harness.Scenario(interp, "asyncio-gather", script=CASES_SCRIPT,
                                          args=("gather", "c"))
        return arm64_harness.Scenario(interp, scenario)
    if scenario in GREENLET_SCENARIOS:
        path = harness.cache_dir() / "greenlet" / "latest" / ("cp3%d" % interp.minor)
        return harness.Scenario(interp, scenario, env={"PYUNWIND_GREENLET": str(path)})
    if scenario == "gather":
        return harness.Scenario(interp, "asyncio-gather", script=CASES_SCRIPT,
                                args=("gather", "c"))
    return harness.Scenario(interp, scenario)


def cli(args, timeout=RUN_TIMEOUT_SECONDS, env=None):
    """(status, rc, stdout, stderr); status is "ok" or "hang"."""
    try:
        p = subprocess.run([harness.cli_path(), *map(str, args)], capture_output=True,
                           timeout=timeout, env=env)
    except subprocess.TimeoutExpired as e:
        return "hang", None, e.stdout or b"", e.stderr or b""
    return "ok", p.returncode, p.stdout, p.stderr


def make_base(interp, scenario, workdir):
    """A base: its core, our report of the untouched core and the structures found in it."""
    s = scenario_for(interp, scenario)
    if s is None:
        return None
    with s:
        src = s.make_core()
        core = os.path.join(workdir, "core.%s.%s" % (interp.id, scenario))
        shutil.move(src, core)
        aim = s.truth.get("aim") or {}
    base = {"interp": interp.id, "env": interp.env, "minor": interp.minor,
            "scenario": scenario, "core": core}
    if is_arm64(interp):
        base.update(arch="arm64", exe=interp.guest_exe, root=interp.root)
    else:
        base.update(arch="x86_64", exe=interp.exe, root=None)
    flags = ["--json", "--locals", "--why"] + (
        ["--tasks"] if scenario in TASK_SCENARIOS else []) + (
        ["--greenlets"] if scenario in GREENLET_SCENARIOS else []) + (
        ["--heap"] if scenario in HEAP_SCENARIOS else [])
    # The base's own report is taken from the core alone (gcore's NT_FILE, or the sysroot).
    target = ["core", core] + (["--sysroot", base["root"]] if base["root"] else [])
    status, rc, out, err = cli([*target, *flags], timeout=120)
    if status != "ok" or rc != 0:
        raise RuntimeError("base core %s: CLI failed: %r" % (core, err[-2000:]))
    report = json.loads(out)
    base["free_threaded"] = report["python"]["free_threaded"]
    base["structures"] = locate(base, report)
    cf = CoreFile(core)
    if scenario in HEAP_SCENARIOS:
        held = [r["address"] for r in report["heap"]["retainers"]]
        base["structures"]["container"] = [a for a in held if cf.has(a, SPAN["container"])]
    # What the scenario itself names (its truth's `aim`), where the core holds it.
    for kind, addrs in aim.items():
        at = [a - AIM_BEFORE.get(kind, 0) for a in addrs]
        at = [a for a in at if cf.has(a, SPAN[kind])]
        if at:
            base["structures"][kind] = at
    if base["arch"] == "arm64":
        base["structures"].update(locate_arm64(base))
    else:
        base["structures"].update(locate_syscalls(base, report))
    return base


def cli_target(base, path):
    """The CLI's arguments that read a corrupted core of ``base``: --exe with the interpreter
    (x86-64), --sysroot with the root the guest ran in (arm64: a qemu core names its files only
    through the auxv and r_debug, both of which mutations reach)."""
    if base["arch"] == "arm64":
        return ["core", path, "--sysroot", base["root"]]
    return ["core", path, "--exe", base["exe"]]


def locate(base, report):
    """{kind: [address, ...]} of the structures a mutation may aim at."""
    core = CoreFile(base["core"])
    minor, delta = base["minor"], FREE_THREADED_OBJECT_DELTA if base["free_threaded"] else 0

    def ptr(addr):
        try:
            v = core.read_u64(addr)
        except Exception:
            return None
        v &= ~STACKREF_TAG_BITS if minor >= 14 else ~0
        return v if v and core.has(v, 8) else None

    st = {k: [] for k in SPAN}
    for t in report["threads"]:
        st["tstate"].append(t["thread_state"])
        if t["interpreter"] not in st["interp"]:
            st["interp"].append(t["interpreter"])
        for f in t["frames"]:
            if f["kind"] != "python":
                continue
            st["frame"].append(f["address"])
            code = ptr(f["address"] + FRAME_CODE[minor])
            if code and code not in st["code"]:
                st["code"].append(code)
                for off in CODE_STRINGS[minor]:
                    s = ptr(code + off + delta)
                    if s and s not in st["str"]:
                        st["str"].append(s)
            for i, _ in enumerate(f.get("locals") or []):
                obj = ptr(f["address"] + FRAME_LOCALSPLUS[minor] + 8 * i)
                if obj and obj not in st["local"]:
                    st["local"].append(obj)
    # Every interpreter (one no thread runs in too), its links, and every thread state on its
    # list: those of the interpreters a thread entered from are in no report field.
    for i in report.get("interpreters") or []:
        if i["address"] not in st["interp"]:
            st["interp"].append(i["address"])
    for interp in list(st["interp"]):
        st["interp_list"].append(interp + INTERP_NEXT[minor])
        ts = ptr(interp + INTERP_THREADS_HEAD[minor])
        for _ in range(MAX_LISTED_TSTATES):
            if not ts or ts in st["tstate"]:
                break
            st["tstate"].append(ts)
            ts = ptr(ts + TSTATE_NEXT)
    for g in report.get("greenlets") or []:
        st["greenlet"].append(g["address"])
        impl = ptr(g["address"] + GREENLET_PIMPL)
        if impl:
            st["greenlet_impl"].append(impl)
        st["frame"].extend(f["address"] for f in g["frames"]
                           if f["kind"] == "python" and f["address"] not in st["frame"])
    for t in report.get("tasks") or []:
        st["task"].append(t["id"])
        coro = ptr(t["id"] + TASK_CORO.get(minor, 0) + delta) if minor in TASK_CORO else None
        if coro:
            st["coro"].append(coro)
        aw = t.get("awaiting") or {}
        if aw.get("id") and aw.get("kind") != "task" and aw["id"] not in st["future"]:
            st["future"].append(aw["id"])
    st["loop"] = [lp["id"] for lp in report.get("loops") or []]
    # What --why names: the objects waited on and held (locks, Conditions, queues, tasks'
    # asyncio locks, sockets), and what gevent's greenlets wait on (a cooperative socket keeps
    # the real one in a slot).
    for w in report["threads"] + (report.get("tasks") or []) + (report.get("greenlets") or []):
        held = [h["object"] for h in w.get("holding") or []]
        waited = (w.get("waiting") or {}).get("object")
        for obj in held + ([waited] if waited else []):
            if obj not in st["waited"]:
                st["waited"].append(obj)
    if base["free_threaded"]:
        for ts in st["tstate"]:
            for h in MI_GC_HEAPS:
                heap = ts + MI_TSTATE_HEAPS + h * MI_HEAP_SIZE
                st["mi_heap"].append(heap + MI_HEAP_PAGES)
                pages = 0
                for q in range(MI_PAGE_QUEUES):
                    page = ptr(heap + MI_HEAP_PAGES + 24 * q)
                    while page and pages < MAX_MI_PAGES and page not in st["mi_page"]:
                        st["mi_page"].append(page)
                        pages += 1
                        page = ptr(page + MI_PAGE_NEXT)
    cookie = debug_offsets_address(core)
    if cookie:
        st["debug_offsets"].append(cookie)
    return {k: v for k, v in st.items() if v}


def debug_offsets_address(core):
    """The address of `_Py_DebugOffsets` (its cookie "xdebugpy", 3.13+) in the core's data."""
    with open(core.path, "rb") as f:
        for vaddr, offset, filesz, _ in core.loads:
            if filesz > 64 << 20:
                continue
            f.seek(offset)
            data = f.read(filesz)
            i = data.find(b"xdebugpy")
            if i >= 0 and i % 8 == 0:
                return vaddr + i
    return None


# --- arm64: qemu-user cores ------------------------------------------------------------------
# A qemu core has no NT_FILE: the modules come from the auxiliary vector and the dynamic
# linker's list in memory (src/memory/link_map.rs), the registers from the arm64 NT_PRSTATUS,
# the native unwind from frame records. Those are what the arm64 kinds below aim at.

NT_PRSTATUS, NT_AUXV = arm64_harness.NT_PRSTATUS, arm64_harness.NT_AUXV
# `struct elf_prstatus` of arm64: pr_reg (x0..x30, sp, pc, pstate) at 112.
PRSTATUS_REG = 112
AT_PHDR, AT_BASE, AT_ENTRY = 3, 7, 9
AUXV_KINDS = {"at_phdr": AT_PHDR, "at_base": AT_BASE, "at_entry": AT_ENTRY}
DT_NULL, DT_DEBUG = 0, 21
PT_LOAD, PT_DYNAMIC, PT_PHDR = 1, 2, 6
R_MAP, L_NAME, L_NEXT = 8, 8, 24
MAX_LINK_MAPS = 256
FRAME_RECORDS_PER_THREAD = 16
# `struct elf_prstatus` of x86-64 (336 bytes): pr_pid at 32, pr_reg (user_regs_struct: r15,
# r14, r13, r12, rbp, rbx, r11, r10, r9, r8, rax, rcx, rdx, rsi, rdi, orig_rax, ...) at 112.
X86_64_PRSTATUS_SIZE = 336
PRSTATUS_PID = 32
X86_64_SYSCALL_REGS = {"r10": 7, "rdx": 12, "rsi": 13, "rdi": 14, "orig_rax": 15}
# Kinds whose "address" is a file offset in the core (inside its notes), not a virtual one.
FILE_KINDS = {"prstatus", "at_phdr", "at_base", "at_entry", "syscall_regs"}
# Kinds patched at named fields only (offsets in the structure), not anywhere in a span.
FIELDS = {
    # x29 (the frame record chain), x30 (the return address), sp, pc.
    "prstatus": [PRSTATUS_REG + 8 * r for r in (29, 30, 31, 32)],
    # The entry's value, or its type (the entry then names another AT_* or ends the vector).
    "at_phdr": [0, -8], "at_base": [0, -8], "at_entry": [0, -8],
    # The executable's DT_DEBUG entry: its tag, its value (&r_debug).
    "dt_debug": [0, 8],
    # struct r_debug (link.h, LP64): r_version, r_map, r_brk, r_state, r_ldbase.
    "r_debug": [0, 8, 16, 24, 32],
    # struct link_map: l_addr, l_name, l_ld, l_next, l_prev.
    "link_map": [0, 8, 16, 24, 32],
    # A frame record: the caller's x29, the return address (signed on sid's builds).
    "frame_record": [0, 8],
    # mi_page_t: slice_count, tag bits and capacity, free, used and xblock_size, local_free,
    # xthread_free, xheap, next (a short or byte patch lands in the tag or the capacity).
    "mi_page": [0, 8, 16, 24, 32, 40, 48, 56],
    # x86-64: the system call and its arguments (src/why/state.rs, src/why/resources.rs).
    "syscall_regs": [PRSTATUS_REG + 8 * r for r in X86_64_SYSCALL_REGS.values()],
}
# The JIT's executors (sid's arm64 release builds, src/native/jit/tables.rs AARCH64_TABLES):
# where the interpreter keeps them, from its address. 3.14: the list head, then the deletion
# list; 3.15: the pointer array, then its count; and its two cold executors.
EXECUTOR_ROOTS = {14: 0x367e8, 15: 0x368e0}
EXECUTOR_COLD_315 = (0x36900, 0x36908)
# `_PyExecutorObject.vm_data.links.next` of 3.14.
EXECUTOR_NEXT_314 = 0x48
MAX_EXECUTORS = 64
# An executor's span covers vm_data (links, code), jit_size and jit_code on both versions; the
# roots' the two words named above.
SPAN.update({"l_name": 32, "executor": 128, "executor_roots": 16})
# XOR masks for registers and return addresses: pointer-authentication bits (54..48 on a
# 48-bit VA; bit 55 selects the half), top-byte tags, small offsets.
XOR_MASKS = [0x007f000000000000, 0x0001000000000000, 0x0080000000000000, 0xff00000000000000,
             8, 4, 1 << 47]


def note_descs(core):
    """(n_type, file offset of the desc, descsz) of every note of ``core``."""
    return [(n_type, at, len(desc)) for n_type, _, desc, at in core.notes_at()]


def elf_dynamic(path):
    """(address of the program header table, PT_DYNAMIC's vaddr, its size) as linked, of the
    ELF file ``path``; None where it has none."""
    phoff, headers = program_headers(path)
    phdr = dynamic = None
    for p_type, _, p_offset, p_vaddr, p_filesz, p_memsz in headers:
        if p_type == PT_PHDR:
            phdr = p_vaddr
        elif p_type == PT_LOAD and phdr is None and p_offset <= phoff < p_offset + p_filesz:
            phdr = p_vaddr + phoff - p_offset
        elif p_type == PT_DYNAMIC:
            dynamic = (p_vaddr, p_memsz)
    return phdr, dynamic


def locate_syscalls(base, report):
    """x86-64: each thread's NT_PRSTATUS, in the report's thread order (`syscall_regs`, patched
    at the registers of its system call), and the `struct pollfd` array of each thread the
    report has in `poll` or `ppoll` (`pollfd`: its `rdi`)."""
    core = CoreFile(base["core"])
    by_lwp = {}
    with open(core.path, "rb") as f:
        for n_type, off, size in note_descs(core):
            if n_type == NT_PRSTATUS and size == X86_64_PRSTATUS_SIZE:
                f.seek(off)
                desc = f.read(size)
                lwp, = struct.unpack_from("<i", desc, PRSTATUS_PID)
                by_lwp.setdefault(lwp, (off, desc))
    st = {"syscall_regs": [], "pollfd": []}
    for t in report["threads"]:
        if t.get("native_id") not in by_lwp:
            continue
        off, desc = by_lwp[t["native_id"]]
        st["syscall_regs"].append(off)
        if t.get("syscall") in ("poll", "ppoll"):
            fds, = struct.unpack_from("<Q", desc, PRSTATUS_REG + 8 * X86_64_SYSCALL_REGS["rdi"])
            if core.has(fds, 8) and fds not in st["pollfd"]:
                st["pollfd"].append(fds)
    return {k: v for k, v in st.items() if v}


def locate_arm64(base):
    """The arm64 kinds of a qemu core: each thread's NT_PRSTATUS and frame records, the auxv's
    AT_PHDR, AT_BASE and AT_ENTRY, and the dynamic linker's list found as link_map.rs finds it
    (AT_PHDR places the executable; its dynamic section's DT_DEBUG is &r_debug; r_map, l_next)."""
    core = CoreFile(base["core"])

    def u64(addr):
        try:
            return core.read_u64(addr)
        except Exception:
            return None

    st = {k: [] for k in FIELDS if k != "syscall_regs"}
    st["l_name"] = []
    notes = note_descs(core)
    auxv = {}
    with open(core.path, "rb") as f:
        for n_type, off, size in notes:
            f.seek(off)
            desc = f.read(size)
            if n_type == NT_PRSTATUS and size == arm64_harness.PRSTATUS_SIZE:
                st["prstatus"].append(off)
                fp, seen = struct.unpack_from("<Q", desc, PRSTATUS_REG + 8 * 29)[0], set()
                for _ in range(FRAME_RECORDS_PER_THREAD):
                    if not fp or fp in seen or not core.has(fp, 16):
                        break
                    seen.add(fp)
                    st["frame_record"].append(fp)
                    nxt = u64(fp)
                    # The chain runs up the stack; anything else ends it.
                    if nxt is None or nxt <= fp:
                        break
                    fp = nxt
            elif n_type == NT_AUXV:
                for i in range(size // 16):
                    a_type, a_val = struct.unpack_from("<QQ", desc, 16 * i)
                    auxv.setdefault(a_type, (off + 16 * i + 8, a_val))
    for kind, a_type in AUXV_KINDS.items():
        if a_type in auxv:
            st[kind].append(auxv[a_type][0])
    phdr_vaddr, dynamic = elf_dynamic(base["exe"])
    if AT_PHDR in auxv and phdr_vaddr is not None and dynamic:
        bias = auxv[AT_PHDR][1] - phdr_vaddr
        for i in range(dynamic[1] // 16):
            at = bias + dynamic[0] + 16 * i
            tag = u64(at)
            if tag is None or tag == DT_NULL:
                break
            if tag == DT_DEBUG:
                st["dt_debug"].append(at)
                r_debug = u64(at + 8)
                if r_debug and core.has(r_debug, 40):
                    st["r_debug"].append(r_debug)
                break
    node = u64(st["r_debug"][0] + R_MAP) if st["r_debug"] else None
    while node and node not in st["link_map"] and len(st["link_map"]) < MAX_LINK_MAPS \
            and core.has(node, 40):
        st["link_map"].append(node)
        name = u64(node + L_NAME)
        if name and core.has(name, 1) and core.read(name, 1) != b"\0" \
                and name not in st["l_name"]:
            st["l_name"].append(name)
        node = u64(node + L_NEXT)
    st.update(locate_executors(base, core, u64))
    return {k: v for k, v in st.items() if v}


def locate_executors(base, core, u64):
    """The JIT's executors of each interpreter and the slots that hold them (``executor``,
    ``executor_roots``): with PYTHON_JIT=1 there are some, and the native unwind names JIT frames
    through them."""
    st = {"executor": [], "executor_roots": []}
    if base["minor"] not in EXECUTOR_ROOTS:
        return st
    at = EXECUTOR_ROOTS[base["minor"]]
    for interp in base["structures"].get("interp", ()):
        roots = interp + at
        if not core.has(roots, 8):
            continue
        found = []
        if base["minor"] == 14:
            e = u64(roots)
            while e and e not in found and len(found) < MAX_EXECUTORS and core.has(e, 128):
                found.append(e)
                e = u64(e + EXECUTOR_NEXT_314)
        else:
            ptrs, count = u64(roots), u64(roots + 8) or 0
            for i in range(min(count, MAX_EXECUTORS)):
                e = u64(ptrs + 8 * i) if ptrs else None
                if e and core.has(e, 128) and e not in found:
                    found.append(e)
            for off in EXECUTOR_COLD_315:
                e = u64(interp + off)
                if e and core.has(e, 128) and e not in found:
                    found.append(e)
        if found:
            st["executor_roots"].append(roots)
            st["executor"].extend(e for e in found if e not in st["executor"])
    return st


# --- mutations -------------------------------------------------------------------------------


def random_spec(base, rng):
    """One mutation spec for ``base``: 1 to 3 patches on located structures, sometimes a cut."""
    st = base["structures"]
    kinds = sorted(st)
    memory_kinds = [k for k in kinds if k not in FILE_KINDS]
    patches = []
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        kind = rng.choice(kinds)
        index = rng.randrange(len(st[kind]))
        off = rng.choice(FIELDS[kind]) if kind in FIELDS else rng.randrange(0, SPAN[kind], 8)
        r = rng.random()
        if r < 0.08:
            off += rng.choice((1, 2, 4))  # a byte, a short or a kind/state field
            patches.append({"at": [kind, index], "off": off, "size": 1,
                            "value": rng.choice((0, 1, 0x7f, 0x80, 0xff))})
            continue
        arm = kind in ("prstatus", "frame_record")
        if arm and r < 0.16:
            # The register or saved value itself, with other PAC or tag bits, or a bit off.
            patches.append({"at": [kind, index], "off": off, "size": 8,
                            "value": ["xor", rng.choice(XOR_MASKS)]})
            continue
        if r < (0.24 if arm else 0.20) and kind not in FILE_KINDS:
            value = ["self", rng.choice((0, 0, 8, -8, 3))]
        elif r < 0.45:
            k2 = rng.choice(memory_kinds)
            value = ["ref", k2, rng.randrange(len(st[k2])), rng.choice((0, 0, 0, 8, 16, 3))]
        elif r < 0.60:
            value = rng.getrandbits(64)
        elif r < 0.70:
            value = rng.getrandbits(47) | rng.choice((0, 1, 3, 5))  # canonical, maybe unaligned
        else:
            value = rng.choice(VALUES)
        size = 8 if rng.random() < 0.85 else 4
        if size == 4 and not isinstance(value, int):
            size = 8
        patches.append({"at": [kind, index], "off": off, "size": size, "value": value})
    cut = None
    r = rng.random()
    if r < 0.03:
        cut = ["file", round(rng.uniform(0.05, 0.999), 4)]
    elif r < 0.08:
        cut = ["segment", rng.randrange(len(CoreFile(base["core"]).loads)),
               round(rng.uniform(0.0, 0.99), 3)]
    return {"interp": base["interp"], "scenario": base["scenario"], "patches": patches,
            "cut": cut}


def resolve(base, spec):
    """[(address, bytes, in_file)] of a spec's patches on ``base`` (``in_file``: the address is
    a file offset, FILE_KINDS); a structure the base lacks is skipped (a replayed spec on a
    scenario that changed)."""
    st = base["structures"]
    core = None
    out = []
    for p in spec["patches"]:
        kind, index = p["at"]
        if index >= len(st.get(kind, ())):
            continue
        addr = st[kind][index] + p["off"]
        in_file = kind in FILE_KINDS
        v = p["value"]
        if isinstance(v, list):
            if v[0] == "self":
                v = st[kind][index] + v[1]
            elif v[0] == "xor":
                core = core or CoreFile(base["core"])
                old = read_base(core, addr, p["size"], in_file)
                if old is None:
                    continue
                v = int.from_bytes(old, "little") ^ v[1]
            else:
                _, k2, i2, d = v
                if i2 >= len(st.get(k2, ())):
                    continue
                v = st[k2][i2] + d
        v &= (1 << (8 * p["size"])) - 1
        out.append((addr, v.to_bytes(p["size"], "little"), in_file))
    return out


def read_base(core, addr, size, in_file):
    """The untouched base core's bytes at a virtual address (or file offset), else None."""
    try:
        if not in_file:
            return core.read(addr, size)
        with open(core.path, "rb") as f:
            f.seek(addr)
            data = f.read(size)
        return data if len(data) == size else None
    except Exception:
        return None


class Overlay:
    """A worker's own copy of a base core, patched for one run and restored after."""

    def __init__(self, base, workdir):
        self.base = base
        self.path = os.path.join(workdir, os.path.basename(base["core"]))
        if not os.path.exists(self.path):
            shutil.copyfile(base["core"], self.path)
        self.core = CoreFile(self.path)

    def apply(self, spec, workdir):
        """Patch the copy (or write a cut copy); return (path, undo list)."""
        undo = []
        with open(self.path, "r+b") as f:
            for addr, data, in_file in resolve(self.base, spec):
                if in_file:
                    if not 0 <= addr <= self.core.size - len(data):
                        continue
                    off = addr
                elif not self.core.has(addr, len(data)):
                    continue
                else:
                    off = self.core.offset_of(addr, len(data))
                f.seek(off)
                undo.append((off, f.read(len(data))))
                f.seek(off)
                f.write(data)
            cut = spec.get("cut")
            if cut and cut[0] == "segment":
                off = self.phdr_filesz_offset(cut[1])
                if off is not None:
                    f.seek(off)
                    old = f.read(8)
                    undo.append((off, old))
                    f.seek(off)
                    f.write(struct.pack("<Q", int(struct.unpack("<Q", old)[0] * cut[2])))
        path = self.path
        if cut and cut[0] == "file":
            path = self.core.truncated_copy(os.path.join(workdir, "cut.core"),
                                            int(os.path.getsize(self.path) * cut[1]))
        return path, undo

    def phdr_filesz_offset(self, index):
        """File offset of p_filesz of the index-th PT_LOAD that has bytes in the file."""
        with open(self.path, "rb") as f:
            h = f.read(64)
            phoff, = struct.unpack_from("<Q", h, 0x20)
            phentsize, phnum = struct.unpack_from("<HH", h, 0x36)
            n = 0
            for i in range(phnum):
                f.seek(phoff + i * phentsize)
                p_type, _, _, _, _, filesz = struct.unpack("<IIQQQQ", f.read(40))
                if p_type == 1 and filesz:
                    if n == index:
                        return phoff + i * phentsize + 32
                    n += 1
        return None

    def undo(self, undo):
        with open(self.path, "r+b") as f:
            for off, data in reversed(undo):
                f.seek(off)
                f.write(data)


# --- running and judging ---------------------------------------------------------------------

COUNTS = ("crash", "hang", "panic", "invalid_json", "multi_line_error", "debugger_traceback")
# Every core: the JSON report with locals, tasks and --why (3.10 has no asyncio support);
# every TEXT_EVERY-th core also the text of `--async --locals --why`.
TEXT_EVERY = 4
# Every NATIVE_EVERY-th arm64 core also through the native unwind (JSON --native, then the
# text of --native-all, in turn).
NATIVE_EVERY = 3
PROGRESS_EVERY = 500


def judge_cli(status, rc, out, err, json_mode):
    """The failure kind of one CLI run, or None when it is a clean outcome."""
    err_text = err.decode("utf-8", "replace")
    if status == "hang":
        return "hang"
    if harness.panic_in(err_text, rc):
        return "panic"
    if rc < 0:
        return "crash"
    if rc == 0:
        if json_mode:
            try:
                json.loads(out)
            except ValueError:
                return "invalid_json"
        if err_text.strip():
            return "multi_line_error"
        return None
    lines = err_text.splitlines()
    if rc != 1 or len(lines) != 1 or not lines[0].startswith("pyunwind: ") or out:
        return "multi_line_error"
    return None


def excerpt(text):
    """The line that says what went wrong (a panic's location and message), else the tail."""
    lines = text.splitlines()
    panic = harness.panic_in(text)
    if panic is not None and panic in lines:
        i = lines.index(panic)
        return "\n".join(lines[i:i + 2])
    return text[-600:]


def run_cli_modes(base, path, env, text, native=None):
    """[(mode, failure kind, detail)] of the failing runs of one corrupted core; ``native``
    (arm64 cores only): None, "json" or "text", a run of the native unwind too."""
    failures = []
    asyncio = base["minor"] >= 11
    # --why reads more of the target (lock objects, value stacks, the core's registers).
    modes = [("--json", "--locals", "--tasks", "--why") if asyncio
             else ("--json", "--locals", "--why")]
    if text:
        modes.append(("--async", "--locals", "--why") if asyncio else ("--locals", "--why"))
    if base["scenario"] in GREENLET_SCENARIOS:
        modes = [m + ("--greenlets",) for m in modes]
    # --heap walks every object: GC lists, containers' items, dict tables, deque blocks.
    modes.append(("--json", "--heap"))
    if native and base["arch"] == "arm64":
        # Frame records, PAC-stripped return addresses, CFI from the sysroot's files, JIT
        # frames (sid's 3.14 with PYTHON_JIT=1).
        modes.append(("--json", "--native", "--locals", "--why") if native == "json"
                     else ("--native-all",))
    for mode in modes:
        status, rc, out, err = cli([*cli_target(base, path), *mode], env=env)
        kind = judge_cli(status, rc, out, err, "--json" in mode)
        if kind:
            failures.append((" ".join(mode), kind, excerpt(err.decode("utf-8", "replace"))))
    return failures


def debugger_failure(status, rc, text):
    if status == "hang":
        return "hang"
    if harness.panic_in(text):
        return "panic"
    if "Traceback (most recent call last)" in text or "Python Exception" in text \
            or "Error occurred in Python" in text:
        return "debugger_traceback"
    if rc is not None and rc < 0:
        return "crash"
    return None


def run_debugger(kind, base, path, env):
    if kind == "gdb":
        # arm64: gdb-multiarch, the guest's files under its sysroot (as test_arm64 runs it).
        gdb = ["gdb-multiarch", "-iex", "set sysroot %s" % base["root"]] \
            if base["arch"] == "arm64" else ["gdb"]
        cmd = [*gdb, "-q", "-batch", "-nx", "-iex", "set auto-load off",
               "-iex", "set debuginfod enabled off", "-x", GDB_SCRIPT,
               "-ex", "py-bt -a --json", "-ex", "py-bt-full", "-ex", "py-tasks",
               "-ex", "py-why --json", "-ex", "bt",
               base["exe"], path]
    else:
        cmd = [os.environ.get("PYUNWIND_LLDB", "/usr/bin/lldb-22"), "-b", "--no-lldbinit",
               "-O", "settings set symbols.enable-external-lookup false", base["exe"], "-c",
               path, "-o", "command script import %s" % LLDB_SCRIPT, "-o", "py-bt -a --json",
               # py-bt-full: with the frame provider on, the core's own native unwind.
               "-o", "py-bt-full", "-o", "py-tasks", "-o", "py-why --json", "-o", "bt all"]
    try:
        p = subprocess.run(cmd, capture_output=True, timeout=DEBUGGER_TIMEOUT_SECONDS, env=env)
    except subprocess.TimeoutExpired as e:
        return debugger_failure("hang", None, ""), (e.stdout or b"")[-600:]
    text = (p.stdout + p.stderr).decode("utf-8", "replace")
    return debugger_failure("ok", p.returncode, text), excerpt(text)


_WORKER = {}


def _worker_init(bases, root):
    _WORKER["bases"] = {(b["interp"], b["scenario"]): b for b in bases}
    _WORKER["dir"] = tempfile.mkdtemp(prefix="w-", dir=root)
    _WORKER["overlays"] = {}


def run_one(job):
    """Run one spec (job = (spec, debuggers, text, native)); return (spec, [(where, kind,
    detail)], secs)."""
    spec, debuggers, text, native = job
    started = time.monotonic()
    key = (spec["interp"], spec["scenario"])
    base = _WORKER["bases"][key]
    ov = _WORKER["overlays"].get(key)
    if ov is None:
        ov = _WORKER["overlays"][key] = Overlay(base, _WORKER["dir"])
    env = harness.child_env({"DEBUGINFOD_URLS": "", "RUST_BACKTRACE": "0", **base["env"]})
    path, undo = ov.apply(spec, _WORKER["dir"])
    try:
        failures = [("cli " + m, k, d) for m, k, d in run_cli_modes(base, path, env, text,
                                                                     native)]
        for dbg in debuggers:
            if dbg == "lldb" and base["arch"] == "arm64":
                continue  # lldb's sample is x86-64 only (see the docstring)
            k, d = run_debugger(dbg, base, path, env)
            if k:
                failures.append((dbg, k, d))
    finally:
        ov.undo(undo)
        if path != ov.path:
            os.unlink(path)
    return spec, failures, time.monotonic() - started


def campaign(bases, specs, jobs, root, debugger_sample, text_every=TEXT_EVERY,
             native_every=NATIVE_EVERY, indexed=None):
    """Run every spec (every ``text_every``-th also in text, every ``native_every``-th arm64
    one also with --native or --native-all; 0: none); return (counts, failures). ``indexed``:
    (index, spec) pairs to run instead, each index the spec's place in the whole run."""
    counts = dict.fromkeys(COUNTS, 0)
    failures = []
    work = []
    # An empty `indexed` (a batch whose bases drew no cores) runs nothing, not every spec.
    for i, spec in enumerate(specs) if indexed is None else indexed:
        native = None
        if native_every and i % native_every == 1:
            native = "text" if i // native_every % 2 else "json"
        work.append((spec, debugger_sample.get(i, ()), bool(text_every) and i % text_every == 0,
                     native))
    ctx = multiprocessing.get_context("fork")
    # The workers' copies go in a directory of this call's own, removed with them.
    root = tempfile.mkdtemp(prefix="workers-", dir=root)
    with ctx.Pool(jobs, initializer=_worker_init, initargs=(bases, root)) as pool:
        started = time.monotonic()
        for done, (spec, fails, _secs) in enumerate(
                pool.imap_unordered(run_one, work, chunksize=4), 1):
            if done % PROGRESS_EVERY == 0:
                print("%d cores in %.0f s; %s" % (done, time.monotonic() - started,
                                                 json.dumps(counts)), flush=True)
            for where, kind, detail in fails:
                counts[kind] += 1
                failures.append({"spec": spec, "where": where, "kind": kind, "detail": detail})
                print("FAIL %s %s %s\n  %s" % (kind, where, json.dumps(spec), detail),
                      flush=True)
    shutil.rmtree(root, ignore_errors=True)
    return counts, failures


def make_bases(pairs, root):
    """One base per (interpreter, scenario) pair (3.10 has no asyncio scenario)."""
    bases = []
    for interp, sc in pairs:
        b = make_base(interp, sc, root)
        if b:
            bases.append(b)
    return bases


def plan(bases, n, seed, gdb, lldb):
    """n specs spread evenly over the bases, and which of them also go through gdb/lldb."""
    rng = random.Random(seed)
    specs = [random_spec(bases[i % len(bases)], rng) for i in range(n)]
    sample = {}
    for dbg, k in (("gdb", gdb), ("lldb", lldb)):
        among = range(n)
        if dbg == "lldb":
            among = [i for i in among if bases[i % len(bases)]["arch"] != "arm64"]
        for i in rng.sample(among, min(k, len(among))):
            sample.setdefault(i, []).append(dbg)
    return specs, sample


def plan_by_pair(pairs, n, seed, gdb, lldb):
    """``plan`` decided before any base is made, so that they can be made a batch at a time:
    spec i goes to pair i % len(pairs) (each pair's specs come from a generator seeded by the
    run's seed and the pair), and which spec indices also go through gdb/lldb."""
    rng = random.Random(seed)
    sample = {}
    for dbg, k in (("gdb", gdb), ("lldb", lldb)):
        among = range(n)
        if dbg == "lldb":
            among = [i for i in among if not is_arm64(pairs[i % len(pairs)][0])]
        for i in rng.sample(among, min(k, len(among))):
            sample.setdefault(i, []).append(dbg)
    indices = {k: list(range(k, n, len(pairs))) for k in range(len(pairs))}
    return indices, sample


def batches(pairs, root, jobs, budget):
    """(pair indices, bases) a batch at a time, each batch's cores in a directory of its own,
    removed once the caller is done with the batch. A batch closes once its cores, plus the
    copy each of ``jobs`` workers keeps of every core it runs, would pass ``budget`` bytes of
    /tmp (a core bigger than that alone is a batch of its own)."""
    batch, made, size = [], [], 0
    where = tempfile.mkdtemp(prefix="bases-", dir=root)
    for k, (interp, sc) in enumerate(pairs):
        b = make_base(interp, sc, where)
        batch.append(k)
        made.append(b)
        size += os.path.getsize(b["core"]) * (1 + jobs)
        if size >= budget or k == len(pairs) - 1:
            yield batch, made
            shutil.rmtree(where, ignore_errors=True)
            batch, made, size = [], [], 0
            where = tempfile.mkdtemp(prefix="bases-", dir=root)
    shutil.rmtree(where, ignore_errors=True)


def run_batched(pairs, plan_of, jobs, root, budget, sample):
    """Every pair's specs, its base made and removed a batch at a time (see ``batches``);
    ``plan_of(k, base)`` gives pair k's (index, spec) list. (counts, failures, specs run, bases
    made, the most bytes of cores at once)."""
    counts, failures = dict.fromkeys(COUNTS, 0), []
    total = made = peak = 0
    for ks, bases in batches(pairs, root, jobs, budget):
        indexed = sorted(x for k, b in zip(ks, bases) for x in plan_of(k, b))
        peak = max(peak, sum(os.path.getsize(b["core"]) for b in bases))
        made += len(bases)
        print("batch of %d bases (%s): %d cores" % (
            len(bases), ", ".join("%s/%s" % (b["interp"], b["scenario"]) for b in bases),
            len(indexed)), flush=True)
        c, f = campaign(bases, None, jobs, root, sample, indexed=indexed)
        for key, v in c.items():
            counts[key] += v
        failures += f
        total += len(indexed)
    return counts, failures, total, made, peak


def write_cores(bases, specs, dest):
    """Each spec's corrupted core as DIR/spec-N.core, with the command that reads it."""
    os.makedirs(dest, exist_ok=True)
    by_key = {(b["interp"], b["scenario"]): b for b in bases}
    for i, spec in enumerate(specs):
        base = by_key[(spec["interp"], spec["scenario"])]
        ov = Overlay(base, dest)
        path, undo = ov.apply(spec, dest)
        out = os.path.join(dest, "spec-%d.core" % i)
        shutil.copyfile(path, out)
        ov.undo(undo)
        print("pyunwind " + " ".join(cli_target(base, out)))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cores", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=1)
    # One worker per CPU: each keeps a mutated copy of its core in /tmp (up to 2 GB for the
    # big bases), and 3 per CPU filled /tmp on the 2-core machine while the test suite, which
    # makes its cores there too, ran beside it (stop 47).
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    # /tmp the bases and the workers' copies of them may fill at once (issue 50: all 92 bases
    # made up front, each copied by every worker, took up to 57 GB). A batch closes past it, so
    # it may overshoot by its last base and copies (3.3 GB for 3.13t's largest with 2 workers):
    # 12 keeps a run within 16 GB.
    ap.add_argument("--tmp-budget", type=int, default=12, metavar="GB",
                    help="bases are made and removed a batch at a time within this many GB")
    ap.add_argument("--gdb", type=int, default=40)
    ap.add_argument("--lldb", type=int, default=20)
    ap.add_argument("--interp", action="append", help="only these interpreter ids")
    ap.add_argument("--arch", action="append", choices=ARCHES,
                    help="only these architectures' interpreters (default: all)")
    ap.add_argument("--scenario", action="append", choices=SCENARIOS)
    ap.add_argument("--replay", nargs="*", help="spec files to run instead of random ones")
    ap.add_argument("--write-cores", metavar="DIR",
                    help="with --replay: write each corrupted core to DIR and stop")
    ap.add_argument("--out", default="target/fuzz-campaign",
                    help="where failing specs and the summary go")
    args = ap.parse_args(argv)
    started = time.monotonic()
    replay = [json.load(open(p)) for p in args.replay or ()]
    arches = args.arch or ARCHES
    if replay and not args.arch:
        arches = {"arm64" if s["interp"] in ARM64_INTERPRETERS else "x86_64" for s in replay}
    interps = [i for i in interpreters(arches) if not args.interp or i.id in args.interp]
    pairs = [(i, sc) for i in interps for sc in args.scenario or SCENARIOS if supports(i, sc)]
    if replay:
        wanted = {(s["interp"], s["scenario"]) for s in replay}
        pairs = [p for p in pairs if (p[0].id, p[1]) in wanted]
    root = tempfile.mkdtemp(prefix="pyunwind-fuzz-")
    try:
        if replay and args.write_cores:
            write_cores(make_bases(pairs, root), replay, args.write_cores)
            return 0
        if replay:
            sample = {i: ["gdb"] for i in range(len(replay))}

            def plan_of(k, base):
                key = (base["interp"], base["scenario"])
                return [(i, s) for i, s in enumerate(replay) if (s["interp"], s["scenario"]) == key]
        else:
            indices, sample = plan_by_pair(pairs, args.cores, args.seed, args.gdb, args.lldb)

            def plan_of(k, base):
                rng = random.Random("%d:%s:%s" % (args.seed, base["interp"], base["scenario"]))
                return [(i, random_spec(base, rng)) for i in indices[k]]
        counts, failures, run, made, peak = run_batched(pairs, plan_of, args.jobs, root,
                                                        args.tmp_budget << 30, sample)
        print("%d base cores, at most %.1f GB of them at once" % (made, peak / 1e9), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    elapsed = time.monotonic() - started
    os.makedirs(args.out, exist_ok=True)
    for i, f in enumerate(failures):
        with open(os.path.join(args.out, "failure-%04d.json" % i), "w") as out:
            json.dump(f, out, indent=1)
    summary = {"cores": run, "base_cores": made, "seconds": round(elapsed),
               "debugger_runs": sum(len(v) for v in sample.values()), "counts": counts}
    with open(os.path.join(args.out, "summary.json"), "w") as out:
        json.dump(summary, out, indent=1)
    print(json.dumps(summary))
    return 1 if any(counts.values()) else 0


if __name__ == "__main__":
    sys.exit(main())

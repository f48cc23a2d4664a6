"""lldb: the host (what lldb knows of the target: its threads, registers, memory and modules),
the settings, and the session of each stop. The commands (pyunwind_lldb_commands), the frame
provider (pyunwind_lldb_provider) and the stop hooks (pyunwind_lldb_hooks) work through it.

The selected Python frame (py-up, py-down, and what py-list, py-locals and py-print show) is kept
per thread and per stop, as an index into the thread's Python stack, not tied to lldb's selected
native frame: lldb's unwinder may stop before the interpreter loop (stripped builds), and the
Python stack read from the thread state is the one thing always there.
"""

import bisect
import contextlib
import json
import os
import re
import sys

import lldb

import pyunwind_frontend as fe

LLDB_INVALID_ADDRESS = 0xFFFFFFFFFFFFFFFF
# A stack deeper than this is not walked for native frame names (a corrupt stack can make
# lldb's unwinder produce frames without end).
MAX_NATIVE_FRAMES = 100000
# Frames whose registers are tried for the thread pointer (fs_base): synthetic frames have none.
MAX_REGISTER_FRAMES = 8

# debugger id -> its platform sysroot, as the last command found it (see LldbHost.sysroot).
_sysroots = {}
state = fe.StopState()
# `pyunwind set NAME VALUE`: the settings and their allowed values.
settings = {"memory": "auto", "hide-internal": "on", "frame-provider": "on", "frame-addresses": "auto"}
SETTING_CHOICES = {"memory": fe.MEMORY_MODES, "hide-internal": ("on", "off"), "frame-provider": ("on", "off"),
                   "frame-addresses": ("auto", "on", "off")}
# Set while a command asks lldb for frames: frame providers then hand out lldb's own frames
# and plan later (see PythonFrameProvider.get_frame_at_index).
_deferring = False

# lldb 22+: scripted frame providers, which put Python frames into lldb's own `bt`.
HAS_PROVIDER_API = hasattr(lldb.SBTarget, "RegisterScriptedFrameProvider")


def _lldb_major():
    """lldb's major version (`lldb version 24.0.0`), 0 where its version string says none."""
    m = re.match(r"lldb version (\d+)", lldb.SBDebugger.GetVersionString() or "")
    return int(m.group(1)) if m else 0


# lldb 24+ (llvm PR #208242; 23.1 lacks it): the SB calls of code lldb calls back (a frame
# provider's __init__ and get_frame_at_index) take no API lock, whichever thread lldb calls it on.
CALLBACKS_SKIP_API_LOCK = _lldb_major() >= 24

# The module lldb imported (lldb-scripts/pyunwind_lldb.py): lldb is given our classes and
# functions by their names in it (`pyunwind_lldb.ProviderStopHook`, which `target stop-hook
# list` shows), and it holds them (see pyunwind_lldb_commands.lldb_names).
_script_module = "pyunwind_lldb"


def set_script_module(name):
    global _script_module
    _script_module = name


def lldb_name(name):
    """`name` as lldb finds it: an attribute of the module it imported."""
    return "%s.%s" % (_script_module, name)


# --- what lldb knows ----------------------------------------------------------------------------


def _register(frame, name):
    """The value of `frame`'s register `name`, None where lldb has none (synthetic frames
    have no registers; lldb shows no orig_rax on x86-64)."""
    reg = frame.FindRegister(name)
    return reg.GetValueAsUnsigned() if reg.IsValid() and reg.GetValue() is not None else None


def thread_pointer(frames):
    """fs_base of the thread (the pthread pointer), from the first frame that has registers.
    `frames` is an SBThread or an SBFrameList."""
    for i in range(MAX_REGISTER_FRAMES):
        f = frames.GetFrameAtIndex(i)
        if not f.IsValid():
            break
        tp = _register(f, "fs_base")
        if tp is not None:
            return tp
        if not (hasattr(f, "IsSynthetic") and f.IsSynthetic()):
            # lldb's own frame without it (arm64 has none): nor has any frame further out. Read
            # while a command defers (see _deferred), each frame read is one the frame provider
            # hands out as lldb's own and keeps (an eval-loop frame among 8).
            break
    return None


def function_name(frame):
    """The frame's function name, None where lldb has none: lldb calls a stripped function
    `___lldb_unnamed_symbol_<address>` (from its unwind info), which the core would take for a
    name, while it places unnamed frames by their address."""
    name = frame.GetFunctionName()
    return None if name is None or name.startswith(UNNAMED_SYMBOL_PREFIX) else name


# lldb's name for a function its symbol table lacks (lldb 19: `___lldb_unnamed_symbol3755`,
# lldb 22: `___lldb_unnamed_symbol_9ced0`).
UNNAMED_SYMBOL_PREFIX = "___lldb_unnamed_symbol"


def _core_file(process):
    if process.GetPluginName() != "elf-core":
        return None
    spec = process.GetCoreFile()
    return spec.fullpath if spec.IsValid() else None


def _maps(target):
    """The loaded files' segments (lldb's top-level ELF sections) as maps rows: lldb has no
    `info proc mappings` for cores, and its module list serves live processes and cores alike."""
    rows = []
    for m in target.module_iter():
        path = m.GetFileSpec().fullpath
        for sec in m.section_iter():
            start = sec.GetLoadAddress(target)
            size = sec.GetByteSize()
            if start == LLDB_INVALID_ADDRESS or not size:
                continue
            rows.append((start, start + size, sec.GetFileOffset(), path))
    return fe.maps_text(rows)


@contextlib.contextmanager
def _deferred():
    global _deferring
    old, _deferring = _deferring, True
    try:
        yield
    finally:
        _deferring = old


def deferring():
    """Whether a command is asking lldb for frames (see _deferred)."""
    return _deferring


# --- cores without NT_FILE (qemu-user's) and remote stubs: the modules and PAC mask lldb lacks ---

# (process unique id, sysroot) of each target prepare_target has listed the modules of (a
# process's are listed again at each command) and said the missing ones of.
_prepared = set()
# Unique ids of the processes whose address mask prepare_target has looked at.
_masked = set()
# The non-address bits of a return address on arm64 when the core has no NT_ARM_PAC_MASK: a
# 48-bit virtual address space, as the core itself assumes (src/arch/aarch64/mod.rs). lldb keeps
# only the top byte (TBI) then, and its unwind stops at the first signed return address.
AARCH64_NON_ADDRESS_MASK = 0xFFFF000000000000
TOP_BYTE_MASK = 0xFF00000000000000


def _is_remote(host):
    """Whether the target is a live process not of this machine: behind a remote stub such as
    qemu-user's (`gdb-remote PORT`), which shows lldb no mappings and no auxiliary vector."""
    return host.process.IsValid() and host.core_file() is None and not host.is_local()


def on_disk(module):
    """Whether lldb read `module` from a file of this machine."""
    return os.path.isfile(module.GetFileSpec().fullpath or "")


def prepare_target(host, modules=True):
    """Gives lldb what an arm64 core without NT_FILE (qemu-user writes none), or a process
    behind a remote stub (qemu-user's `-g PORT`), leaves it without, from the files under the
    platform sysroot (`platform select remote-linux --sysroot DIR`, or `pyunwind sysroot DIR`):
    the pointer-authentication mask of arm64 (before lldb unwinds past a signed return
    address; lldb reads NT_ARM_PAC_MASK when a kernel's core has it, and gets the mask from
    lldb-server), and, with `modules`, the modules of the dynamic linker's list that lldb did
    not load (`Session.modules`): lldb loads none of a core's when the sysroot comes after the
    core, never a core's dynamic linker (whose name is in text the core left out), and none of
    a remote process's when it has no sysroot. Once per core and sysroot; for a process at
    each command (it may have loaded more since; the list is the stop's session's). Says in
    one line, once, what could not be found."""
    process, target = host.process, host.target
    if not process.IsValid():
        return
    is_core = host.core_file() is not None
    # Read here for every core, so that the session's key (_key) has it from the start.
    root = host.sysroot()
    if not is_core and not _is_remote(host):
        return
    # x86-64 cores (gcore's, the kernel's) have NT_FILE, and lldb finds their modules itself.
    if is_core and _arch(target) != "aarch64":
        return
    if _arch(target) == "aarch64" and process.GetUniqueID() not in _masked:
        _masked.add(process.GetUniqueID())
        if hasattr(process, "SetAddressMask"):
            mask = process.GetAddressMask(lldb.eAddressMaskTypeCode)
            if mask & ~TOP_BYTE_MASK == 0:
                process.SetAddressMask(lldb.eAddressMaskTypeAll, AARCH64_NON_ADDRESS_MASK)
                _frames_changed()
    key = (process.GetUniqueID(), root)
    if not modules or (is_core and key in _prepared):
        return
    what = "the core's" if is_core else "the process's"
    debugger = target.GetDebugger()
    try:
        listing = json.loads(_modules_session(host).modules())
    except Exception as e:
        if key in _prepared:
            return
        _prepared.add(key)
        # The command itself says it again, if it needs the session.
        why = fe.error_line(e, fe.loaded_core(), "lldb")
        write_error_line(debugger, "pyunwind: cannot list %s modules: %s" % (what, why[why.startswith("pyunwind: ") and 10:]))
        return
    for m in listing["modules"]:
        there = target.ResolveLoadAddress(m["base"]).GetModule()
        if there.IsValid():
            # lldb 24 puts a module of no file where the dynamic linker's list names one it
            # cannot find (the core's path, not the sysroot's): the file found replaces it.
            if on_disk(there) or not os.path.isfile(m["file"] or ""):
                continue
            target.RemoveModule(there)
        module = target.AddModule(m["file"], target.GetTriple(), None)
        if module.IsValid():
            header = module.GetObjectFileHeaderAddress().GetFileAddress()
            target.SetModuleLoadAddress(module, m["base"] - header)
            _frames_changed()
    problems = listing["problems"]
    if problems and key not in _prepared:
        where = "under %s" % root if root else "without a sysroot"
        write_error_line(debugger, fe.printable(
            "pyunwind: %d of %s loaded files not found %s (%s%s); give their directory "
            "with `pyunwind sysroot DIR` (or `platform select remote-linux --sysroot DIR` before "
            "%s)" % (len(problems), what, where, problems[0], ", ..." if len(problems) > 1 else "",
                     "loading the core" if is_core else "connecting")))
    _prepared.add(key)


# How many times prepare_target changed what lldb's unwind finds (a module, the address mask)
# in this lldb: frames read before a change are not lldb's frames after it.
_frame_changes = 0


def _frames_changed():
    global _frame_changes
    _frame_changes += 1


def frame_changes():
    """See _frame_changes."""
    return _frame_changes


class _DirectHost:
    """The host's core read directly, whatever `pyunwind set memory` says: the modules come
    from the core's own notes and memory."""

    def __init__(self, host):
        self.host = host

    def __getattr__(self, name):
        return getattr(self.host, name)

    def memory_mode(self):
        return "auto"


def _modules_session(host):
    """A session whose modules are the target's own: a core read directly, or the session of
    a remote process (whose maps are none: the core follows the dynamic linker's list)."""
    if host.memory_mode() != "debugger" or host.core_file() is None:
        return session(host, with_ids=False)
    return fe.open_session(fe.core(), _DirectHost(host))


# Results longer than this are written straight to the debugger's output (LldbHost.write).
DIRECT_OUTPUT_CHARS = 1 << 20


class LldbHost(fe.Host):
    """The target, process and thread one command (or one frame provider) works on."""

    def __init__(self, target, process, thread, result=None, frames=None):
        self.target = target
        self.process = process
        self.thread_ = thread
        self.result = result
        # Where this thread's registers come from: the provider passes lldb's own (input)
        # frames, so that it never asks lldb for the frames it is itself providing.
        self.frames = frames if frames is not None else thread

    def memory_mode(self):
        return settings["memory"]

    def core_file(self):
        return _core_file(self.process)

    def executable(self):
        spec = self.target.GetExecutable()
        return spec.fullpath if spec.IsValid() else None

    def sysroot(self):
        # `platform select host --sysroot DIR`: SBPlatform has no getter, `platform status`
        # prints it. Only a command may run another command: from the frame provider (lldb's
        # event thread, API lock held) that aborts lldb, so the provider uses what the last
        # command found.
        debugger = self.target.GetDebugger()
        if self.result is None:
            return _sysroots.get(debugger.GetID())
        out = lldb.SBCommandReturnObject()
        debugger.GetCommandInterpreter().HandleCommand("platform status", out)
        root = None
        for line in (out.GetOutput() or "").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "Sysroot" and value.strip() not in ("", "/"):
                root = value.strip()
        _sysroots[debugger.GetID()] = root
        return root

    def pid(self):
        # A process of this machine only: the core looks in its /proc (qemu-user's stub calls
        # every process 1).
        return self.process.GetProcessID() if self.is_local() else None

    def is_local(self):
        platform = self.target.GetPlatform()
        host = platform.IsHost() if hasattr(platform, "IsHost") else platform.GetName() == "host"
        if not (host and self.process.IsValid() and self.process.GetPluginName() != "elf-core"):
            return False
        # lldb takes a remote stub for the host's when it is given no platform (`gdb-remote
        # PORT` alone): a process of this machine has its threads in its /proc.
        pid = self.process.GetProcessID()
        first = self.process.GetThreadAtIndex(0)
        return bool(pid) and first.IsValid() and os.path.isdir("/proc/%d/task/%d" % (pid, first.GetThreadID()))

    def exe_base(self):
        exe = self.target.FindModule(self.target.GetExecutable())
        if not exe.IsValid():
            return None
        base = exe.GetObjectFileHeaderAddress().GetLoadAddress(self.target)
        return None if base == LLDB_INVALID_ADDRESS else base

    def read_memory(self, addr, size):
        err = lldb.SBError()
        data = self.process.ReadMemory(addr, size, err)
        if err.Fail() or data is None:
            # A core leaves out file-backed pages that were never written; the target reads
            # them from the loaded files, as gdb does.
            # (It may return the bytes and still report the core's failure.)
            err = lldb.SBError()
            data = self.target.ReadMemory(lldb.SBAddress(addr, self.target), size, err)
            if data is not None and len(data) == size:
                return bytes(data)
        if err.Fail() or data is None:
            raise OSError("cannot read %d bytes at %#x: %s" % (size, addr, err.GetCString()))
        return bytes(data)

    def maps(self):
        if _is_remote(self):
            # lldb knows only what its platform found, and a remote stub shows no mappings:
            # none, so that the core follows the dynamic linker's list itself (exe_base), as
            # gdb does on qemu's stub. It needs the executable placed.
            if self.exe_base() is None:
                raise fe.FrontendError(
                    "pyunwind: lldb has no executable for this remote process: give it before "
                    "connecting (`target create EXE`, or `file EXE`), as its stub does not name it")
            return ""
        return _maps(self.target)

    def thread_ids(self):
        ids = []
        with _deferred():
            for t in self.process:
                tp = thread_pointer(t)
                if tp is not None:
                    state.thread_pointers[t.GetThreadID()] = tp
                    ids.append((t.GetThreadID(), tp))
        return ids

    def thread_names(self):
        # lldb's name: the system's for a live process. On a core lldb names its first thread
        # after NT_PRPSINFO's pr_fname, the process's name (gcore: argv[0]'s), whichever thread
        # that is: none are taken there, and the core's own record is read instead.
        if self.core_file():
            return None
        names = []
        for t in self.process:
            name = t.GetName()
            if name:
                names.append((t.GetThreadID(), name))
        return names

    def thread_syscalls(self, names):
        # lldb's innermost frame of each thread (its own, not one a frame provider made). lldb
        # shows no orig_rax on x86-64: those threads are left to /proc (see Host).
        calls = []
        with _deferred():
            for t in self.process:
                f = t.GetFrameAtIndex(0)
                if not f.IsValid() or (hasattr(f, "IsSynthetic") and f.IsSynthetic()):
                    continue
                values = fe.register_values(lambda name: _register(f, name), names)
                if values is not None:
                    calls.append((t.GetThreadID(), values))
        return calls

    def thread(self):
        if self.thread_ is None or not self.thread_.IsValid():
            raise fe.FrontendError("pyunwind: no thread selected (is a program running or a core loaded?)")
        lwp = self.thread_.GetThreadID()
        with _deferred():
            tp = thread_pointer(self.frames)
        if tp is not None:
            state.thread_pointers[lwp] = tp
        return lwp, tp

    def write(self, text):
        text = fe.printable(text)
        if len(text) > DIRECT_OUTPUT_CHARS and self._write_direct(text):
            return
        self.result.Print(text)

    def _write_direct(self, text):
        """Writes `text` to the debugger's output stream itself: lldb prints a command's result
        with two writes a line (0.3 s for the 8 MB of a 100,000-frame py-bt). The same stream,
        so the order of what lldb printed before stays; False when it cannot be written."""
        if not hasattr(lldb, "SBFile"):
            return False
        out = self.target.GetDebugger().GetOutputFile()
        if out is None or not out.IsValid():
            return False
        data = text.encode("utf-8", "surrogateescape")
        error, written = out.Write(data)
        out.Flush()
        if error.Success() and written == len(data):
            return True
        # Part of it was written: the rest goes the usual way, not the whole text twice.
        self.result.Print(data[written:].decode("utf-8", "replace"))
        return True

    def native_frames(self, session=None):
        t = self.thread_
        if t is None or not t.IsValid():
            return None
        if _provider_on():
            # The thread's frames are the provided ones, which the core cannot splice.
            frames = [t.GetFrameAtIndex(i) for i in range(min(t.GetNumFrames(), MAX_NATIVE_FRAMES))]
            return self._own_frames(session, frames, provided=True) if session is not None else None
        with _deferred():
            frames = [t.GetFrameAtIndex(i) for i in range(min(t.GetNumFrames(), MAX_NATIVE_FRAMES))]
            if not frames or any(f.IsSynthetic() for f in frames if hasattr(f, "IsSynthetic")):
                return None
            lldbs = {
                "names": [function_name(f) for f in frames],
                "pcs": [f.GetPC() for f in frames],
                "sps": [f.GetSP() for f in frames],
                "wait_addr": _register(frames[0], _first_argument_register(self.target)),
            }
            if session is None or self._places_every_python_frame(session, lldbs):
                return lldbs
            # lldb 19 stops unwinding at CPython's call plumbing (PyObject_Vectorcall): then
            # the core's own unwind, which goes further, places the Python frames.
            own = self._own_frames(session, frames, provided=False)
        return own if own is not None and len(own["pcs"]) > len(frames) else lldbs

    def unnumbered_native_frames(self, session):
        # The core's own unwind from the core file's registers: lldb's frames would make the
        # frame provider plan the whole thread first (5.5 s for 100,000 Python frames).
        t = self.thread_
        if t is None or not t.IsValid() or session is None:
            return self.native_frames(session)
        lwp = self.thread()[0]
        own = None
        if _provider_on():
            # A core's registers first; a live thread's innermost frame then (it makes the
            # provider plan this thread, as listing every provided frame below would, and more:
            # after that listing lldb 22 took 20 s for the next `bt` of a 1,000-level recursion).
            own = fe.own_unnumbered_natives(session, lwp=lwp)
            f0 = t.GetFrameAtIndex(0) if own is None else None
            if f0 is not None and not (hasattr(f0, "IsSynthetic") and f0.IsSynthetic()):
                own = fe.own_unnumbered_natives(session, lwp=lwp, regs=frame_registers(f0))
        else:
            own = fe.own_unnumbered_natives(session, lwp=lwp, regs=frame_registers(t.GetFrameAtIndex(0)))
        return own or self.native_frames(session)

    def _places_every_python_frame(self, session, natives):
        lwp, tp = self.thread()
        count = len(json.loads(session.stack_entries(lwp=lwp, tp=tp)))
        return places_every_python_frame(session, lwp, tp, count, natives["names"], natives["sps"],
                                         natives["pcs"])

    def _own_frames(self, session, frames, provided):
        """The thread's native frames as the core unwinds them from the registers of lldb's
        innermost frame, each with the level lldb shows it at (see `Session.stack_entries`):
        the frame lldb shows with its pc, and for the frame provider's Python frames (`provided`),
        the level the provider gave each."""
        if not frames:
            return None
        if hasattr(frames[0], "IsSynthetic") and frames[0].IsSynthetic():
            # A frame of the provider innermost (a JIT frame): the registers the provider
            # started from, if it planned this stop.
            key = plan_key(self.process, self.thread_.GetThreadID())
            regs = plan_registers.get(key) if provided else None
            if not regs:
                return None
        else:
            regs = frame_registers(frames[0])
        own = json.loads(session.own_natives(regs))
        levels = [None] * len(own["pcs"])
        index = PcIndex(own["pcs"])
        k = 0
        for level, f in enumerate(frames):
            # (A Python frame's pc, if any, is its interpreter frame's address: never code.)
            found = index.next_at(f.GetPC(), k)
            if found is not None:
                levels[found] = level
                k = found + 1
        python_levels = None
        if provided:
            shown = plan_levels.get(plan_key(self.process, self.thread_.GetThreadID()), {})
            python_levels = fe.levels_of_python_frames(shown)
        return {"names": own["names"], "pcs": own["pcs"], "sps": own["sps"], "wait_addr": own["wait_addr"],
                "levels": levels, "python_levels": python_levels}

    def selected_level(self):
        t = self.thread_
        if t is None or not t.IsValid():
            return None
        if not _provider_on() and self.native_frames() is None:
            return None
        return t.GetSelectedFrame().GetFrameID()

    def select_level(self, level):
        self.thread_.SetSelectedFrame(level)


# Registers the core's own unwind starts from, by architecture: lldb names aarch64's x29 and
# x30 `fp` and `lr` (the core knows both names).
OWN_UNWIND_REGISTERS = {"x86_64": fe.UNWIND_REGISTERS["x86_64"],
                        "aarch64": fe.UNWIND_REGISTERS["aarch64"] | {"fp", "lr"}}
# The first argument's register (the address a futex wait blocks on), by architecture.
FIRST_ARGUMENT_REGISTER = {"x86_64": "rdi", "aarch64": "x0"}


def _arch(target):
    """"aarch64" or "x86_64", from the target's triple."""
    return fe.arch_of(target.GetTriple() or "")


def _first_argument_register(target):
    return FIRST_ARGUMENT_REGISTER[_arch(target)]


def _provider_on():
    return HAS_PROVIDER_API and settings["frame-provider"] == "on"


def plan_key(process, lwp):
    return (process.GetUniqueID(), process.GetStopID(), lwp)


# plan_key -> {Python frame index: the level the provider shows it at}, from the last plan.
plan_levels = {}

# plan_key -> the registers of lldb's innermost frame the last plan started from: a command's
# own unwind starts there when the provider shows another frame innermost (a JIT frame).
plan_registers = {}


def frame_registers(frame):
    """{name: value} of `frame`'s OWN_UNWIND_REGISTERS."""
    regs = {}
    names = OWN_UNWIND_REGISTERS[_arch(frame.GetThread().GetProcess().GetTarget())]
    for regset in frame.GetRegisters():
        for r in regset:
            if r.GetName() in names and r.GetValue() is not None:
                regs[r.GetName()] = r.GetValueAsUnsigned()
    return regs


def places_every_python_frame(session, lwp, tp, count, names, sps, pcs):
    """Whether the core's splice of these native frames of thread `lwp` places all its `count`
    Python frames: not where lldb's unwind stopped early."""
    actions = json.loads(session.splice(names, lwp=lwp, tp=tp, sps=sps, pcs=pcs, hide_internal=False))
    return sum(len(a["frames"]) for a in actions if a["action"] == "python") >= count


class PcIndex:
    """The pcs of the core's own unwind (`Session.own_natives`), to match lldb's frames with its
    frames in order: each of lldb's frames is the core's with its pc, the first one not before
    the last match."""

    def __init__(self, pcs):
        self._at = {}
        for i, pc in enumerate(pcs):
            self._at.setdefault(pc, []).append(i)

    def next_at(self, pc, start):
        """The first index of `pc` at or after `start`, or None."""
        found = self._at.get(pc, ())
        n = bisect.bisect_left(found, start)
        return found[n] if n < len(found) else None


def _key(host):
    p = host.process
    # The sysroot the last command found (prepare_target reads it first): a new one opens a
    # new session, which finds the files the old one could not.
    root = _sysroots.get(host.target.GetDebugger().GetID())
    return (p.GetUniqueID(), p.GetProcessID(), p.GetStopID(), host.core_file(), settings["memory"], root)


def _open(host):
    return lambda ids: fe.open_session(fe.core(), host, ids)


def session(host, with_ids=True):
    """The session of this stop. Commands ask for it `with_ids` (3.10 needs every thread's ids
    for `py-bt -a`); the frame provider does not, since gathering them makes lldb unwind every
    thread, which runs the provider again."""
    if not host.process.IsValid():
        raise fe.FrontendError("pyunwind: no process (run a program, attach or load a core)")
    if with_ids:
        return state.with_thread_ids(_key(host), _open(host), host.thread_ids)
    return state.get(_key(host), lambda: _open(host)(None))


def write_error_line(debugger, line):
    err = debugger.GetErrorFile()
    if err is not None and err.IsValid():
        err.Write((line + "\n").encode())
        err.Flush()
    else:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()

"""pyunwind for lldb: `command script import /path/to/lldb-scripts/pyunwind_lldb.py`.

Registers the py-* commands (the same as in gdb, from pylib/pyunwind_frontend.py), a `pyunwind`
command for settings, and on lldb 22+ a scripted frame provider that puts Python frames, and
names for JIT and perf-trampoline frames, into lldb's own `bt`. Thin: decoding, text rendering
and the unwinding through JIT code are in the Rust core.

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
import threading
import time

import lldb

# A pip install keeps pylib's modules beside this script; a checkout in ../pylib.
_here = os.path.dirname(os.path.realpath(__file__))
_pylib = _here if os.path.isfile(os.path.join(_here, "pyunwind_frontend.py")) else os.path.join(
    os.path.dirname(_here), "pylib")
if _pylib not in sys.path:
    sys.path.insert(0, _pylib)

import pyunwind_frontend as fe  # noqa: E402

LLDB_INVALID_ADDRESS = 0xFFFFFFFFFFFFFFFF
PROVIDER_CLASS = __name__ + ".PythonFrameProvider"
# A stack deeper than this is not walked for native frame names (a corrupt stack can make
# lldb's unwinder produce frames without end).
MAX_NATIVE_FRAMES = 100000
# Frames whose registers are tried for the thread pointer (fs_base): synthetic frames have none.
MAX_REGISTER_FRAMES = 8
# How long a frame provider on lldb's event-handler thread waits for the target's API lock.
API_LOCK_WAIT_SECONDS = 0.25
# How often the new-target watcher looks for lldb's events.
TARGET_POLL_SECONDS = 0.05

_core = None
# debugger id -> its platform sysroot, as the last command found it (see LldbHost.sysroot).
_sysroots = {}
_state = fe.StopState()
_commands = None
# `pyunwind set NAME VALUE`: the settings and their allowed values.
_settings = {"memory": "auto", "hide-internal": "on", "frame-provider": "on", "frame-addresses": "auto"}
_CHOICES = {"memory": fe.MEMORY_MODES, "hide-internal": ("on", "off"), "frame-provider": ("on", "off"),
            "frame-addresses": ("auto", "on", "off")}
# target -> id of our frame provider registered on it.
_providers = {}
# token -> the target a provider was registered on; the provider gets its token in `args`, so
# that it can find its own target without an SB call that takes that target's API lock.
_provider_targets = {}
# Set while a command asks lldb for frames: frame providers then hand out lldb's own frames
# and plan later (see PythonFrameProvider.get_frame_at_index).
_deferring = False


def core():
    global _core
    if _core is None:
        _core = fe.load_core_module()
    return _core


# --- what lldb knows ----------------------------------------------------------------------------


def _register(frame, name):
    """The value of `frame`'s register `name`, None where lldb has none (synthetic frames
    have no registers; lldb shows no orig_rax on x86-64)."""
    reg = frame.FindRegister(name)
    return reg.GetValueAsUnsigned() if reg.IsValid() and reg.GetValue() is not None else None


def _thread_pointer(frames):
    """fs_base of the thread (the pthread pointer), from the first frame that has registers.
    `frames` is an SBThread or an SBFrameList."""
    for i in range(MAX_REGISTER_FRAMES):
        f = frames.GetFrameAtIndex(i)
        if not f.IsValid():
            break
        tp = _register(f, "fs_base")
        if tp is not None:
            return tp
    return None


def _function_name(frame):
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


# --- cores without NT_FILE (qemu-user's) and remote stubs: the modules and PAC mask lldb lacks ---

# (process unique id, sysroot) of each target _prepare_target has listed the modules of (a
# process's are listed again at each command) and said the missing ones of.
_prepared = set()
# Unique ids of the processes whose address mask _prepare_target has looked at.
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


def _prepare_target(host, modules=True):
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
        why = fe.error_line(e, _core, "lldb")
        _write_error_line(debugger, "pyunwind: cannot list %s modules: %s" % (what, why[why.startswith("pyunwind: ") and 10:]))
        return
    for m in listing["modules"]:
        if target.ResolveLoadAddress(m["base"]).GetModule().IsValid():
            continue
        module = target.AddModule(m["file"], target.GetTriple(), None)
        if module.IsValid():
            header = module.GetObjectFileHeaderAddress().GetFileAddress()
            target.SetModuleLoadAddress(module, m["base"] - header)
    problems = listing["problems"]
    if problems and key not in _prepared:
        where = "under %s" % root if root else "without a sysroot"
        _write_error_line(debugger, fe.printable(
            "pyunwind: %d of %s loaded files not found %s (%s%s); give their directory "
            "with `pyunwind sysroot DIR` (or `platform select remote-linux --sysroot DIR` before "
            "%s)" % (len(problems), what, where, problems[0], ", ..." if len(problems) > 1 else "",
                     "loading the core" if is_core else "connecting")))
    _prepared.add(key)


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
    return fe.open_session(core(), _DirectHost(host))


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
        return _settings["memory"]

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
                tp = _thread_pointer(t)
                if tp is not None:
                    _state.thread_pointers[t.GetThreadID()] = tp
                    ids.append((t.GetThreadID(), tp))
        return ids

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
            tp = _thread_pointer(self.frames)
        if tp is not None:
            _state.thread_pointers[lwp] = tp
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
                "names": [_function_name(f) for f in frames],
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
        regs = None
        if not _provider_on():
            regs = _registers(t.GetFrameAtIndex(0))
        own = fe.own_unnumbered_natives(session, lwp=self.thread()[0], regs=regs)
        return own or self.native_frames(session)

    def _places_every_python_frame(self, session, natives):
        lwp, tp = self.thread()
        count = len(json.loads(session.stack_entries(lwp=lwp, tp=tp)))
        actions = json.loads(session.splice(natives["names"], lwp=lwp, tp=tp, hide_internal=False,
                                            sps=natives["sps"], pcs=natives["pcs"]))
        return sum(len(a["frames"]) for a in actions if a["action"] == "python") >= count

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
            key = _plan_key(self.process, self.thread_.GetThreadID())
            regs = _input_registers.get(key) if provided else None
            if not regs:
                return None
        else:
            regs = _registers(frames[0])
        own = json.loads(session.own_natives(regs))
        levels = [None] * len(own["pcs"])
        at = {}
        for i, pc in enumerate(own["pcs"]):
            at.setdefault(pc, []).append(i)
        k = 0
        for level, f in enumerate(frames):
            # lldb's frame is ours with its pc, the first one not before the last match
            # (a Python frame's pc, if any, is its interpreter frame's address: never code).
            found = at.get(f.GetPC(), [])
            n = bisect.bisect_left(found, k)
            if n < len(found):
                levels[found[n]] = level
                k = found[n] + 1
        python_levels = None
        if provided:
            shown = _python_levels.get(_plan_key(self.process, self.thread_.GetThreadID()), {})
            python_levels = [shown.get(i) for i in range(max(shown, default=-1) + 1)]
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
    """"aarch64" or "x86_64", from the target's triple (lldb: `aarch64--linux`, `arm64-…`)."""
    triple = target.GetTriple() or ""
    return "aarch64" if triple.startswith(("aarch64", "arm64")) else "x86_64"


def _first_argument_register(target):
    return FIRST_ARGUMENT_REGISTER[_arch(target)]


def _provider_on():
    return _has_provider_api and _settings["frame-provider"] == "on"


def _plan_key(process, lwp):
    return (process.GetUniqueID(), process.GetStopID(), lwp)


# _plan_key -> {Python frame index: the level the provider shows it at}, from the last plan.
_python_levels = {}


def _key(host):
    p = host.process
    # The sysroot the last command found (_prepare_target reads it first): a new one opens a
    # new session, which finds the files the old one could not.
    root = _sysroots.get(host.target.GetDebugger().GetID())
    return (p.GetUniqueID(), p.GetProcessID(), p.GetStopID(), host.core_file(), _settings["memory"], root)


def _open(host):
    return lambda ids: fe.open_session(core(), host, ids)


def session(host, with_ids=True):
    """The session of this stop. Commands ask for it `with_ids` (3.10 needs every thread's ids
    for `py-bt -a`); the frame provider does not, since gathering them makes lldb unwind every
    thread, which runs the provider again."""
    if not host.process.IsValid():
        raise fe.FrontendError("pyunwind: no process (run a program, attach or load a core)")
    if with_ids:
        return _state.with_thread_ids(_key(host), _open(host), host.thread_ids)
    return _state.get(_key(host), lambda: _open(host)(None))


# --- commands -----------------------------------------------------------------------------------


class _Command:
    """One py-* command; `name` is set by the subclasses made in _register_commands."""

    name = None

    def __init__(self, debugger, internal_dict):
        pass

    def get_short_help(self):
        return fe.Commands.HELP[self.name].splitlines()[0]

    def get_long_help(self):
        return fe.Commands.HELP[self.name]

    def __call__(self, debugger, command, exe_ctx, result):
        global _commands
        try:
            if _commands is None:
                _commands = fe.Commands(core(), _state, session)
            # The provider, if lldb created the target before importing us and the watcher
            # missed it: from the next stop on at least.
            _sync_provider(exe_ctx.GetTarget())
            host = LldbHost(exe_ctx.GetTarget(), exe_ctx.GetProcess(), exe_ctx.GetThread(), result)
            _prepare_target(host)
            _commands.run(self.name, host, command)
            result.SetStatus(lldb.eReturnStatusSuccessFinishResult)
        except Exception as e:
            result.SetError(fe.error_line(e, _core, "lldb"))


class SettingsCommand:
    """`pyunwind set NAME VALUE` / `pyunwind show [NAME]`."""

    HELP = """Show or change pyunwind's settings.
Usage: pyunwind show [NAME]
       pyunwind set NAME VALUE
       pyunwind sysroot [DIR]
  sysroot DIR                  where the files of a core from another machine are (the
                               target's platform sysroot, as `platform select remote-linux
                               --sysroot DIR` sets it before a core is loaded); on an arm64
                               core lldb loads the modules it lacks from there. Without DIR:
                               the sysroot in effect
  memory auto|direct|debugger  where target memory is read: auto reads a core file or a local
                               process directly and anything else through lldb; debugger always
                               through lldb (SBProcess.ReadMemory)
  hide-internal on|off         whether bt hides CPython's call plumbing between Python frames
  frame-provider on|off        lldb 22+: Python frames in lldb's own bt (scripted frame provider)
  frame-addresses auto|on|off  lldb 22+: give each Python frame its interpreter frame's address
                               as pc, so that SBFrame users (lldb-dap, CodeLLDB, scripts) tell
                               the frames apart; auto: everywhere but the lldb command"""

    def __init__(self, debugger, internal_dict):
        pass

    def get_short_help(self):
        return self.HELP.splitlines()[0]

    def get_long_help(self):
        return self.HELP

    def __call__(self, debugger, command, exe_ctx, result):
        words = command.split()
        if words[:1] == ["sysroot"]:
            try:
                self._sysroot(exe_ctx, command.strip()[len("sysroot"):].strip(), result)
            except Exception as e:
                result.SetError(fe.error_line(e, _core, "lldb"))
            return
        if words[:1] == ["show"] and len(words) <= 2:
            for name in words[1:] or sorted(_settings):
                if name not in _settings:
                    result.SetError("pyunwind: no setting %r" % name)
                    return
                result.Print("%s: %s\n" % (name, _settings[name]))
            return
        if len(words) != 3 or words[0] != "set" or words[2] not in _CHOICES.get(words[1], ()):
            result.SetError("usage: pyunwind set NAME VALUE (see `help pyunwind`)")
            return
        _settings[words[1]] = words[2]
        _state.drop()
        if words[1] == "frame-provider":
            err = _sync_provider(exe_ctx.GetTarget())
            if err:
                result.SetError(err)
                return
        result.SetStatus(lldb.eReturnStatusSuccessFinishNoResult)

    @staticmethod
    def _sysroot(exe_ctx, root, result):
        target = exe_ctx.GetTarget()
        if not target.IsValid():
            result.SetError("pyunwind: no target: load the core first (or give lldb the sysroot before "
                            "loading it: `platform select remote-linux --sysroot DIR`)")
            return
        host = LldbHost(target, exe_ctx.GetProcess(), exe_ctx.GetThread(), result)
        if not root:
            result.Print("sysroot: %s\n" % (host.sysroot() or "none"))
            return
        root = os.path.abspath(os.path.expanduser(root))
        if not os.path.isdir(root):
            result.SetError("pyunwind: no directory %s" % root)
            return
        # What `platform select --sysroot` sets, on the target's own platform (a platform
        # selected after the target was made is another one).
        target.GetPlatform().SetSDKRoot(root)
        _prepare_target(host)
        result.SetStatus(lldb.eReturnStatusSuccessFinishNoResult)


def _register_commands(debugger):
    module = __name__
    for name in fe.Commands.HELP:
        cls_name = "Cmd_" + name.replace("-", "_")
        globals()[cls_name] = type(cls_name, (_Command,), {"name": name})
        debugger.HandleCommand("command script add -o -c %s.%s %s" % (module, cls_name, name))
    debugger.HandleCommand("command script add -o -c %s.SettingsCommand pyunwind" % module)


# --- lldb 22+: Python frames in `bt` ------------------------------------------------------------

_has_provider_api = hasattr(lldb.SBTarget, "RegisterScriptedFrameProvider")

if _has_provider_api:
    from lldb.plugins.scripted_frame_provider import ScriptedFrameProvider
    from lldb.plugins.scripted_process import ScriptedFrame

    class PythonFrame(ScriptedFrame):
        """One Python frame in lldb's backtrace: its function, file and line. `tail`: no eval-loop frame lldb unwound runs it (lldb's unwind stopped
        early); it was read from the thread state, and its name says so. `module`: the module of
        the eval-loop frame that runs it and a symbol, given with a pc (see _frame_context)."""

        def __init__(self, thread, index, frame, tail, context=None):
            # The base class asks lldb for the process, target and registers: SB calls that
            # take the target's API lock, which this must not do off the main thread (see
            # PythonFrameProvider.get_frame_at_index). A Python frame has no registers.
            self.thread = thread
            self.index = index
            # A pc only with a module to keep the line entry (see _frame_context).
            self.address = frame.get("address") if context is not None else None
            if frame["kind"] == "python":
                self.name = frame["function"]
            else:
                self.name = "<unreadable Python frame: %s>" % frame.get("reason")
            if tail:
                self.name += " [from thread state]"
            self.sym_ctx = lldb.SBSymbolContext()
            if self.address and context is not None:
                self.sym_ctx.SetModule(context[0])
                self.sym_ctx.SetSymbol(context[1])
            if frame.get("file") and frame.get("line"):
                entry = lldb.SBLineEntry()
                entry.SetFileSpec(lldb.SBFileSpec(frame["file"], False))
                entry.SetLine(frame["line"])
                self.sym_ctx.SetLineEntry(entry)

        def get_id(self):
            return self.index

        def get_pc(self):
            # No code address (lldb's bt then shows the file and line), unless the SB API's
            # frames need one to be told apart (see _frame_addresses).
            return self.address or LLDB_INVALID_ADDRESS

        def get_function_name(self):
            return self.name

        def is_artificial(self):
            return False

        def get_symbol_context(self):
            return self.sym_ctx

        def get_register_info(self):
            return None

        def get_register_context(self):
            return None

    class NativeFrame(ScriptedFrame):
        """A native frame lldb cannot name: JIT code or a perf trampoline, shown at its pc
        with the name the core gives it (`[jit] qualname (file:line)`, `[jit] side exit`,
        `[trampoline] qualname (file)`)."""

        def __init__(self, thread, index, row):
            # No base class __init__: see PythonFrame.
            self.thread = thread
            self.index = index
            self.pc = row.pc
            self.row = row
            # lldb's bt names a frame after the symbol it finds at its pc, if any, whatever the
            # frame's own name: on 3.15 every executor is `py::jit:executor` of the ELF object
            # CPython registers through the GDB JIT interface. There the frame gets no pc,
            # unless the SB API's frames need one (see _frame_addresses; lldb-dap shows
            # the frame's own name).
            if row.symbolicated and not _frame_addresses():
                self.pc = LLDB_INVALID_ADDRESS

        def get_id(self):
            return self.index

        def get_pc(self):
            return self.pc

        def get_function_name(self):
            return self.row.function_name()

        def is_artificial(self):
            return False

        def get_symbol_context(self):
            return lldb.SBSymbolContext()

        def get_register_info(self):
            return None

        def get_register_context(self):
            return None

    class PythonFrameProvider(ScriptedFrameProvider):
        """Each eval-loop frame becomes the Python frames it runs, CPython's call plumbing
        between them is hidden (`pyunwind set hide-internal off` keeps it), JIT and trampoline
        frames are named after their Python code, and where lldb's unwind stops early or goes
        wrong past JIT code the core's own unwind goes on (see _natives); Python frames that no
        unwound eval-loop frame runs follow the native frames. A thread without Python leaves
        lldb's own frames as they are; so does a failure, which one line says (_say_fallback)."""

        @staticmethod
        def get_description():
            return "pyunwind: Python frames in place of CPython's eval-loop frames"

        def __init__(self, input_frames, args):
            # Not the base class's __init__: it asks lldb for the thread's process and target,
            # SB calls that take the target's API lock (see _read_input).
            self.input_frames = input_frames
            self.args = args
            self.rows = None
            # Leading rows already handed out as lldb's own frames (see get_frame_at_index).
            self.committed = 0
            self.size = input_frames.GetSize()
            self.names, self.sps, self.pcs, self.tp, self.modules = [], None, None, None, []
            # Registers of lldb's innermost frame, where the core's own unwind starts.
            self.regs = {}
            self.anonymous0 = False
            # Frame 0 handed out before the plan when it may be JIT code (see
            # get_frame_at_index): the plan names it.
            self.frame0 = None
            self._read_input()

        def _read_input(self):
            """Native frame names and the thread pointer, read here and only here: lldb 22.1
            aborts ("Resource deadlock avoided") when get_frame_at_index touches an input
            SBFrame, or even dumps the SBFrameList, since lldb then holds the thread's
            frame-list lock.

            On lldb's event-handler thread (printing a stop) a command on the main thread may
            hold the target's API lock, which every SBFrame method takes, while it waits for
            this thread's frames: a deadlock. There the lock is only tried; when it is taken
            the frames are not read, and the plan puts every Python frame after lldb's frames."""
            mutex = None
            if threading.current_thread() is not threading.main_thread():
                mutex = _api_mutex(self.args)
                if mutex is None or not _try_lock(mutex):
                    return
            try:
                frames = [self.input_frames.GetFrameAtIndex(i) for i in range(min(self.size, MAX_NATIVE_FRAMES))]
                self.names = [_function_name(f) for f in frames]
                self.modules = [f.GetModule() for f in frames]
                self.sps = [f.GetSP() for f in frames]
                # The core hides the interpreter's plumbing by where it is.
                self.pcs = [f.GetPC() for f in frames]
                self.tp = _thread_pointer(self.input_frames)
                if frames:
                    self.regs = _registers(frames[0])
                    process = self.input_frames.GetThread().GetProcess()
                    self.anonymous0 = _in_anonymous_code(process, self.pcs[0])
            except Exception:
                pass
            finally:
                if mutex is not None:
                    mutex.unlock()

        def _plan(self):
            passthrough = list(range(self.size))
            s = lwp = tp = None
            try:
                self.thread = self.input_frames.GetThread()
                self.process = self.thread.GetProcess()
                self.target = self.process.GetTarget()
                host = LldbHost(self.target, self.process, self.thread, frames=self.input_frames)
                s = session(host, with_ids=False)
                lwp = self.thread.GetThreadID()
                tp = self.tp or _state.thread_pointers.get(lwp)
                frames = fe.thread_frames(s, lwp, tp)
                natives = self._natives(s, lwp, tp, len(frames))
                names = [n.get("name") for n in natives]
                sps = [n["sp"] for n in natives] if self.sps is not None else None
                actions = json.loads(s.splice(names, lwp=lwp, tp=tp, sps=sps, pcs=[n["pc"] for n in natives],
                                              hide_internal=_settings["hide-internal"] == "on"))
                regions = [s.jit_lookup(n["pc"]) for n in natives]
            except Exception as e:
                # lldb's frames as they are; said once, unless there is no Python to show.
                error = _fallback_error(e, s, lwp, tp)
                if error is not None:
                    _say_fallback(error, self.process)
                return passthrough
            head = list(range(self.committed))
            early, rest, tail = [], [], []
            # This stop's Python frames of the thread replace the last stop's.
            readers = _frame_locals[lwp] = {}
            # A trampoline is named after the function it started, as in gdb.
            is_trampoline = lambda n: regions[n] is not None and regions[n][2] == "trampoline"  # noqa: E731
            started = fe.trampoline_names(actions, frames, is_trampoline)
            for row in fe.spliced_rows(actions, len(frames)):
                if row[0] == "native":
                    if row[1] >= self.committed:
                        rest.append(self._native_row(natives[row[1]], regions[row[1]], started.get(row[1])))
                    continue
                module = natives[row[1]].get("module") if row[0] == "python" else None
                item = (frames[row[-1]], row[0] == "tail", _frame_context(module, row[-1]))
                address = frames[row[-1]].get("address")
                if address and item[2] is not None:
                    readers[address] = _local_reprs(s, row[-1], lwp, tp)
                # Python frames of an eval-loop frame already shown as itself go right after it.
                if row[0] == "tail":
                    tail.append(item)
                else:
                    (early if row[1] < self.committed else rest).append(item)
            # Native frames past the names read (a stack deeper than MAX_NATIVE_FRAMES, or none
            # read: the fallback) stay, and Python frames no eval-loop frame runs follow them.
            if all("input" in n for n in natives):
                rest += range(max(len(natives), self.committed), self.size)
            if self.frame0 is not None and natives and regions[0] is not None:
                self.frame0.name = self._native_row(natives[0], regions[0], started.get(0)).name
            rows = head + early + rest + tail
            key = _plan_key(self.process, lwp)
            for old in [k for k in _python_levels if k[:2] != key[:2]]:
                del _python_levels[old]
                _input_registers.pop(old, None)
            index = {id(f): i for i, f in enumerate(frames)}
            _python_levels[key] = {index[id(row[0])]: level for level, row in enumerate(rows)
                                   if isinstance(row, tuple)}
            _input_registers[key] = self.regs
            return rows

        def _natives(self, s, lwp, tp, python_count):
            """The thread's native frames, innermost first, each a dict of `pc`, `sp`, `name`,
            `module` and, for lldb's own frames, `input` (its index). lldb's own as far as they
            go; the core's own unwind (which knows JIT code and perf trampolines) after a JIT
            or trampoline frame where lldb's next frame is not the core's, and after lldb's last
            frame when lldb stopped before placing every Python frame (lldb 22 cannot unwind
            3.14's JIT code: its frame pointer and CFA are the JIT's own)."""
            mine = [{"input": i, "pc": pc, "sp": self.sps[i] if self.sps is not None else None,
                     "name": self.names[i], "module": self.modules[i] if i < len(self.modules) else None}
                    for i, pc in enumerate(self.pcs or [])]
            if not mine or not self.regs:
                return mine
            in_code = [s.jit_lookup(n["pc"]) is not None for n in mine]
            if not any(in_code) and self._places_every_python_frame(s, lwp, tp, python_count):
                return mine
            own = json.loads(s.own_natives(self.regs))
            # Each of lldb's frames is the core's with its pc, the first not before the last one.
            at = {}
            for j, pc in enumerate(own["pcs"]):
                at.setdefault(pc, []).append(j)
            j, switch = 0, None
            for i, n in enumerate(mine):
                found = at.get(n["pc"], [])
                k = bisect.bisect_left(found, j)
                if k == len(found):
                    if in_code[i]:
                        break  # the core does not see this JIT frame: lldb's frames as they are
                    continue
                j = found[k] + 1
                last = i + 1 == len(mine)
                lldb_goes_on = not last and mine[i + 1]["pc"] == own["pcs"][min(j, len(own["pcs"]) - 1)]
                if (in_code[i] or last) and j < len(own["pcs"]) and not lldb_goes_on:
                    switch = (i + 1, j)
                    break
            if switch is None or switch[0] < self.committed:
                return mine
            i, j = switch
            return mine[:i] + [{"pc": own["pcs"][k], "sp": own["sps"][k] if own["sps"] else None,
                                "name": own["names"][k], "module": self._module_at(own["pcs"][k])}
                               for k in range(j, len(own["pcs"]))]

        def _places_every_python_frame(self, s, lwp, tp, python_count):
            actions = json.loads(s.splice(self.names, lwp=lwp, tp=tp, sps=self.sps, pcs=self.pcs,
                                          hide_internal=False))
            return sum(len(a["frames"]) for a in actions if a["action"] == "python") >= python_count

        def _module_at(self, pc):
            module = self.target.ResolveLoadAddress(pc).GetModule()
            return module if module.IsValid() else None

        def _native_row(self, native, region, started):
            """How native frame `native` is shown: lldb's own (its input index), a JIT or
            trampoline frame named after its Python code, or a frame at the pc the core's own
            unwind found (a dict, which lldb symbolicates)."""
            if region is not None:
                name = region[3]
                if region[2] == "trampoline" and started is not None and started.get("kind") == "python":
                    name = "[trampoline] %s (%s)" % (started["function"], started.get("file"))
                symbol = self.target.ResolveLoadAddress(native["pc"]).GetSymbol()
                return NamedNativeFrame(native["pc"], name, symbol.IsValid())
            if "input" in native:
                return native["input"]
            return {"pc": native["pc"]}

        def get_frame_at_index(self, index):
            if self.rows is None:
                if _deferring or threading.current_thread() is not threading.main_thread():
                    # lldb's event-handler thread, printing a stop: any SB call that takes the
                    # target's API lock (the stop id, memory) would deadlock against a command
                    # on the main thread that holds that lock and waits for this thread's
                    # frames. Or a py-* command reading registers, which the plan wants to
                    # know first. Hand out lldb's own frame; the plan is made around it later.
                    if index >= self.size:
                        return None
                    self.committed = max(self.committed, index + 1)
                    if index == 0 and self.anonymous0 and self.pcs:
                        # lldb prints a stop with frame 0 and keeps it: a frame whose name
                        # the plan gives later, if it is JIT code.
                        self.frame0 = NamedNativeFrame(self.pcs[0], None, self.modules[0].IsValid(), self)
                        return NativeFrame(None, 0, self.frame0)
                    return index
                self.rows = self._plan()
            if index >= len(self.rows):
                return None
            row = self.rows[index]
            if isinstance(row, int):
                return row
            if isinstance(row, dict):
                return dict(row, idx=index)
            if isinstance(row, NamedNativeFrame):
                return NativeFrame(self.thread, index, row)
            return PythonFrame(self.thread, index, *row)


def _fallback_error(e, s, lwp, tp):
    """What the provider's failure `e` is to say, or None when it only means that there is no
    Python to show: the target runs no Python, or this thread has no Python thread state (a
    thread the program made in C). A thread list that cannot be read is said as such (rather
    than "no Python thread state")."""
    if fe.is_not_python(e, _core):
        return None
    if s is None:
        return e
    try:
        python = s.python_thread(lwp=lwp, tp=tp)
    except Exception as cause:
        return cause
    return e if python else None


# (process, stop id, line) of each fallback line printed: each once per stop, however many
# threads or frame lists met it.
_fallbacks_said = set()


def _say_fallback(e, process):
    """fe.fallback_line on the debugger's error stream (lldb-dap shows it in its console), once
    per stop."""
    line = fe.fallback_line(e, _core, "lldb")
    key = (process.GetUniqueID(), process.GetStopID(), line)
    if key in _fallbacks_said:
        return
    for old in [k for k in _fallbacks_said if k[:2] != key[:2]]:
        _fallbacks_said.discard(old)
    _fallbacks_said.add(key)
    _write_error_line(process.GetTarget().GetDebugger(), line)


def _write_error_line(debugger, line):
    err = debugger.GetErrorFile()
    if err is not None and err.IsValid():
        err.Write((line + "\n").encode())
        err.Flush()
    else:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()


class NamedNativeFrame:
    """A planned NativeFrame: its pc, its name, and whether lldb has a symbol at the pc. A
    frame handed out before the plan (`provider`) gets its name when lldb first shows it on
    the main thread; until then (and if it is no JIT code) lldb names it as its own."""

    __slots__ = ("pc", "name", "symbolicated", "provider")

    def __init__(self, pc, name, symbolicated, provider=None):
        self.pc = pc
        self.name = name
        self.symbolicated = symbolicated
        self.provider = provider

    def function_name(self):
        p = self.provider
        if (self.name is None and p is not None and p.rows is None and not _deferring
                and threading.current_thread() is threading.main_thread()):
            p.rows = p._plan()
        return self.name


def _in_anonymous_code(process, pc):
    """Whether `pc` is in executable memory that maps no file: where JIT code and perf
    trampolines live (3.15's registered executor objects are lldb modules, but their code is
    still the executor's anonymous mapping). Not a pc of 0 or in an unmapped page (a crash),
    nor in the vdso."""
    region = lldb.SBMemoryRegionInfo()
    if process.GetMemoryRegionInfo(pc, region).Fail():
        return False
    name = region.GetName() or ""
    # 3.15 names its JIT mappings under -X dev (`[anon:cpython:jit]`, PR_SET_VMA_ANON_NAME).
    if not (region.IsMapped() and region.IsExecutable() and (not name or name.startswith("[anon:"))):
        return False
    # A core without NT_FILE (qemu-user's) names no mapping: code of a file lldb loaded is not
    # anonymous (3.15's executors are modules of no file).
    module = process.GetTarget().ResolveLoadAddress(pc).GetModule()
    return not (module.IsValid() and os.path.isfile(module.GetFileSpec().fullpath or ""))


# _plan_key -> the registers of lldb's innermost frame the last plan started from: a command's
# own unwind starts there when the provider shows another frame innermost (a JIT frame).
_input_registers = {}


def _registers(frame):
    """{name: value} of `frame`'s OWN_UNWIND_REGISTERS."""
    regs = {}
    names = OWN_UNWIND_REGISTERS[_arch(frame.GetThread().GetProcess().GetTarget())]
    for regset in frame.GetRegisters():
        for r in regset:
            if r.GetName() in names and r.GetValue() is not None:
                regs[r.GetName()] = r.GetValueAsUnsigned()
    return regs


# LWP -> {interpreter frame address: its locals' reader}, for the thread's Python frames of the
# last plan that have an address (see _frame_addresses): PythonLocalsRecognizer finds a frame's
# locals by them.
_frame_locals = {}


class PythonLocalsRecognizer:
    """A Python frame's locals as its "recognized arguments", each a char array holding the
    local's repr (the target has no type for a Python object). lldb 22 shows no variable a
    scripted frame makes without a debug-info Variable behind it; recognized arguments it does
    show (`frame variable`, SBFrame.GetVariables, lldb-dap's Locals) when the target setting
    display-recognized-arguments is on. Frames without locals here are left alone."""

    def should_hide(self, frame):
        return False

    def get_recognized_arguments(self, frame):
        read = _frame_locals.get(frame.GetThread().GetThreadID(), {}).get(frame.GetPC())
        if read is None:
            return []
        target = frame.GetThread().GetProcess().GetTarget()
        char = target.GetBasicType(lldb.eBasicTypeChar8)
        values = []
        for name, text in read():
            raw = text.encode() + b"\0"
            data, err = lldb.SBData(), lldb.SBError()
            data.SetData(err, raw, target.GetByteOrder(), target.GetAddressByteSize())
            value = target.CreateValueFromData(name, data, char.GetArrayType(len(raw)))
            if value.IsValid():
                values.append(value)
        return values


def repr_summary(valobj, internal_dict):
    """A Python local's repr as lldb shows it (see PythonLocalsRecognizer)."""
    data = valobj.GetNonSyntheticValue().GetData()
    err = lldb.SBError()
    raw = data.ReadRawData(err, 0, data.GetByteSize()) if data.GetByteSize() else b""
    return (raw or b"").split(b"\0", 1)[0].decode("utf-8", "replace")


class NoChildren:
    """A Python local's repr has no parts to expand."""

    def __init__(self, valobj, internal_dict):
        pass

    def num_children(self):
        return 0

    def get_child_index(self, name):
        return -1

    def get_child_at_index(self, index):
        return None

    def has_children(self):
        return False

    def update(self):
        return True


def _local_reprs(session, index, lwp, tp):
    """[(name, repr)] of Python frame `index`, read when lldb first asks for them."""

    def read():
        try:
            return [(l["name"], l["repr"]) for l in json.loads(session.locals(index, lwp=lwp, tp=tp))]
        except Exception:
            return []

    return read


def _frame_context(module, index):
    """(module, symbol) for the symbol context of Python frame `index`, which gets a pc (see
    _frame_addresses), or None. With a pc and no module, lldb would look the pc up in every
    module, find nothing and drop the frame's line entry; with a module it keeps what it cannot
    replace. A frame recognizer (PythonLocalsRecognizer) sees only frames with a symbol. And lldb
    22 tells apart two frames that have symbols and the same CFA by their symbols alone, not
    their pcs, so each Python frame of the thread gets a different one: any symbol of the
    module, a stand-in the frame's display name hides (lldb-dap shows that name)."""
    if not _frame_addresses() or module is None or not module.IsValid():
        return None
    key = module.GetFileSpec().fullpath
    if key not in _named_symbols:
        # CPython's own code symbols: the recognizer's pattern matches them and leaves the
        # frames of lldb's own recognizers (libc's raise, abort) to them.
        _named_symbols[key] = [i for i in range(min(module.GetNumSymbols(), MAX_STAND_IN_SYMBOLS))
                               if module.GetSymbolAtIndex(i).GetType() == lldb.eSymbolTypeCode
                               and STAND_IN_SYMBOL.match(module.GetSymbolAtIndex(i).GetName() or "")]
    named = _named_symbols[key]
    if not named:
        return None
    return module, module.GetSymbolAtIndex(named[index % len(named)])


STAND_IN_SYMBOL = re.compile(r"^_?Py")
# Module path -> indices of its stand-in symbols (see _frame_context).
_named_symbols = {}
# Python frames of one thread past this many share stand-in symbols (and to SBFrame, frames).
MAX_STAND_IN_SYMBOLS = 100000


def _frame_addresses():
    """Whether Python frames get a pc: the interpreter frame's address, shown as the frame's
    address. lldb names a frame by (pc, CFA), and lldb 22 gives a scripted frame fetched on its
    own CFA 0 (llvm #191903 fixes that): without a pc, every Python frame an SBFrame refers to
    would be the first one, and lldb-dap, which fetches frames one by one, showed the innermost
    Python frame's name, line and locals for all of them. lldb's own `bt` fetches them
    together and looks better without an address, so `auto` gives one everywhere but there."""
    mode = _settings["frame-addresses"]
    if mode == "auto":
        return not _IN_LLDB_COMMAND
    return mode == "on"


def _in_lldb_command():
    try:
        exe = os.path.basename(os.readlink("/proc/self/exe"))
    except OSError:
        return False
    return exe == "lldb" or (exe.startswith("lldb-") and exe[5:].replace(".", "").isdigit())


_IN_LLDB_COMMAND = _in_lldb_command()


def _provider_args(target):
    """The `args` of a provider registered on `target`: a token naming it."""
    token = len(_provider_targets) + 1
    _provider_targets[token] = target
    args = lldb.SBStructuredData()
    args.SetFromJSON(json.dumps({"target": token}))
    return args


def _api_mutex(args):
    """The API lock of the target whose provider got `args` (see _provider_args)."""
    value = args.GetValueForKey("target") if args is not None and args.IsValid() else None
    target = _provider_targets.get(value.GetIntegerValue()) if value and value.IsValid() else None
    if target is None or not target.IsValid() or not hasattr(target, "GetAPIMutex"):
        return None
    return target.GetAPIMutex()


def _try_lock(mutex):
    """Take `mutex` if that happens within API_LOCK_WAIT_SECONDS: a command holding it briefly
    lets go, one that waits for the caller's frames never does."""
    deadline = time.monotonic() + API_LOCK_WAIT_SECONDS
    while not mutex.try_lock():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _sync_provider(target):
    """Register our frame provider on `target` or remove it, as the setting says. Returns an
    error message or None."""
    if not _has_provider_api or target is None or not target.IsValid():
        return None
    key = target.GetDebugger().GetIndexOfTarget(target)
    want = _settings["frame-provider"] == "on"
    have = _providers.get(key)
    if want and have is None:
        err = lldb.SBError()
        pid = target.RegisterScriptedFrameProvider(PROVIDER_CLASS, _provider_args(target), err)
        if err.Fail() or not pid:
            return "pyunwind: cannot register the frame provider: %s" % err.GetCString()
        _providers[key] = pid
    elif not want and have is not None:
        err = target.RemoveScriptedFrameProvider(have)
        del _providers[key]
        if err.Fail():
            return "pyunwind: cannot remove the frame provider: %s" % err.GetCString()
    return None


class ProviderStopHook:
    """Registers the frame provider on a target when it first stops (lldb 22+), and gives an
    arm64 core what lldb lacks (_prepare_target; every lldb). lldb copies the dummy
    target's stop hooks to each target created later and runs them on the thread that attaches
    or loads the core, before anyone can ask that target for frames. The new-target watcher
    alone lost that race: lldb-dap answered `stackTrace` on a core before the watcher's thread
    saw the target in about half of the runs."""

    def __init__(self, target, extra_args, internal_dict):
        pass

    def handle_stop(self, exe_ctx, stream):
        target = exe_ctx.GetTarget()
        _sync_provider(target)
        _prepare_existing(target)
        # It stays, and does nothing new at later stops (each step above is done once per
        # target). A hook that deletes itself crashes lldb at the next resume: lldb 19 walks the
        # hook list itself (every time, attached to a process, at `continue`), and lldb 22 did
        # too in about one run of five attached to qemu's gdb stub (a crash in memcpy on its
        # private state thread, at `continue` after `gdb-remote`).

        # True: the stop stands.
        return True


def _add_provider_stop_hook(debugger):
    """ProviderStopHook on the dummy target, where `target stop-hook add` puts a hook while no
    target is selected (~/.lldbinit, lldb-dap's initCommands). With a target selected it would
    go to that target, which has the provider already: the watcher covers targets made later."""
    if debugger.GetSelectedTarget().IsValid():
        return
    result = lldb.SBCommandReturnObject()
    debugger.GetCommandInterpreter().HandleCommand(
        "target stop-hook add -P %s.ProviderStopHook" % __name__, result)


def _watch_new_targets(debugger):
    """Register the provider on targets created after this script was imported (from
    ~/.lldbinit, before `lldb EXE -c CORE` creates its target). lldb 22.1 sends class listeners
    no eBroadcastBitNewTargetCreated, but a new target loads its modules at once, and a
    provider registered on the dummy target is not copied to new ones."""
    listener = lldb.SBListener("pyunwind-targets")
    listener.StartListeningForEventClass(
        debugger, lldb.SBTarget.GetBroadcasterClassName(),
        lldb.SBTarget.eBroadcastBitNewTargetCreated | lldb.SBTarget.eBroadcastBitModulesLoaded)

    def loop():
        event = lldb.SBEvent()
        while True:
            # Never a blocking wait: lldb's SB calls keep the GIL, which would starve lldb's
            # own Python (commands, the frame provider) for as long as the wait lasts.
            if not listener.GetNextEvent(event):
                time.sleep(TARGET_POLL_SECONDS)
            elif lldb.SBTarget.EventIsTargetEvent(event):
                target = lldb.SBTarget.GetTargetFromEvent(event)
                if target.IsValid():
                    _sync_provider(target)

    threading.Thread(target=loop, name="pyunwind-targets", daemon=True).start()


_registered = False


def _prepare_existing(target):
    """_prepare_target outside a command: for a target whose core is loaded (or process
    attached) already."""
    process = target.GetProcess() if target is not None and target.IsValid() else None
    if process is None or not process.IsValid():
        return
    try:
        host = LldbHost(target, process, process.GetSelectedThread(), lldb.SBCommandReturnObject())
        # A process's modules when a command needs them: at the first stop of a stub, the
        # dynamic linker has made no list yet.
        _prepare_target(host, modules=host.core_file() is not None)
    except Exception as e:
        _write_error_line(target.GetDebugger(), fe.error_line(e, _core, "lldb"))


def __lldb_init_module(debugger, internal_dict):
    global _registered
    _register_commands(debugger)
    first, _registered = not _registered, True
    for i in range(debugger.GetNumTargets()):
        if first:
            _sync_provider(debugger.GetTargetAtIndex(i))
        _prepare_existing(debugger.GetTargetAtIndex(i))
    if not first:
        return
    # Every lldb: the stop hook prepares arm64 cores and remote processes (_prepare_target)
    # as they are loaded or attached.
    _add_provider_stop_hook(debugger)
    if not _has_provider_api:
        return
    # Locals' reprs are char8_t arrays (a type C programs do not use): shown as their text.
    debugger.HandleCommand("type summary add -w pyunwind -x '^char8_t ?\\[[0-9]+\\]$' -F %s.repr_summary" % __name__)
    debugger.HandleCommand("type synthetic add -w pyunwind -x '^char8_t ?\\[[0-9]+\\]$' -l %s.NoChildren" % __name__)
    debugger.HandleCommand("type category enable pyunwind")
    debugger.HandleCommand("frame recognizer add -l %s.PythonLocalsRecognizer -x -s python -n '%s' -f false"
                           % (__name__, STAND_IN_SYMBOL.pattern))
    debugger.HandleCommand("settings set target.display-recognized-arguments true")
    _watch_new_targets(debugger)

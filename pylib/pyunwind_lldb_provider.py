"""lldb 22+: the scripted frame provider that puts Python frames, and names for JIT and
perf-trampoline frames, into lldb's own `bt`; its registration on each target; and the frame
recognizer that shows a Python frame's locals (lldb-dap's Locals, `frame variable`). Thin: the
splice of Python frames into the native stack, the names and the unwinding through JIT code
are in the Rust core.
"""

import json
import os
import re
import threading

import lldb

import pyunwind_frontend as fe
from pyunwind_lldb_host import (CALLBACKS_SKIP_API_LOCK, HAS_PROVIDER_API, LLDB_INVALID_ADDRESS, MAX_NATIVE_FRAMES,
                                LldbHost, PcIndex, deferring, frame_changes, frame_registers, function_name,
                                lldb_name, on_disk, places_every_python_frame, plan_key, plan_levels,
                                plan_registers, session, settings, state, thread_pointer, write_error_line)

# A frame provider made off the main thread (lldb's event-handler thread, printing a stop) only
# tries the target's API lock, never waits for it: a command that holds it may be waiting for
# this very thread's frames (a `bt`), and lldb 22.1 keeps the provider it made, and every frame
# it handed out, for the whole stop. Registering makes lldb's event thread print every thread's
# frame 0 again and make the providers there: they take the frames read just before the
# registration (see _read_ahead). Our own SB calls cannot make them first: they keep the GIL,
# and one waiting for a thread's frame list that the event thread holds, while it waits for the
# GIL to run the provider's __init__, never returns.
# target -> id of our frame provider registered on it, or REGISTERING.
_providers = {}
REGISTERING = 0
# token -> the target a provider was registered on; the provider gets its token in `args`, so
# that it can find its own target without an SB call that takes that target's API lock.
_provider_targets = {}


# --- registration -------------------------------------------------------------------------------


def _provider_args(target):
    """The `args` of a provider registered on `target`: a token naming it."""
    token = len(_provider_targets) + 1
    _provider_targets[token] = target
    args = lldb.SBStructuredData()
    args.SetFromJSON(json.dumps({"target": token}))
    return args, token


def _token(args):
    """The token in the `args` of our provider (see _provider_args), or None."""
    value = args.GetValueForKey("target") if args is not None and args.IsValid() else None
    return value.GetIntegerValue() if value and value.IsValid() else None


def _api_mutex(args):
    """The API lock of the target whose provider got `args` (see _provider_args)."""
    target = _provider_targets.get(_token(args))
    if target is None or not target.IsValid() or not hasattr(target, "GetAPIMutex"):
        return None
    return target.GetAPIMutex()


class LldbFrames:
    """What the provider plans with of lldb's own frames of one thread at one stop: their
    names, modules, stack and program counters (the first MAX_NATIVE_FRAMES), the thread
    pointer, the innermost frame's registers, whether its pc is in anonymous code, and the
    stop (and frame_changes) they were read at. Every field is read through SBFrame and
    SBProcess calls, which take the target's API lock."""

    __slots__ = ("size", "names", "modules", "sps", "pcs", "tp", "regs", "anonymous0", "stop_id", "changes",
                 "synthetic")

    def __init__(self, frames, process):
        """`frames`: the provider's input (an SBFrameList) or, before our provider is
        registered, the SBThread itself (its frames are then lldb's own)."""
        self.size = frames.GetSize() if isinstance(frames, lldb.SBFrameList) else frames.GetNumFrames()
        read = [frames.GetFrameAtIndex(i) for i in range(min(self.size, MAX_NATIVE_FRAMES))]
        self.names = [function_name(f) for f in read]
        self.modules = [f.GetModule() for f in read]
        self.sps = [f.GetSP() for f in read]
        # The core hides the interpreter's plumbing by where it is.
        self.pcs = [f.GetPC() for f in read]
        self.tp = thread_pointer(frames)
        self.regs = frame_registers(read[0]) if read else {}
        self.anonymous0 = bool(read) and _in_anonymous_code(process, self.pcs[0])
        self.stop_id = process.GetStopID()
        self.changes = frame_changes()
        # A provider's frame among them: not lldb's own frames (see _read_all_threads).
        self.synthetic = any(f.IsSynthetic() for f in read if hasattr(f, "IsSynthetic"))


# token (see _provider_args) -> {thread id: LldbFrames}: each thread's frames, read by the
# thread that registered the provider, just before it did. Registering makes lldb print every
# thread's frame 0 again on its event-handler thread, which then creates the providers; there
# a command on the main thread may hold the API lock while it waits for those frames (a `bt`
# right after the core's load or the script's import), and the provider could not read them.
# Taken by a provider that could not read them itself, dropped by one that did.
_read_ahead = {}


def _read_all_threads(target, token):
    """Fill _read_ahead[token] with the frames of every thread of `target`'s process, in place
    of what earlier registrations on `target` left."""
    for old in [t for t in _read_ahead if _provider_targets.get(t) == target]:
        del _read_ahead[old]
    process = target.GetProcess()
    if not process.IsValid():
        return
    ahead = _read_ahead[token] = {}
    try:
        for thread in process:
            read = LldbFrames(thread, process)
            # Frames of a provider lldb still has (one removed a moment ago, whose frame lists
            # lldb had not dropped yet) are not lldb's own: the plan would show its Python
            # frames again.
            if not read.synthetic:
                ahead[thread.GetThreadID()] = read
    except Exception:
        # A thread not read ahead: its provider reads itself (see _lldb_frames).
        pass


def forget_earlier_stops(target):
    """Drop the frames read ahead on `target` at an earlier stop: a provider made without the API
    lock would take them for frame 0 (see PythonFrameProvider._ahead)."""
    process = target.GetProcess()
    if not process.IsValid():
        return
    stop = process.GetStopID()
    for token, ahead in _read_ahead.items():
        if _provider_targets.get(token) == target:
            for lwp in [lwp for lwp, a in ahead.items() if a.stop_id != stop]:
                del ahead[lwp]


def sync_provider(target, read_ahead=True):
    """Register our frame provider on `target` or remove it, as the setting says. Returns an
    error message or None. `read_ahead`: the threads' frames first (see _read_ahead); not on
    the new-target watcher's thread for a target without a process yet (nothing to read),
    which would hold the registration open meanwhile while the thread that loads a core (the
    stop hook) must have registered before it returns."""
    if not HAS_PROVIDER_API or target is None or not target.IsValid():
        return None
    key = target.GetDebugger().GetIndexOfTarget(target)
    want = settings["frame-provider"] == "on"
    have = _providers.get(key)
    if want and have is None:
        err = lldb.SBError()
        args, token = _provider_args(target)
        if read_ahead:
            # Claimed before the frames are read: the new-target watcher's thread may get here
            # meanwhile, and a second provider would take the first's frames as lldb's own.
            _providers[key] = REGISTERING
            # Now, while lldb's own frames are all there are (see _read_ahead).
            _read_all_threads(target, token)
        pid = target.RegisterScriptedFrameProvider(lldb_name("PythonFrameProvider"), args, err)
        if err.Fail() or not pid:
            _providers.pop(key, None)
            return "pyunwind: cannot register the frame provider: %s" % err.GetCString()
        _providers[key] = pid
    elif not want and have not in (None, REGISTERING):
        err = target.RemoveScriptedFrameProvider(have)
        del _providers[key]
        if err.Fail():
            return "pyunwind: cannot remove the frame provider: %s" % err.GetCString()
    return None


# --- lldb 22+: Python frames in `bt` ------------------------------------------------------------

if HAS_PROVIDER_API:
    from lldb.plugins.scripted_frame_provider import ScriptedFrameProvider
    from lldb.plugins.scripted_process import ScriptedFrame

    class PythonFrame(ScriptedFrame):
        """One Python frame in lldb's backtrace: its function, file and line. `tail`: no
        eval-loop frame lldb unwound runs it (lldb's unwind stopped early); it was read from the
        thread state, and its name says so. `module`: the module of the eval-loop frame that runs
        it and a symbol, given with a pc (see _frame_context)."""

        def __init__(self, thread, index, frame, tail, context=None):
            # The base class asks lldb for the process, target and registers: SB calls that
            # take the target's API lock, which this must not do off the main thread (see
            # PythonFrameProvider.get_frame_at_index). A Python frame has no registers.
            self.thread = thread
            self.index = index
            # A pc only with a module to keep the line entry (see _frame_context).
            self.address = frame.get("address") if context is not None else None
            if frame["kind"] == "python":
                # A subinterpreter's frame says which (the core's interpreter_label).
                self.name = frame["function"] + frame.get("interpreter_label", "")
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
            # SB calls that take the target's API lock (see _lldb_frames).
            self.input_frames = input_frames
            self.args = args
            self.rows = None
            # Leading rows already handed out as lldb's own frames (see get_frame_at_index).
            self.committed = 0
            self.size = input_frames.GetSize()
            # (thread id, LldbFrames) taken from _read_ahead rather than read (see _ahead).
            self.ahead = None
            # lldb's frames read from the input, not taken from _read_ahead (see _plan_here).
            self.read_here = False
            self._take(self._lldb_frames())
            # Frame 0 handed out before the plan when it may be JIT code (see
            # get_frame_at_index): the plan names it.
            self.frame0 = None

        def _take(self, read):
            """lldb's frames as `read` (LldbFrames) has them; none where it is None."""
            self.names, self.modules = (read.names, read.modules) if read else ([], [])
            self.sps, self.pcs, self.tp = (read.sps, read.pcs, read.tp) if read else (None, None, None)
            # Registers of lldb's innermost frame, where the core's own unwind starts.
            self.regs = read.regs if read else {}
            self.anonymous0 = read.anonymous0 if read else False

        def _lldb_frames(self):
            """lldb's frames (LldbFrames), read here or taken from _read_ahead, or None: lldb 22.1
            aborts ("Resource deadlock avoided") when get_frame_at_index touches an input SBFrame,
            or even dumps the SBFrameList, since lldb then holds the thread's frame-list lock.

            lldb's event-handler thread may create the provider as it prints a stop, and a command
            on the main thread may then hold the target's API lock, which every SBFrame method
            takes, while it waits for this thread's frames. Off the main thread the lock is only
            tried: without it nothing is read here, and the provider takes the frames read for its
            thread before the registration that made lldb print (_read_ahead)."""
            mutex = None
            if threading.current_thread() is not threading.main_thread():
                mutex = _api_mutex(self.args)
                if mutex is None or not mutex.try_lock():
                    return self._ahead()
            try:
                thread = self.input_frames.GetThread()
                if not thread.IsValid():
                    # Made on lldb's event thread while the process is not yet stopped as the SB
                    # API sees it: at an attach's first stop, the private state thread still runs
                    # the stop hooks (ProviderStopHook registered us there). Every frame then
                    # reads as invalid, with no name or pc, and the plan would find no eval loop.
                    return self._ahead()
                _read_ahead.get(_token(self.args), {}).pop(thread.GetThreadID(), None)
                read = LldbFrames(self.input_frames, thread.GetProcess())
                self.read_here = True
                return read
            except Exception:
                return None
            finally:
                if mutex is not None:
                    mutex.unlock()

        def _ahead(self):
            """The frames _read_ahead holds for this provider's thread, as far as it can tell
            without the API lock, which SBThread.GetThreadID takes: the one thread read ahead
            with as many frames as its input. The plan checks them (_read_earlier); until then
            they serve only frame 0 (get_frame_at_index), where a JIT frame is to be named."""
            ahead = _read_ahead.get(_token(self.args), {})
            same = [(lwp, a) for lwp, a in ahead.items() if a.size == self.size and a.changes == frame_changes()]
            if len(same) != 1:
                return None
            self.ahead = same[0]
            return same[0][1]

        def _read_earlier(self, lwp):
            """Check the frames taken from _read_ahead against this thread and stop (else the plan
            puts every Python frame after lldb's frames), or take them now where nothing was
            read when this provider was made."""
            now = (self.process.GetStopID(), frame_changes())
            ahead = _read_ahead.get(_token(self.args), {}).pop(lwp, None)
            if self.ahead is not None and (self.ahead[0] != lwp or (self.ahead[1].stop_id, self.ahead[1].changes) != now):
                self._take(None)
            if self.pcs is None and ahead is not None and ahead.size == self.size \
                    and (ahead.stop_id, ahead.changes) == now:
                self._take(ahead)

        def _plan(self):
            passthrough = list(range(self.size))
            s = lwp = tp = None
            try:
                self.thread = self.input_frames.GetThread()
                self.process = self.thread.GetProcess()
                self.target = self.process.GetTarget()
                lwp = self.thread.GetThreadID()
                self._read_earlier(lwp)
                host = LldbHost(self.target, self.process, self.thread, frames=self.input_frames)
                s = session(host, with_ids=False)
                tp = self.tp or state.thread_pointers.get(lwp)
                frames = fe.thread_frames(s, lwp, tp)
                natives = self._natives(s, lwp, tp, len(frames))
                names = [n.get("name") for n in natives]
                sps = [n["sp"] for n in natives] if self.sps is not None else None
                actions = json.loads(s.splice(names, lwp=lwp, tp=tp, sps=sps, pcs=[n["pc"] for n in natives],
                                              hide_internal=settings["hide-internal"] == "on"))
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
            key = plan_key(self.process, lwp)
            for old in [k for k in plan_levels if k[:2] != key[:2]]:
                del plan_levels[old]
                plan_registers.pop(old, None)
            index = {id(f): i for i, f in enumerate(frames)}
            plan_levels[key] = {index[id(row[0])]: level for level, row in enumerate(rows)
                                   if isinstance(row, tuple)}
            plan_registers[key] = self.regs
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
            if not any(in_code) and places_every_python_frame(s, lwp, tp, python_count, self.names,
                                                              self.sps, self.pcs):
                return mine
            own = json.loads(s.own_natives(self.regs))
            index = PcIndex(own["pcs"])
            j, switch = 0, None
            for i, n in enumerate(mine):
                found = index.next_at(n["pc"], j)
                if found is None:
                    if in_code[i]:
                        break  # the core does not see this JIT frame: lldb's frames as they are
                    continue
                j = found + 1
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

        def _module_at(self, pc):
            module = self.target.ResolveLoadAddress(pc).GetModule()
            return module if module.IsValid() else None

        def _native_row(self, native, region, started):
            """How native frame `native` is shown: lldb's own (its input index), a JIT or
            trampoline frame named after its Python code, or a frame at the pc the core's own
            unwind found (a dict, which lldb symbolicates)."""
            if region is not None:
                name = region[3]
                if region[2] == "trampoline" and started is not None:
                    name = fe.trampoline_label(started) or name
                symbol = self.target.ResolveLoadAddress(native["pc"]).GetSymbol()
                return NamedNativeFrame(native["pc"], name, symbol.IsValid())
            if "input" in native:
                return native["input"]
            return {"pc": native["pc"]}

        def _plan_here(self):
            """Whether the plan can be made on this thread now. Not while a py-* command reads
            registers, which the plan wants to know first. Off the main thread (lldb's
            event-handler thread, printing a stop), before lldb 24, any SB call that takes the
            target's API lock (the stop id, memory) would deadlock against a command on the main
            thread that holds that lock and waits for this thread's frames. From 24 it can, with
            lldb's frames read from the input and the thread valid (see _lldb_frames): lldb 24
            asks for frames 0 and 1 there as it prints a stop, and keeps them, and a JIT frame's
            caller is not lldb's frame 1."""
            if deferring():
                return False
            if threading.current_thread() is threading.main_thread():
                return True
            return CALLBACKS_SKIP_API_LOCK and self.read_here and self.input_frames.GetThread().IsValid()

        def get_frame_at_index(self, index):
            if self.rows is None:
                if not self._plan_here():
                    # Hand out lldb's own frame; the plan is made around it later.
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
    if fe.is_not_python(e, fe.loaded_core()):
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
    line = fe.fallback_line(e, fe.loaded_core(), "lldb")
    key = (process.GetUniqueID(), process.GetStopID(), line)
    if key in _fallbacks_said:
        return
    for old in [k for k in _fallbacks_said if k[:2] != key[:2]]:
        _fallbacks_said.discard(old)
    _fallbacks_said.add(key)
    write_error_line(process.GetTarget().GetDebugger(), line)


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
        if (self.name is None and p is not None and p.rows is None and not deferring()
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
    return not (module.IsValid() and on_disk(module))


# --- Python locals: a frame recognizer ----------------------------------------------------------

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
            return fe.local_reprs(session, index, lwp=lwp, tp=tp)
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
    mode = settings["frame-addresses"]
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


"""gdb frontend: the py-* commands, the frame filter that puts Python frames into `bt`, and the
per-stop session. Thin: decoding and text rendering are in the Rust core."""

import json

import gdb
from gdb.FrameDecorator import FrameDecorator

import pyunwind_frontend as fe
import pyunwind_gdb_decorators as decor
import pyunwind_gdb_jit as jit
import pyunwind_gdb_real as real
import pyunwind_gdb_threads as threads

_state = fe.StopState()
_jit_stop = None  # the JIT map of this stop (pyunwind_gdb_jit), set by register()
_real = None  # real frames' state (pyunwind_gdb_real), set by register()
_real_unwinder = None


core = fe.core


# --- parameters -------------------------------------------------------------------------------


class _MemoryParam(gdb.Parameter):
    """Where pyunwind reads target memory: auto (direct for a local process or a core file, the
    debugger otherwise), direct, or debugger."""

    set_doc = "Set where pyunwind reads target memory."
    show_doc = "Show where pyunwind reads target memory."

    def __init__(self):
        super().__init__("pyunwind-memory", gdb.COMMAND_DATA, gdb.PARAM_ENUM, ["auto", "direct", "debugger"])
        self.value = "auto"

    def get_set_string(self):
        _state.drop()
        return ""

    def get_show_string(self, svalue):
        return "pyunwind reads memory: %s" % svalue


class _HideParam(gdb.Parameter):
    """Whether `bt` hides the interpreter's internal call frames between two Python frames."""

    set_doc = "Set whether bt hides CPython's internal call frames between Python frames."
    show_doc = "Show whether bt hides CPython's internal call frames between Python frames."

    def __init__(self):
        super().__init__("pyunwind-hide-internal", gdb.COMMAND_STACK, gdb.PARAM_BOOLEAN)
        self.value = True

    def get_set_string(self):
        return ""

    def get_show_string(self, svalue):
        return "Hiding CPython's internal frames in bt is %s." % svalue


class _FramesParam(gdb.Parameter):
    """How Python frames appear in gdb: `default`, the frame filter shows an eval-loop frame's
    Python frames in its place (they share its number); `real`, each Python frame is a gdb
    frame of its own, with its own number, for `frame N`, `up`, `down`, `info frame` and MI."""

    set_doc = "Set how Python frames appear among gdb's frames (default or real)."
    show_doc = "Show how Python frames appear among gdb's frames."

    def __init__(self):
        super().__init__("pyunwind-frames", gdb.COMMAND_STACK, gdb.PARAM_ENUM, ["default", "real"])
        self.value = "default"

    def get_set_string(self):
        on = self.value == "real"
        if on:
            threads.remember_core()
            _define_hooks()
        _real.real = on
        _real_unwinder.enabled = on
        _real.drop()
        gdb.invalidate_cached_frames()
        return ""

    def get_show_string(self, svalue):
        return "Python frames are %s gdb frames." % ("real" if svalue == "real" else "shown in place of eval-loop")


_params = {}


# --- the session for this stop ----------------------------------------------------------------


U64 = fe.U64


def _filtered_frames(frame_iter):
    """A frame filter's frames, up to where gdb's own unwinding fails. gdb's iterator asks for
    a frame's caller before it yields the frame, and a gdb.error escaping the filter is printed
    as a Python exception: on one, the frames are gdb's own from there on, as far as they go.
    gdb's message is said once per stop, as `bt -no-filters` ends with it."""
    out = []
    try:
        for d in frame_iter:
            out.append(d)
    except gdb.error as e:
        line = "Backtrace stopped: %s" % fe.printable(str(e))
        if line not in _fallbacks_shown:
            _fallbacks_shown.add(line)
            gdb.write(line + "\n", gdb.STDERR)
        try:
            out.extend(FrameDecorator(f) for f in threads.native_frames()[len(out):])
        except gdb.error:
            pass
    return out


class _GdbHost(fe.Host):
    def memory_mode(self):
        return _params["memory"].value if "memory" in _params else "auto"

    def core_file(self):
        return threads.core_file()

    def executable(self):
        return gdb.current_progspace().filename

    def sysroot(self):
        # `set sysroot DIR`; gdb's default "target:" (and "target:/DIR" on a native target) is
        # this machine's own file system.
        root = gdb.parameter("sysroot") or ""
        if root.startswith("target:"):
            root = root[len("target:"):]
        return root if root not in ("", "/") else None

    def pid(self):
        return gdb.selected_inferior().pid or None

    def is_local(self):
        conn = getattr(gdb.selected_inferior(), "connection", None)
        return conn is None or getattr(conn, "type", "native") == "native"

    def read_memory(self, addr, size):
        return bytes(gdb.selected_inferior().read_memory(addr, size))

    def maps(self):
        try:
            return fe.info_proc_mappings_to_maps(gdb.execute("info proc mappings", to_string=True))
        except gdb.error as e:
            raise gdb.GdbError("pyunwind: %s" % e)

    def auxv(self):
        try:
            return fe.parse_info_auxv(gdb.execute("info auxv", to_string=True)) or None
        except gdb.error:
            return None

    def thread_ids(self):
        # Threads that record no LWP are matched through their thread pointer, which costs a
        # switch to every thread: only asked for when needed.
        return threads.all_thread_ids(gdb.selected_inferior())

    def thread(self):
        return threads.thread_key(), threads.thread_pointer()

    def thread_names(self):
        # gdb's name: one `thread name` gave, else the system's (a live process's comm; a
        # Linux core shows none). No thread switch needed.
        names = []
        for t in gdb.selected_inferior().threads():
            try:
                name = t.name
            except gdb.error:
                continue
            if name:
                names.append((threads.thread_key(t), name))
        return names

    def thread_syscalls(self, names):
        return threads.thread_syscalls(gdb.selected_inferior(), names)

    def write(self, text):
        gdb.write(fe.printable(text))

    def selected_python_frame(self, session, frames):
        # gdb's selected frame wins when it is an eval-loop frame (`frame N`, `up`): the Python
        # frame py-up/py-down chose if that frame runs it, else the innermost one it runs.
        idx = _state.selected.get(threads.thread_key())
        try:
            level = gdb.selected_frame().level()
            pairs = _python_by_level()
        except gdb.error:
            return None
        shown = pairs[level][1] if level < len(pairs) else []
        if not shown and self.python_frames_selectable():
            shown = _inlined_into(pairs, level)
        if shown:
            return idx if idx in shown else shown[0]
        return None

    def python_frames_selectable(self):
        return _real is not None and _real.real

    def selected_frame_number(self):
        try:
            return gdb.selected_frame().level()
        except gdb.error:
            return None

    def _levels(self):
        """gdb levels of the frames that are not copies (real frames), or None."""
        if not self.python_frames_selectable():
            return None
        return _physical(threads.native_frames())[0]

    def native_frames(self, session=None):
        try:
            shown = threads.native_frames()
            phys, copies = _physical(shown)
            frames = [shown[n] for n in phys]
            names = [f.name() for f in frames]
            pcs = [f.pc() & 0xFFFFFFFFFFFFFFFF for f in frames]
        except gdb.error:
            return None
        try:
            wait_addr = int(frames[0].read_register("rdi")) & 0xFFFFFFFFFFFFFFFF if frames else None
        except (gdb.error, ValueError):
            wait_addr = None
        out = {"names": names, "pcs": pcs, "sps": threads.stack_pointers(frames), "wait_addr": wait_addr}
        if copies is not None:
            # Real frames: each Python frame has a gdb level of its own, and the native frames
            # are numbered past them, as `bt` and `frame N` number them.
            python_levels = {}
            try:
                for level, (_frame, here) in enumerate(_python_by_level()):
                    for i in here:
                        python_levels.setdefault(i, level)
            except gdb.error:
                return out
            out["levels"] = phys
            out["python_levels"] = fe.levels_of_python_frames(python_levels)
        return out

    def unnumbered_native_frames(self, session):
        # The core unwinds from frame 0's registers instead of stepping gdb's frames: each
        # Frame.older() may make gdb expand a compile unit's DWARF (25-60 ms with
        # python3.11-dbg). gdb's own frames where the core's unwind stops early (gdb may go
        # further) or real frames need gdb's levels.
        if self.python_frames_selectable():
            return self.native_frames(session)
        # A core's registers are in its notes: asking gdb for frame 0 first made gdb expand its
        # compile unit's DWARF (0.1 s of a 0.12 s py-bt with python3.11-dbg installed).
        own = fe.own_unnumbered_natives(session, lwp=threads.thread_key())
        if own is not None:
            return own
        try:
            f = gdb.newest_frame()
            names = fe.unwind_registers(f.architecture().name())
            regs = {r: int(f.read_register(r)) & U64 for r in names}
        except (gdb.error, ValueError):
            return self.native_frames(session)
        return fe.own_unnumbered_natives(session, regs=regs) or self.native_frames(session)

    def selected_level(self):
        try:
            level = gdb.selected_frame().level()
            levels = self._levels()
        except gdb.error:
            return None
        if levels is None:
            return level
        # A copy stands for the eval-loop frame it copies: the next frame that is not one.
        return next((p for p, n in enumerate(levels) if n >= level), None)

    def select_level(self, level):
        try:
            levels = self._levels()
            if levels is not None:
                level = levels[level] if level < len(levels) else level
            f = gdb.newest_frame()
            while f is not None and f.level() < level:
                f = f.older()
            if f is not None:
                f.select()
        except gdb.error:
            pass

    def python_frame_selected(self, session, index):
        # Select the eval-loop native frame that runs Python frame `index`, if gdb can unwind
        # to it.
        try:
            for f, shown in _python_by_level():
                if index in shown:
                    f.select()
                    return
        except gdb.error:
            pass


def _open_session():
    """The stop's session; its errors as they are (the frame filter tells "no Python here"
    from a failure by the exception's class)."""
    inf = gdb.selected_inferior()
    key = (inf.num, inf.pid, threads.core_file())
    host = _GdbHost()
    return _state.with_thread_ids(key, lambda ids: fe.open_session(core(), host, ids), host.thread_ids)


def session():
    try:
        return _open_session()
    except core().Error as e:
        raise gdb.GdbError("pyunwind: %s" % e)
    except fe.FrontendError as e:
        raise gdb.GdbError(str(e))


def _quiet_session():
    """The stop's session for the unwinder, which may not run gdb commands nor read registers
    through frames: None when the target's core file is not known yet, or memory must be read
    through gdb's commands."""
    inf = gdb.selected_inferior()
    conn = getattr(inf, "connection", None)
    kind = getattr(conn, "type", None) if conn is not None else None
    if kind == "native":
        corefile = None
    elif kind == "core" and threads.known_cores.get(inf.num):
        corefile = threads.known_cores[inf.num]
    else:
        return None
    key = (inf.num, inf.pid, corefile)
    if _state.session is not None and _state.key == key:
        return _state.session
    host = _QuietHost(corefile)
    if host.memory_mode() == "debugger":
        return None
    try:
        return _state.get(key, lambda: fe.open_session(core(), host, None))
    except Exception:
        return None


class _QuietHost(_GdbHost):
    def __init__(self, corefile):
        self._corefile = corefile

    def core_file(self):
        return self._corefile

    def maps(self):
        raise fe.FrontendError("pyunwind: no memory maps without gdb commands")


def _frames():
    return fe.thread_frames(session(), threads.thread_key(), threads.thread_pointer())


def _physical(frames):
    """The frames that are not copies made by real frames (indices into `frames`), and for
    each frame its copy (key, index) or None; (all, None) outside real mode."""
    if _real is None or not _real.real:
        return list(range(len(frames))), None
    copies = [_real.copy_at(f) for f in frames]
    return [n for n, c in enumerate(copies) if c is None], copies


def _splice(frames, hide=True, with_pcs=True):
    """The core's splice actions for these gdb frames (not copies)."""
    sps = threads.stack_pointers(frames)
    pcs = [f.pc() & 0xFFFFFFFFFFFFFFFF for f in frames] if with_pcs else None
    return json.loads(session().splice([f.name() for f in frames], lwp=threads.thread_key(),
                                       tp=threads.thread_pointer(), hide_internal=hide, sps=sps, pcs=pcs))


def _python_by_level():
    """gdb's frames of the selected thread, innermost first, each with the Python frames
    (indices) shown at it."""
    frames = threads.native_frames()
    phys, copies = _physical(frames)
    actions = _splice([frames[n] for n in phys], with_pcs=False)
    if copies is None:
        return [(f, a["frames"] if a["action"] == "python" else []) for f, a in zip(frames, actions)]
    shown = [[] for _ in frames]
    for row in real.rows(frames, actions, phys, copies):
        if row[0] == "python":
            shown[row[1]].append(row[2])
    return list(zip(frames, shown))


def _inlined_into(pairs, level):
    """Real frames: the Python frames of the eval-loop frame that the inline frame at `level`
    is part of (with debug info, gdb shows the eval loop's inlined call site as inline frames
    before each copy: `up` from a Python frame stops there first), else []."""
    try:
        frame = pairs[level][0]
        if frame.type() != gdb.INLINE_FRAME:
            return []
        for older, shown in pairs[level + 1:]:
            if older.type() != gdb.INLINE_FRAME:
                return shown if real.same_frame(older, frame) else []
    except (gdb.error, IndexError):
        pass
    return []


def _call(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except gdb.GdbError:
        raise
    except gdb.error as e:
        raise gdb.GdbError("pyunwind: %s" % e)
    except Exception as e:
        raise gdb.GdbError(fe.error_line(e, fe.loaded_core(), "gdb"))


# --- frame filter -----------------------------------------------------------------------------


def _frame_locals(index, dap):
    """Frame `index`'s locals as gdb's decorators give them (the Python frame decorators are
    built in Rust, `Session.decorators`, and call this), or None when they cannot be read."""
    try:
        locals_ = fe.local_reprs(session(), index, lwp=threads.thread_key(), tp=threads.thread_pointer())
    except Exception:
        return None
    if dap:
        return [decor.Local(name, decor.dap_repr(text)) for name, text in locals_]
    return [decor.Local(name, text) for name, text in locals_]


class PythonFrameFilter:
    """Replaces each eval-loop frame by the Python frames it runs; hides the interpreter's
    call plumbing between Python frames (`set pyunwind-hide-internal off` keeps it)."""

    def __init__(self):
        self.name = "pyunwind"
        self.priority = 100
        self.enabled = True
        gdb.frame_filters[self.name] = self

    def filter(self, frame_iter):
        decorators = _filtered_frames(frame_iter)
        try:
            if not _open_session().python_thread(lwp=threads.thread_key(), tp=threads.thread_pointer()):
                # A thread that never ran Python: its native frames are all there is.
                return _native_only(decorators)
            hide = _params["hide"].value if "hide" in _params else True
            inferior = [d.inferior_frame() for d in decorators]
            phys, copies = _physical(inferior)
            # The core hides the interpreter's plumbing by where it is: stripped builds too.
            actions = _splice([inferior[n] for n in phys], hide)
            named = jit.name_frames(_jit_stop, [decorators[n] for n in phys], actions, _frames)
            # Built here, not lazily while gdb prints, so that an error still falls back.
            if copies is None:
                return iter(_spliced(named, actions))
            return iter(_real_spliced(decorators, inferior, named, actions, phys, copies))
        except Exception as e:
            # No Python here, or an error, which one line says: the native stack unchanged.
            report_fallback(e)
            return _native_only(decorators)


def _native_only(decorators):
    """gdb's own frames, with JIT frames named after their executors' code where that works."""
    try:
        return iter([decor.shown(d) for d in jit.name_frames(_jit_stop, decorators)])
    except Exception as e:
        report_fallback(e)
        return iter(decorators)


# Fallback lines already printed in this stop: each once, however many times gdb's frame
# filter and unwinders meet the same error until the target runs again. The filter runs for
# every `bt` (each thread of `thread apply all bt`), every MI stack listing and every DAP
# stackTrace request, which an editor sends several times per stop; the error lies in the
# stop's memory, which stays the same until then.
_fallbacks_shown = set()


def report_fallback(e):
    """Say once per stop why gdb shows its native frames only: `pyunwind: <error>; showing
    native frames only`. Nothing for a target with no Python in it."""
    if fe.is_not_python(e, fe.loaded_core()):
        return
    if isinstance(e, (gdb.GdbError, gdb.error)):
        # gdb's own failures (a register, memory) and our command errors are not bugs.
        text = str(e)
        e = fe.FrontendError(text if text.startswith("pyunwind: ") else "pyunwind: " + text)
    line = fe.fallback_line(e, fe.loaded_core(), "gdb")
    if line in _fallbacks_shown:
        return
    _fallbacks_shown.add(line)
    gdb.write(line + "\n", gdb.STDERR)


def _forget_fallbacks(_event=None):
    _fallbacks_shown.clear()


def _python_decorators(groups, dap):
    """The decorators of the Python frames shown at eval-loop frames, one list per group
    (base decorator, its gdb.Frame, [Python frame index]); built in Rust: gdb may print
    100,000 of them."""
    return session().decorators(groups, dap, _frame_locals, lwp=threads.thread_key(),
                                tp=threads.thread_pointer())


def _spliced(decorators, actions):
    """The decorators `bt` shows, as a list. "tail" rows are left out: gdb's own unwinder
    reaches the interpreter loop, and a decorator needs a native frame to stand on, so frames
    no eval frame runs are left to py-bt."""
    dap = bool(decorators) and decor.for_dap(decorators[0])
    groups = [(decorators[n], decorators[n].inferior_frame(), a["frames"])
              for n, a in enumerate(actions) if a["action"] == "python"]
    python = iter(_python_decorators(groups, dap))
    shown = []
    for n, a in enumerate(actions):
        if a["action"] == "python":
            shown += next(python)
        elif a["action"] == "keep":
            shown.append(decor.shown(decorators[n], a.get("builtin")))
    return shown


def _real_spliced(decorators, inferior, named, actions, phys, copies):
    """Real frames: each copy of an eval-loop frame shows one Python frame of its run."""
    named_at = dict(zip(phys, named))
    dap = bool(decorators) and decor.for_dap(decorators[0])
    rows = []
    for row in real.rows(inferior, actions, phys, copies):
        d = named_at.get(row[1], decorators[row[1]])
        rows.append((row, d))
    groups = [(d, d.inferior_frame(), [row[2]]) for row, d in rows if row[0] == "python"]
    python = iter(_python_decorators(groups, dap))
    return [next(python)[0] if row[0] == "python" else decor.shown(d) for row, d in rows]


# --- real frames: what runs the target from a Python frame -------------------------------------


def _selected_python():
    """(level, Python frame index, frame dict, copy index or None) of the selected gdb frame
    when it shows a Python frame, else None."""
    level = gdb.selected_frame().level()
    pairs = _python_by_level()
    if level >= len(pairs) or len(pairs[level][1]) != 1:
        return None
    index = pairs[level][1][0]
    frames = _frames()
    copy = _real.copy_at(pairs[level][0])
    return level, index, frames[index], copy[1] if copy else None


def _guard(command):
    """Refuses `command` (finish, return, next, step, until) when it cannot do what it says
    from the selected Python frame; gdb runs it otherwise. Called by gdb's hooks in real
    frames mode."""
    if _real is None or not _real.real:
        return
    try:
        sel = _selected_python()
    except Exception:
        # Not knowing is no reason to stop gdb's own command.
        return
    if sel is None:
        return
    level, _index, f, copy = sel
    name = "#%d %s" % (level, f.get("function", "?"))
    if command == "return":
        raise gdb.GdbError("pyunwind: return cannot pop Python frame %s: the interpreter would go on running "
                           "a frame it no longer has; use py-finish to run until it returns" % name)
    if command == "finish" and copy is not None:
        raise gdb.GdbError("pyunwind: finish cannot stop when Python frame %s returns: its eval-loop call goes "
                           "on running older Python frames; use py-finish" % name)
    if command in ("next", "step", "until") and level > 0:
        raise gdb.GdbError("pyunwind: %s steps the innermost frame (#0), not Python frame %s; use py-finish "
                           "to run until it returns, or `frame 0` first" % (command, name))


class _GuardCommand(gdb.Command):
    """Used by pyunwind's hooks in real frames mode: refuses finish, return, next, step and
    until from a Python frame when they would not do what they say."""

    def __init__(self):
        super().__init__("pyunwind-guard", gdb.COMMAND_OBSCURE)

    def invoke(self, arg, from_tty):
        _guard(arg.strip())


_GUARDED = ("finish", "return", "next", "step", "until")
_hooks_defined = False


def _define_hooks():
    global _hooks_defined
    if _hooks_defined:
        return
    _hooks_defined = True
    for c in _GUARDED:
        gdb.execute("define hook-%s\npyunwind-guard %s\nend" % (c, c), to_string=True)


class _WatchReturn(gdb.Breakpoint):
    """py-finish's watchpoint: stops once the pointer holds the value it takes when the
    selected Python frame has returned."""

    def __init__(self, addr, value):
        super().__init__("*(unsigned long *)0x%x" % addr, gdb.BP_WATCHPOINT, gdb.WP_WRITE, internal=True)
        self.silent = True
        self._addr = addr
        self._value = value
        self.hit = False

    def stop(self):
        try:
            now = int.from_bytes(bytes(gdb.selected_inferior().read_memory(self._addr, 8)), "little")
        except gdb.error:
            return False
        if now == self._value:
            self.hit = True
            return True
        return False


def _py_finish(arg):
    if arg.strip():
        raise fe.UsageError("usage: py-finish")
    if threads.core_file():
        raise fe.FrontendError("pyunwind: py-finish needs a running process, not a core file")
    host = _GdbHost()
    s = session()
    frames = _frames()
    index = _commands_object().selected_index(host, frames)
    f = frames[index]
    lwp, tp = host.thread()
    addr, value = s.return_watch(index, lwp=lwp, tp=tp)
    gdb.write("Run till exit from Python frame %s (%s:%s)\n" % (f["function"], f.get("file"), f.get("line")))
    thread = gdb.selected_thread()
    wp = _WatchReturn(addr, value)
    try:
        thread.switch()
        gdb.execute("continue", to_string=True)
    finally:
        hit = wp.hit
        if wp.is_valid():
            wp.delete()
    if not hit:
        gdb.write("py-finish: stopped before %s returned\n" % f["function"])
        return
    gdb.write("py-finish: %s returned\n" % f["function"])
    now = _frames()
    if now and now[0].get("kind") == "python":
        gdb.write("Now in %s (%s:%s)\n" % (now[0]["function"], now[0].get("file"), now[0].get("line")))


class _PyFinishCommand(gdb.Command):
    """Run until the selected Python frame returns (a live process), then stop.
Usage: py-finish
gdb's own finish stops when a native frame returns; in one eval-loop call many Python frames
run, so py-finish watches the thread's current Python frame instead."""

    def __init__(self):
        super().__init__("py-finish", gdb.COMMAND_RUNNING)

    def invoke(self, arg, from_tty):
        _call(_py_finish, arg)


# --- pretty-printers ----------------------------------------------------------------------------

# The pointer types libpython.py prints (its `pretty_printer_lookup`), by their C names.
_PRINTED_TYPES = ("PyObject", "PyFrameObject", "PyUnicodeObject", "wrapperobject")


class PyObjectPrinter:
    """`print` of a `PyObject *` (and the types above): the object's repr as libpython shows
    it, decoded from memory by the core."""

    def __init__(self, val, frame):
        self._val = val
        self._frame = frame

    def to_string(self):
        addr = int(self._val) & 0xFFFFFFFFFFFFFFFF
        if addr == 0:
            return "0x0"
        try:
            return session().proxy_repr(addr, frame=self._frame)
        except (gdb.error, gdb.GdbError, core().Error) as e:
            return "<unreadable object at 0x%x: %s>" % (addr, e)


def _printer_lookup(val):
    held = decor.dap_reprs.get(id(val))
    if held is not None and held[0] is val:
        return decor.ReprPrinter(held[1])
    t = val.type.unqualified().strip_typedefs()
    if t.code != gdb.TYPE_CODE_PTR:
        return None
    name = str(t.target().unqualified())
    if name not in _PRINTED_TYPES:
        return None
    return PyObjectPrinter(val, frame=name == "PyFrameObject")


# --- commands ---------------------------------------------------------------------------------

_commands = None


def _commands_object():
    global _commands
    if _commands is None:
        _commands = fe.Commands(core(), _state, lambda host: session())
    return _commands


def _run(name, arg):
    _commands_object().run(name, _GdbHost(), arg)


def _make_command(name):
    def invoke(self, arg, from_tty):
        _call(_run, name, arg)

    cls = type("PyunwindCommand", (gdb.Command,), {"__doc__": fe.Commands.HELP[name], "invoke": invoke})
    return cls(name, gdb.COMMAND_STACK)


def _register_commands():
    for name in fe.Commands.HELP:
        _make_command(name)


_reclaim = False


def _on_new_objfile(_event):
    # A distribution's python3.X-gdb.py (libpython) is auto-loaded with its objfile and takes
    # the py-* names. gdb may run that script after this event, so take the names back now and
    # again before the next command is read.
    global _reclaim
    _register_commands()
    _reclaim = True


def _remember_real_core(_event=None):
    # A core loaded in real mode: the unwinder needs its path, and gdb's frames built before
    # it was known have no copies.
    if _real is not None and _real.real:
        threads.remember_core()


def _before_prompt():
    global _reclaim
    if _real is not None and _real.real and _real.missed:
        threads.remember_core()
        _real.missed = False
        gdb.invalidate_cached_frames()
    if _reclaim:
        _reclaim = False
        _register_commands()


_registered = False


def register():
    global _registered
    if _registered:
        return
    _registered = True
    _params["memory"] = _MemoryParam()
    _params["hide"] = _HideParam()
    global _real, _real_unwinder
    _real, _real_unwinder = real.register(_quiet_session, threads.thread_key, _state.drop, report_fallback)
    _params["frames"] = _FramesParam()
    _GuardCommand()
    _PyFinishCommand()
    global _jit_stop
    _jit_stop = jit.register(core, _GdbHost(), report_fallback)
    PythonFrameFilter()
    gdb.pretty_printers.append(_printer_lookup)
    _register_commands()
    gdb.events.cont.connect(_state.drop)
    gdb.events.cont.connect(decor.drop_dap_reprs)
    for event in ("cont", "exited", "new_objfile", "clear_objfiles"):
        if hasattr(gdb.events, event):
            getattr(gdb.events, event).connect(_forget_fallbacks)
    gdb.events.exited.connect(_state.drop)
    gdb.events.new_objfile.connect(_on_new_objfile)
    gdb.events.new_objfile.connect(_state.drop)
    gdb.events.new_objfile.connect(_remember_real_core)
    # `set var` through gdb changes what the cached pages hold.
    gdb.events.memory_changed.connect(_state.drop)
    gdb.events.before_prompt.connect(_before_prompt)

"""gdb frontend: the py-* commands, the frame filter that puts Python frames into `bt`, and the
per-stop session. Thin: decoding and text rendering are in the Rust core."""

import json
import re

import gdb
from gdb.FrameDecorator import FrameDecorator

import pyunwind_frontend as fe

_core = None
_state = fe.StopState()


def core():
    global _core
    if _core is None:
        _core = fe.load_core_module()
    return _core


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


_params = {}


# --- the session for this stop ----------------------------------------------------------------


def _core_file():
    text = gdb.execute("info target", to_string=True)
    m = re.search(r"core dump file:\s*\n?\s*`(.+?)'", text)
    return m.group(1) if m else None


def _thread_key(thread=None):
    thread = thread or gdb.selected_thread()
    if thread is None:
        raise gdb.GdbError("pyunwind: no thread selected (is a program running or a core loaded?)")
    return thread.ptid[1] or thread.ptid[0]


def _thread_pointer():
    try:
        return int(gdb.parse_and_eval("$fs_base")) & 0xFFFFFFFFFFFFFFFF
    except gdb.error:
        return None


def _all_thread_ids(inf):
    """(lwp, thread pointer) of every thread; versions without native thread ids (3.10) need
    these. Switching threads is restored afterwards."""
    ids = []
    cur = gdb.selected_thread()
    try:
        frame = gdb.selected_frame()
    except gdb.error:
        frame = None
    try:
        for t in inf.threads():
            t.switch()
            tp = _thread_pointer()
            if tp is not None:
                ids.append((_thread_key(t), tp))
    finally:
        if cur is not None:
            cur.switch()
        if frame is not None:
            try:
                frame.select()
            except gdb.error:
                pass
    return ids


def _open_session():
    s = _open_session_with(None)
    if s.needs_thread_ids():
        # Threads that record no LWP are matched through their thread pointer, which costs a
        # switch to every thread: only done when needed.
        s = _open_session_with(_all_thread_ids(gdb.selected_inferior()))
    return s


def _open_session_with(ids):
    inf = gdb.selected_inferior()
    mode = _params["memory"].value if "memory" in _params else "auto"
    corefile = _core_file()
    c = core()
    if mode != "debugger":
        if corefile:
            exe = gdb.current_progspace().filename
            try:
                return c.Session.core(corefile, exe=exe, thread_ids=ids)
            except c.Error:
                if mode == "direct" or not exe:
                    raise
                return c.Session.core(corefile, thread_ids=ids)
        conn = getattr(inf, "connection", None)
        local = conn is None or getattr(conn, "type", "native") == "native"
        if inf.pid > 0 and local:
            return c.Session.live(inf.pid, thread_ids=ids)
        if mode == "direct":
            raise gdb.GdbError("pyunwind: no direct memory source for this target")

    def read(addr, size):
        return bytes(inf.read_memory(addr, size))

    try:
        maps = fe.info_proc_mappings_to_maps(gdb.execute("info proc mappings", to_string=True))
    except gdb.error as e:
        raise gdb.GdbError("pyunwind: %s" % e)
    return c.Session.debugger(read, maps, pid=inf.pid or None, thread_ids=ids)


def session():
    inf = gdb.selected_inferior()
    key = (inf.num, inf.pid, _core_file())
    try:
        return _state.get(key, _open_session)
    except core().Error as e:
        raise gdb.GdbError("pyunwind: %s" % e)


def _frames():
    return fe.thread_frames(session(), _thread_key(), _thread_pointer())


def _call(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except core().Error as e:
        raise gdb.GdbError("pyunwind: %s" % e)
    except fe.UsageError as e:
        raise gdb.GdbError(str(e))


# --- frame filter -----------------------------------------------------------------------------


class _Local:
    def __init__(self, name, value):
        self._name = name
        self._value = value

    def symbol(self):
        return self._name

    def value(self):
        return self._value


class PythonFrameDecorator(FrameDecorator):
    """A Python frame shown in place of (part of) an eval-loop native frame."""

    def __init__(self, base, frame, index):
        super().__init__(base)
        self._f = frame
        self._index = index

    def function(self):
        if self._f["kind"] != "python":
            return "<unreadable Python frame: %s>" % self._f.get("reason")
        return self._f["function"]

    def filename(self):
        return self._f.get("file")

    def line(self):
        return self._f.get("line")

    def address(self):
        return None

    def frame_args(self):
        return None

    def frame_locals(self):
        if self._f["kind"] != "python":
            return None
        try:
            locals_ = json.loads(session().locals(self._index, lwp=_thread_key(), tp=_thread_pointer()))
        except Exception:
            return None
        return [_Local(l["name"], l["repr"]) for l in locals_]


class PythonFrameFilter:
    """Replaces each eval-loop frame by the Python frames it runs; hides the interpreter's
    call plumbing between Python frames (`set pyunwind-hide-internal off` keeps it)."""

    def __init__(self):
        self.name = "pyunwind"
        self.priority = 100
        self.enabled = True
        gdb.frame_filters[self.name] = self

    def filter(self, frame_iter):
        decorators = list(frame_iter)
        try:
            s = session()
            frames = _frames()
            names = [d.inferior_frame().name() for d in decorators]
            hide = _params["hide"].value if "hide" in _params else True
            actions = json.loads(s.splice(names, lwp=_thread_key(), tp=_thread_pointer(), hide_internal=hide))
        except Exception:
            # No Python here (or an unreadable target): show the native stack unchanged.
            return iter(decorators)
        return _spliced(decorators, actions, frames)


class _UnnamedFrameDecorator(FrameDecorator):
    """A native frame gdb has no symbol for: `??` as gdb itself shows it."""

    def function(self):
        return "??"


def _spliced(decorators, actions, frames):
    for d, a in zip(decorators, actions):
        if a["action"] == "python":
            for i in a["frames"]:
                yield PythonFrameDecorator(d, frames[i], i)
        elif a["action"] == "keep":
            yield d if d.inferior_frame().name() else _UnnamedFrameDecorator(d)


# --- commands ---------------------------------------------------------------------------------


class _Command(gdb.Command):
    def __init__(self, name):
        super().__init__(name, gdb.COMMAND_STACK)

    def invoke(self, arg, from_tty):
        _call(self.run, arg)


class PyBt(_Command):
    """Print the Python stack of the selected thread (most recent call first).
Usage: py-bt [-a|--all] [--json]
  -a, --all   every thread, each with its native id, name and GIL state
  --json      the JSON report instead of text"""

    def __init__(self):
        super().__init__("py-bt")

    def run(self, arg):
        a = fe.parse_bt_args("py-bt", arg)
        s = session()
        if a.json:
            if a.all_threads:
                gdb.write(s.report(all_threads=True) + "\n")
            else:
                gdb.write(s.report(lwp=_thread_key(), tp=_thread_pointer()) + "\n")
            return
        if a.all_threads:
            gdb.write(s.render_bt(all_threads=True))
        else:
            gdb.write(s.render_bt(lwp=_thread_key(), tp=_thread_pointer()))


class PyBtFull(_Command):
    """Print the Python stack of the selected thread with each frame's local variables.
Usage: py-bt-full [-a|--all] [--json]"""

    def __init__(self):
        super().__init__("py-bt-full")

    def run(self, arg):
        a = fe.parse_bt_args("py-bt-full", arg)
        s = session()
        if a.json:
            gdb.write(s.report(lwp=_thread_key(), tp=_thread_pointer(), all_threads=a.all_threads, locals=True) + "\n")
        elif a.all_threads:
            gdb.write(s.render_bt(all_threads=True, full=True))
        else:
            gdb.write(s.render_bt(lwp=_thread_key(), tp=_thread_pointer(), full=True))


class PyBtAsync(_Command):
    """Print every asyncio task's async stack, grouped by the thread running its event loop.
Each task: its live frames if running, its coroutines (each at its await), what it awaits,
then each task awaiting it up to the root task, then the loop thread's frames. Threads
without a loop print their plain Python stack. Await cycles are listed at the end.
Usage: py-bt-async [--json]
  --json   the JSON report, with `tasks`, `loops` and `cycles`"""

    def __init__(self):
        super().__init__("py-bt-async")

    def run(self, arg):
        a = fe.parse_async_args("py-bt-async", arg)
        s = session()
        gdb.write(s.async_report() + "\n" if a.json else s.render_async())


class PyTasks(_Command):
    """Print the asyncio task graph: a tree (like `python -m asyncio pstree`: each task, its
coroutine frames, and under them the tasks it awaits) and a table (like `python -m asyncio ps`).
Tasks awaited by several keep every awaiter; await cycles are printed as `cycle: a -> b -> a`.
Usage: py-tasks [--tree | --table] [--json]"""

    def __init__(self):
        super().__init__("py-tasks")

    def run(self, arg):
        a = fe.parse_tasks_args("py-tasks", arg)
        s = session()
        if a.json:
            gdb.write(s.async_report() + "\n")
        else:
            gdb.write(s.render_tasks(tree=a.show_tree, table=a.show_table))


def _selected_index(frames):
    """The selected Python frame: follows gdb's selected frame when it is an eval-loop frame,
    else what py-up/py-down chose (innermost by default)."""
    lwp = _thread_key()
    idx = _state.selected.get(lwp)
    try:
        sel = gdb.selected_frame()
        level = sel.level()
        names = []
        f = gdb.newest_frame()
        while f is not None and len(names) <= level:
            names.append(f.name())
            f = f.older()
        actions = json.loads(session().splice(names, lwp=lwp, tp=_thread_pointer()))
        a = actions[level] if level < len(actions) else None
        if a and a["action"] == "python" and a["frames"]:
            if idx not in a["frames"]:
                idx = a["frames"][0]
    except gdb.error:
        pass
    if idx is None or idx >= len(frames) or frames[idx]["kind"] != "python":
        idx = fe.step_frame(frames, -1, +1)
    if idx is None:
        raise gdb.GdbError("Unable to locate python frame")
    return idx


def _select_native_for(index):
    """Select the eval-loop native frame that runs Python frame `index`, if gdb can unwind to it."""
    try:
        decorated = []
        f = gdb.newest_frame()
        while f is not None and len(decorated) < 100000:
            decorated.append(f)
            f = f.older()
        names = [f.name() for f in decorated]
        actions = json.loads(session().splice(names, lwp=_thread_key(), tp=_thread_pointer()))
        for f, a in zip(decorated, actions):
            if a["action"] == "python" and index in a["frames"]:
                f.select()
                return
    except gdb.error:
        pass


class _Move(_Command):
    direction = 0

    def run(self, arg):
        if arg.strip():
            raise fe.UsageError("usage: %s" % self._name)
        frames = _frames()
        cur = _selected_index(frames)
        nxt = fe.step_frame(frames, cur, self.direction)
        if nxt is None:
            raise gdb.GdbError("Unable to find an older python frame" if self.direction > 0 else "Unable to find a newer python frame")
        _select_native_for(nxt)
        _state.selected[_thread_key()] = nxt
        gdb.write(session().render_frame(nxt, lwp=_thread_key(), tp=_thread_pointer()))


class PyUp(_Move):
    """Select and print the Python frame that called this one (if any).
Usage: py-up"""

    direction = +1

    def __init__(self):
        self._name = "py-up"
        super().__init__("py-up")


class PyDown(_Move):
    """Select and print the Python frame called by this one (if any).
Usage: py-down"""

    direction = -1

    def __init__(self):
        self._name = "py-down"
        super().__init__("py-down")


class PyList(_Command):
    """List the Python source code of the selected Python frame.
Usage: py-list            lines around the current line
       py-list START      10 lines from START
       py-list START,END  lines START to END"""

    def __init__(self):
        super().__init__("py-list")

    def run(self, arg):
        frames = _frames()
        f = frames[_selected_index(frames)]
        line = f.get("line") or 1
        start, end = fe.parse_list_args(arg, line)
        gdb.write(core().render_list(f["file"], line, start, end))


class PyLocals(_Command):
    """Print the local variables of the selected Python frame.
Usage: py-locals"""

    def __init__(self):
        super().__init__("py-locals")

    def run(self, arg):
        frames = _frames()
        idx = _selected_index(frames)
        gdb.write(session().render_locals(idx, lwp=_thread_key(), tp=_thread_pointer()))


class PyPrint(_Command):
    """Print the value of a Python name in the selected Python frame: a local, else a global,
else a builtin.
Usage: py-print NAME"""

    def __init__(self):
        super().__init__("py-print")

    def run(self, arg):
        name = fe.parse_name_arg("py-print", arg)
        frames = _frames()
        idx = _selected_index(frames)
        found = session().lookup(idx, name, lwp=_thread_key(), tp=_thread_pointer())
        if found is None:
            gdb.write("%r not found\n" % name)
        else:
            gdb.write("%s %r = %s\n" % (found[0], name, found[1]))


_COMMANDS = (PyBt, PyBtFull, PyBtAsync, PyTasks, PyUp, PyDown, PyList, PyLocals, PyPrint)


def _register_commands():
    for c in _COMMANDS:
        c()


_reclaim = False


def _on_new_objfile(_event):
    # A distribution's python3.X-gdb.py (libpython) is auto-loaded with its objfile and takes
    # the py-* names. gdb may run that script after this event, so take the names back now and
    # again before the next command is read.
    global _reclaim
    _register_commands()
    _reclaim = True


def _before_prompt():
    global _reclaim
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
    PythonFrameFilter()
    _register_commands()
    gdb.events.cont.connect(_state.drop)
    gdb.events.exited.connect(_state.drop)
    gdb.events.new_objfile.connect(_on_new_objfile)
    gdb.events.new_objfile.connect(_state.drop)
    gdb.events.before_prompt.connect(_before_prompt)

"""What the gdb and lldb frontends share: loading the `_pyunwind` module, the py-* commands
themselves (argument parsing, help, output), opening the session for a stop, the per-stop cache
with the selected Python frame, and how Python frames are spliced into a native backtrace. Each
frontend supplies a `Host` that answers what only its debugger knows.

No decoding happens here; that is all in the Rust core.
"""

import argparse
import glob
import importlib.machinery
import importlib.util
import json
import os
import re
import shlex
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.dirname(_HERE)


def load_core_module():
    """Import `_pyunwind`: $PYUNWIND_LIB, else the module beside this file (a pip install; it is
    abi3, so any debugger Python >= 3.8 loads it), else the checkout's target/release build."""
    if "_pyunwind" in sys.modules:
        return sys.modules["_pyunwind"]
    candidates = []
    if os.environ.get("PYUNWIND_LIB"):
        candidates.append(os.environ["PYUNWIND_LIB"])
    candidates += sorted(glob.glob(os.path.join(_HERE, "_pyunwind*.so")))
    candidates += [
        os.path.join(_REPO, "target", "release", "_pyunwind.so"),
        os.path.join(_REPO, "target", "debug", "_pyunwind.so"),
    ]
    for path in candidates:
        if os.path.isfile(path):
            loader = importlib.machinery.ExtensionFileLoader("_pyunwind", path)
            spec = importlib.util.spec_from_file_location("_pyunwind", path, loader=loader)
            mod = importlib.util.module_from_spec(spec)
            loader.exec_module(mod)
            sys.modules["_pyunwind"] = mod
            return mod
    raise ImportError(
        "pyunwind: the _pyunwind module is not built (looked in %s); run `make build` or set PYUNWIND_LIB"
        % ", ".join(candidates)
    )


def core():
    """The `_pyunwind` module, loaded on first use (load_core_module)."""
    return load_core_module()


def loaded_core():
    """The `_pyunwind` module if it is loaded, else None: what `error_line` and `is_not_python`
    are given where the module may have failed to load."""
    return sys.modules.get("_pyunwind")


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError("%s: %s" % (self.prog, message))

    def exit(self, status=0, message=None):
        raise UsageError(message or "")


def _parser(prog):
    return _Parser(prog=prog, add_help=False)


def parse_bt_args(prog, arg):
    p = _parser(prog)
    p.add_argument("-a", "--all", action="store_true", dest="all_threads")
    p.add_argument("--json", action="store_true")
    return p.parse_args(shlex.split(arg or ""))


def parse_json_arg(prog, arg):
    """`--json` alone: py-bt-async, py-why."""
    p = _parser(prog)
    p.add_argument("--json", action="store_true")
    return p.parse_args(shlex.split(arg or ""))


def parse_greenlets_args(prog, arg):
    p = _parser(prog)
    p.add_argument("--json", action="store_true")
    p.add_argument("--locals", action="store_true")
    return p.parse_args(shlex.split(arg or ""))


def parse_heap_args(prog, arg):
    p = _parser(prog)
    p.add_argument("--json", action="store_true")
    p.add_argument("--top", type=int, default=20)
    a = p.parse_args(shlex.split(arg or ""))
    if a.top < 0:
        p.error("--top must be 0 or more")
    return a


def parse_tasks_args(prog, arg):
    p = _parser(prog)
    p.add_argument("--json", action="store_true")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--tree", action="store_true")
    which.add_argument("--table", action="store_true")
    a = p.parse_args(shlex.split(arg or ""))
    # Neither flag: both views.
    a.show_tree = a.tree or not a.table
    a.show_table = a.table or not a.tree
    return a


def parse_list_args(arg, current_line):
    """libpython's py-list: no argument lists around the current line; `START` lists 10 lines
    from START; `START, END` lists that range."""
    arg = (arg or "").strip()
    if not arg:
        return max(current_line - 5, 1), current_line + 5
    m = re.match(r"^\s*(\d+)\s*(?:,\s*(\d+)\s*)?$", arg)
    if not m:
        raise UsageError("usage: py-list [START | START, END]")
    start = int(m.group(1))
    end = int(m.group(2)) if m.group(2) else start + 10
    if end < start:
        raise UsageError("py-list: END must not be before START")
    return start, end


def parse_name_arg(prog, arg):
    name = (arg or "").strip()
    if not name or not re.match(r"^[^\W\d]\w*$", name):
        raise UsageError("usage: %s NAME" % prog)
    return name



# --- memory maps --------------------------------------------------------------------------------


def maps_text(rows):
    """/proc/PID/maps lines for (start, end, file offset, path) rows; rows without an absolute
    path are left out (the core only needs file-backed mappings)."""
    out = [
        "%x-%x r--p %x 00:00 0 %s" % (start, end, offset, path)
        for start, end, offset, path in rows
        if path and path.startswith("/")
    ]
    return "\n".join(out) + "\n"


def info_proc_mappings_to_maps(text):
    """Turn gdb's `info proc mappings` table into /proc/PID/maps lines, so that the core parses
    one format."""
    rows = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 5 or not parts[0].startswith("0x"):
            continue
        try:
            start, end = int(parts[0], 16), int(parts[1], 16)
            offset = int(parts[3], 16)
        except ValueError:
            continue
        rest = parts[4:]
        if rest and re.match(r"^[r-][w-][x-][ps-]$", rest[0]):
            rest = rest[1:]
        rows.append((start, end, offset, " ".join(rest)))
    return maps_text(rows)


# --- the session for one stop -------------------------------------------------------------------

MEMORY_MODES = ("auto", "direct", "debugger")


def printable(text):
    """``text`` as a debugger can print it: a NUL (a corrupt name read from the target) as
    ``\\x00``, as the CLI prints it (report::text::printable); gdb.write refuses a NUL and
    lldb's C strings end at one."""
    # `in` first: it is a memchr, and replace scans much slower even when nothing matches
    # (8 ms for the 8 MB of a 100,000-frame py-bt).
    return text.replace("\0", "\\x00") if "\0" in text else text


class FrontendError(Exception):
    """A message for the user; each frontend turns it into its debugger's error."""


def error_line(e, core, debugger):
    """The one line a command shows for the exception `e` that ended it, never a traceback:
    our own errors as they are; anything else is a bug of the `debugger` frontend, named as
    one."""
    if isinstance(e, (UsageError, FrontendError, ImportError)):
        return str(e)
    if core is not None and isinstance(e, core.Error):
        return "pyunwind: %s" % e
    text = " ".join(str(e).split())
    # The panic boundary's marker (src/panic.rs), so that checkers count a frontend bug as the
    # bug it is; the literal only when the module could not be loaded.
    marker = getattr(core, "PANIC_MARKER", "internal error")
    return "pyunwind: %s in the %s frontend: %s%s" % (
        marker, debugger, type(e).__name__, ": " + text if text else "")


FALLBACK_SUFFIX = "; showing native frames only"

# The registers the core's own unwinder starts from (`Session.own_natives`), by architecture:
# those CFI may restore, and the first argument (the address a futex wait blocks on).
UNWIND_REGISTERS = {
    "x86_64": frozenset(["rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10",
                         "r11", "r12", "r13", "r14", "r15", "rip"]),
    "aarch64": frozenset(["x%d" % n for n in range(31)] + ["sp", "pc"]),
}


def own_unnumbered_natives(session, lwp=None, regs=None):
    """`Host.unnumbered_native_frames` from the core's own unwind of thread `lwp`: from the
    registers the core file recorded for it, else from `regs` (the debugger's innermost frame);
    None when neither is there or the unwind stops early (the debugger may go further)."""
    text = session.core_natives(lwp, inlined=False) if lwp is not None else None
    if text is None:
        if not regs:
            return None
        text = session.own_natives(regs, inlined=False)
    own = json.loads(text)
    if own["error"] or not own["pcs"]:
        return None
    return {k: own[k] for k in ("names", "pcs", "sps", "wait_addr")}


def arch_of(arch_name):
    """"aarch64" or "x86_64" for a debugger's architecture name (gdb: "i386:x86-64", "aarch64";
    lldb: a triple, `aarch64--linux`, `arm64-…`)."""
    return "aarch64" if "aarch64" in arch_name or "arm64" in arch_name else "x86_64"


def unwind_registers(arch_name):
    """UNWIND_REGISTERS of a debugger's architecture name (see arch_of)."""
    return UNWIND_REGISTERS[arch_of(arch_name)]


def fallback_line(e, core, debugger):
    """The one line a frame filter, unwinder or frame provider prints when an error makes it
    show the debugger's own native frames instead of Python's: never a silent fallback. The
    error is worded as for a command (`error_line`), so a frontend bug still carries the
    panic marker."""
    text = error_line(e, core, debugger)
    if not text.startswith("pyunwind: "):
        text = "pyunwind: " + text
    return printable(text) + FALLBACK_SUFFIX


# How the core words its "no CPython in this target" error (src/error.rs, Error::NoPython).
NOT_PYTHON_PREFIX = "no Python interpreter found"


def is_not_python(e, core):
    """Whether `e` says the target runs no Python at all: no error for a frame filter,
    unwinder or frame provider, which then shows the native frames without a fallback_line.
    `_pyunwind.NoPythonError` where the module has it, else the core's wording."""
    if core is None:
        return False
    if hasattr(core, "NoPythonError"):
        return isinstance(e, core.NoPythonError)
    return isinstance(e, core.Error) and str(e).startswith(NOT_PYTHON_PREFIX)


class Host:
    """What a debugger frontend tells the shared code. gdb and lldb each subclass it; the
    defaults are what a frontend without that knowledge answers."""

    def memory_mode(self):
        """One of MEMORY_MODES."""
        return "auto"

    def core_file(self):
        """Path of the core file being debugged, or None for a process."""
        return None

    def executable(self):
        return None

    def sysroot(self):
        """The debugger's sysroot (where the files a core names are looked up), or None."""
        return None

    def pid(self):
        return None

    def is_local(self):
        """Whether pid() is a process on this machine that process_vm_readv can read."""
        return False

    def read_memory(self, addr, size):
        """bytes, or an exception when unreadable."""
        raise NotImplementedError

    def auxv(self):
        """The target's auxiliary vector as (type, value) pairs, or None: asked for only when
        maps() is empty (a remote stub such as qemu-user's), so that the core can find the
        modules from the dynamic linker's list."""
        return None

    def exe_base(self):
        """Where the executable's ELF header is loaded, or None: for a debugger that shows no
        mappings and has no auxv() to give (lldb), so that the core can still find the
        modules from the dynamic linker's list."""
        return None

    def maps(self):
        """/proc/PID/maps-like text of the target's file mappings (see maps_text)."""
        raise NotImplementedError

    def thread_ids(self):
        """(LWP, thread pointer) of every thread: versions that record no LWP (3.10) need them."""
        return []

    def thread(self):
        """(LWP, thread pointer or None) of the selected thread."""
        raise NotImplementedError

    def thread_names(self):
        """(LWP, name) of every thread the debugger names (gdb's `InferiorThread.name`, lldb's
        `SBThread.GetName()`), shown as the threads' `native_name`; None when it names none."""
        return None

    def thread_syscalls(self, names):
        """(LWP, [values of the registers `names`]) of each thread, from the debugger's
        registers (`Session.syscall_registers` names them: x86-64 orig_rax and the arguments,
        arm64 pc, x8 and the arguments; see register_values), for `py-why` when memory is read
        through the debugger; None when it cannot read them. A thread left out is read from
        /proc where the process is local (lldb has no orig_rax)."""
        return None

    def write(self, text):
        raise NotImplementedError

    def selected_python_frame(self, session, frames):
        """The Python frame index the user selected through the debugger, or None."""
        return None

    def python_frame_selected(self, session, index):
        """py-up / py-down chose Python frame `index`: follow it in the debugger if it can."""

    def native_frames(self, session=None):
        """The selected thread's native frames, innermost first, as a dict of `names`, `pcs`,
        `sps` (lists; sps may be None) and `wait_addr` (the innermost frame's rdi, or None), or
        None when the debugger cannot unwind them. When the debugger shows other frames than
        these, also `levels` and `python_levels` (see `Session.stack_entries`); `session`
        unwinds them then."""
        return None

    def unnumbered_native_frames(self, session):
        """`native_frames` for a caller that prints no frame numbers (`py-bt`): without
        `levels`, and their names may be the symbol tables' (no inlined calls). A debugger
        whose frames cost more than the core's own unwind gives these instead."""
        return self.native_frames(session)

    def selected_level(self):
        """The debugger's selected native frame level, or None."""
        return None

    def select_level(self, level):
        """py-up / py-down chose the stack entry shown at native frame `level`: select it."""

    def python_frames_selectable(self):
        """Whether each Python frame is a debugger frame of its own (gdb's real frames), which
        python_frame_selected selects."""
        return False

    def selected_frame_number(self):
        """The number the debugger shows for its selected frame, or None."""
        return None


U64 = (1 << 64) - 1


def register_values(read, names):
    """[the value of each register of `names`] as unsigned 64-bit numbers, `read(name)`
    giving one as an int (None, or raising LookupError or ValueError, where the debugger has
    no such register); None when one is missing (Host.thread_syscalls)."""
    values = []
    for name in names:
        try:
            v = read(name)
        except (LookupError, ValueError):
            return None
        if v is None:
            return None
        values.append(int(v) & U64)
    return values


def open_session(core, host, thread_ids=None):
    """A `_pyunwind.Session` for the host's target: a core file or a local process read
    directly unless the memory mode says otherwise, else memory through the debugger."""
    return _open(core, core.Session, host, thread_ids=thread_ids)


def open_jit(core, host, inputs=None):
    """A `_pyunwind.Jit` (JIT and trampoline code of this stop) from the same memory source
    `open_session` would use. `inputs` from an earlier stop's `Jit.inputs()` skips the ELF
    symbol lookup."""
    return _open(core, core.Jit, host, inputs=inputs)


def _open(core, cls, host, **kwargs):
    mode = host.memory_mode()
    if mode != "debugger":
        corefile = host.core_file()
        if corefile:
            exe = host.executable()
            sysroot = host.sysroot()
            try:
                return cls.core(corefile, exe=exe, sysroot=sysroot, **kwargs)
            except core.Error:
                # The executable the debugger loaded may not be the one the core names.
                if mode == "direct" or not exe:
                    raise
                return cls.core(corefile, sysroot=sysroot, **kwargs)
        pid = host.pid()
        if pid and host.is_local():
            return cls.live(pid, **kwargs)
        if mode == "direct":
            raise FrontendError("pyunwind: no direct memory source for this target")
    maps = host.maps()
    auxv = exe_base = None
    if not maps.strip():
        auxv, exe_base = host.auxv(), host.exe_base()
    return cls.debugger(host.read_memory, maps, pid=host.pid() or None, sysroot=host.sysroot(),
                        auxv=auxv, exe=host.executable() if auxv or exe_base is not None else None,
                        exe_base=exe_base, **kwargs)


_AUXV_ROW = re.compile(r"^\s*(\d+)\s+\S+\s.*?\s(0x[0-9a-fA-F]+|\d+)(\s+\".*\")?\s*$")


def parse_info_auxv(text):
    """gdb's `info auxv` table (`3   AT_PHDR   Program headers for program   0x400040`; a
    string entry ends with its quoted text) as (type, value) pairs."""
    out = []
    for line in text.splitlines():
        m = _AUXV_ROW.match(line)
        if m:
            out.append((int(m.group(1)), int(m.group(2), 0)))
    return out


def trampoline_names(actions, frames, is_trampoline):
    """{native index: Python frame} for perf trampoline frames: a trampoline calls the eval loop
    for one Python function, so it is named after the oldest Python frame of the run of the
    nearest newer eval-loop frame (the function that eval call started)."""
    names = {}
    run = None
    for n, a in enumerate(actions):
        if a["action"] == "python" and a["frames"]:
            run = a["frames"]
        elif is_trampoline(n) and run is not None:
            names[n] = frames[run[-1]]
            run = None
    return names


def trampoline_label(frame):
    """How a perf trampoline frame is named after the Python frame it started (see
    trampoline_names), or None when that frame is unreadable (the region's own name stays)."""
    if frame.get("kind") != "python":
        return None
    return "[trampoline] %s (%s)" % (frame["function"], frame.get("file"))


def levels_of_python_frames(levels):
    """`python_levels` of Host.native_frames, from {Python frame index: the level it is shown at}:
    one entry per index up to the last one shown, None for those not shown."""
    return [levels.get(i) for i in range(max(levels, default=-1) + 1)]


def local_reprs(session, index, lwp=None, tp=None):
    """[(name, repr)] of the locals of Python frame `index`; raises where they cannot be read."""
    return [(l["name"], l["repr"]) for l in json.loads(session.locals(index, lwp=lwp, tp=tp))]


class StopState:
    """The session for the current stop and the selected Python frame per thread. Frontends
    call `drop()` when the target resumes or changes, or give a new key."""

    def __init__(self):
        self.drop()

    def get(self, key, make):
        if self.session is None or self.key != key:
            self.session = make()
            self.key = key
            self.selected = {}
            self.with_ids = False
            self.thread_pointers = {}
        return self.session

    def with_thread_ids(self, key, make, thread_ids):
        """The session, opened again with every thread's ids when some thread records no LWP
        (3.10). Separate from get() so that gathering the ids, which may make the debugger
        unwind (and so call back into get()), finds a session already cached."""
        s = self.get(key, lambda: make(None))
        if not self.with_ids and s.needs_thread_ids():
            self.session = make(thread_ids())
            self.with_ids = True
        return self.session

    def drop(self, *_args):
        self.session = None
        self.key = None
        self.selected = {}
        self.with_ids = False
        # LWP -> thread pointer, for a frontend that cannot read registers everywhere (lldb's
        # frame provider): filled where it can, read where it cannot.
        self.thread_pointers = {}


def thread_frames(session, lwp, tp):
    """The thread's frames (dicts of the JSON report: python or unreadable), innermost first."""
    return session.frames(lwp=lwp, tp=tp)


def step_frame(frames, index, direction):
    """The next readable Python frame from `index` towards older (+1) or newer (-1) frames,
    or None at the end of the stack."""
    i = index + direction
    while 0 <= i < len(frames):
        if frames[i]["kind"] == "python":
            return i
        i += direction
    return None


def spliced_rows(actions, frame_count):
    """What a backtrace shows, from the core's splice actions (one per native frame):
    ("native", n) keeps native frame n; ("python", n, i) shows Python frame i in place of native
    frame n; ("tail", i) is Python frame i that no unwound eval-loop frame runs (the native
    unwind stopped before reaching it), to be shown after the native frames."""
    shown = set()
    for n, a in enumerate(actions):
        if a["action"] == "python":
            for i in a["frames"]:
                shown.add(i)
                yield ("python", n, i)
        elif a["action"] == "keep":
            yield ("native", n)
    for i in range(frame_count):
        if i not in shown:
            yield ("tail", i)


# --- the py-* commands --------------------------------------------------------------------------


class Commands:
    """The py-* commands over a Host, identical in every debugger. `state` is the frontend's
    StopState, `session` a function returning the session for the current stop."""

    HELP = {
        "py-bt": """Print the Python stack of the selected thread (most recent call first).
Usage: py-bt [-a|--all] [--json]
  -a, --all   every thread, each with its native id, name and GIL state, and how many
              greenlets are suspended in it
  --json      the JSON report instead of text""",
        "py-bt-full": """Print the Python stack of the selected thread with each frame's local variables.
Usage: py-bt-full [-a|--all] [--json]""",
        "py-bt-async": """Print every asyncio task's async stack, grouped by the thread running its event loop.
Each task: its live frames if running, its coroutines (each at its await), what it awaits,
then each task awaiting it up to the root task, then the loop thread's frames. Threads
without a loop print their plain Python stack. Await cycles are listed at the end.
Usage: py-bt-async [--json]
  --json   the JSON report, with `tasks`, `loops` and `cycles`""",
        "py-tasks": """Print the asyncio task graph: a tree (like `python -m asyncio pstree`: each task, its
coroutine frames, and under them the tasks it awaits) and a table (like `python -m asyncio ps`).
Tasks awaited by several keep every awaiter; await cycles are printed as `cycle: a -> b -> a`.
Usage: py-tasks [--tree | --table] [--json]""",
        "py-greenlets": """Print every greenlet (greenlet, gevent, eventlet) under the thread it belongs to: the
running one, and each suspended one with the Python stack it resumes in; then those of
threads that have ended.
Usage: py-greenlets [--json] [--locals]
  --json     the JSON report, with `greenlets`
  --locals   each frame's local variables""",
        "py-heap": """Print what the memory is: the objects by type (count, sys.getsizeof bytes, share of
the bytes) and the largest objects, from the GC lists, the threads' locals and the containers'
referents; then what the walk could not reach.
Usage: py-heap [--top N] [--json]
  --top N   how many types and largest objects (default 20)
  --json    the JSON report, with `heap`""",
        "py-why": """Say why the process is stuck or crashed: the crash (signal, code, address, thread), the
deadlocks (threads waiting on each other's locks, asyncio await cycles), each blocked thread's
wait and who holds what it waits for, then every thread with its state and stack.
Usage: py-why [--json]
  --json   the JSON report, with each thread's `state`, `waiting` and `holding`, and `deadlocks`""",
        "py-up": """Select and print the Python frame that called this one (if any).
Usage: py-up""",
        "py-down": """Select and print the Python frame called by this one (if any).
Usage: py-down""",
        "py-list": """List the Python source code of the selected Python frame.
Usage: py-list            lines around the current line
       py-list START      10 lines from START
       py-list START,END  lines START to END""",
        "py-locals": """Print the local variables of the selected Python frame.
Usage: py-locals""",
        "py-print": """Print the value of a Python name in the selected Python frame: a local, else a global,
else a builtin.
Usage: py-print NAME""",
    }

    def __init__(self, core, state, session):
        self.core = core
        self.state = state
        self.session = session

    def run(self, name, host, arg):
        fn = getattr(self, name.replace("-", "_"))
        return fn(host, arg or "")

    def _frames(self, host):
        lwp, tp = host.thread()
        return thread_frames(self.session(host), lwp, tp)

    def selected_index(self, host, frames):
        """The selected Python frame: what the debugger says (gdb: an eval-loop frame it has
        selected), else what py-up/py-down chose, else the innermost readable one."""
        lwp, _ = host.thread()
        idx = host.selected_python_frame(self.session(host), frames)
        if idx is None:
            idx = self.state.selected.get(lwp)
        if idx is None or idx >= len(frames) or frames[idx]["kind"] != "python":
            idx = step_frame(frames, -1, +1)
        if idx is None:
            raise FrontendError("Unable to locate python frame")
        return idx

    def _named(self, host):
        """The session, given the debugger's thread names once per stop: for what shows a
        thread's header or its `native_name`."""
        s = self.session(host)
        if s.wants_thread_names():
            s.set_thread_names(host.thread_names() or [])
        return s

    def py_bt(self, host, arg, full=False):
        a = parse_bt_args("py-bt-full" if full else "py-bt", arg)
        s = self._named(host) if a.all_threads or a.json else self.session(host)
        lwp, tp = (None, None) if a.all_threads else host.thread()
        if a.json:
            host.write(s.report(lwp=lwp, tp=tp, all_threads=a.all_threads, locals=full) + "\n")
        elif a.all_threads:
            host.write(s.render_bt(all_threads=True, full=full))
        else:
            natives = host.native_frames(s) if full else host.unnumbered_native_frames(s)
            host.write(s.render_bt(lwp=lwp, tp=tp, full=full, **(natives or {})))

    def py_bt_full(self, host, arg):
        self.py_bt(host, arg, full=True)

    def py_bt_async(self, host, arg):
        a = parse_json_arg("py-bt-async", arg)
        s = self._named(host)
        host.write(s.async_report() + "\n" if a.json else s.render_async())

    def py_tasks(self, host, arg):
        a = parse_tasks_args("py-tasks", arg)
        s = self._named(host)
        if a.json:
            host.write(s.async_report() + "\n")
        else:
            host.write(s.render_tasks(tree=a.show_tree, table=a.show_table))

    def py_greenlets(self, host, arg):
        a = parse_greenlets_args("py-greenlets", arg)
        text = self._named(host).greenlets(as_json=a.json, locals=a.locals)
        host.write(text + "\n" if a.json else text)

    def py_heap(self, host, arg):
        a = parse_heap_args("py-heap", arg)
        text = self._named(host).heap(as_json=a.json, top=a.top)
        host.write(text + "\n" if a.json else text)

    def py_why(self, host, arg):
        a = parse_json_arg("py-why", arg)
        s = self._named(host)
        calls = host.thread_syscalls(s.syscall_registers()) if s.wants_registers() else None
        text = s.why(as_json=a.json, syscalls=calls)
        host.write(text + "\n" if a.json else text)

    def _entries(self, host):
        """The selected thread's stack as libpython's py-up walks it: Python frames and the
        native frames it shows between them (see `Session.stack_entries`)."""
        lwp, tp = host.thread()
        s = self.session(host)
        return json.loads(s.stack_entries(lwp=lwp, tp=tp, **(host.native_frames(s) or {})))

    def _current_entry(self, host, entries):
        """The entry py-up/py-down move from: the one they last chose while the debugger's
        selected frame is still where they left it, else the first entry at or above the
        debugger's selected frame (libpython: the first Python-related frame from there on),
        else the innermost Python frame."""
        lwp, _ = host.thread()
        level = host.selected_level()
        moved = self.state.selected.get(("entry", lwp))
        if moved is not None and moved[1] == level and moved[0] < len(entries):
            return moved[0]
        if level is not None:
            for n, e in enumerate(entries):
                if e.get("level") is not None and e["level"] >= level:
                    return n
        for n, e in enumerate(entries):
            if e["kind"] == "python":
                return n
        return None

    def _move(self, host, arg, name, direction):
        if arg.strip():
            raise UsageError("usage: %s" % name)
        entries = self._entries(host)
        cur = self._current_entry(host, entries)
        if cur is None:
            raise FrontendError("Unable to locate python frame")
        nxt = cur + direction
        if not 0 <= nxt < len(entries):
            # libpython prints this and the command succeeds.
            host.write("Unable to find an older python frame\n" if direction > 0
                       else "Unable to find a newer python frame\n")
            return
        e = entries[nxt]
        lwp, tp = host.thread()
        number = e.get("level")
        if e["kind"] == "python" and host.python_frames_selectable():
            host.python_frame_selected(self.session(host), e["index"])
            number = host.selected_frame_number()
        elif e.get("level") is not None:
            host.select_level(e["level"])
        elif e["kind"] == "python":
            host.python_frame_selected(self.session(host), e["index"])
        self.state.selected[("entry", lwp)] = (nxt, host.selected_level())
        older = [x["index"] for x in entries[nxt:] if x["kind"] == "python"]
        if older:
            self.state.selected[lwp] = older[0]
        if e["kind"] == "python":
            host.write(self.session(host).render_frame(e["index"], lwp=lwp, tp=tp, level=number))
        else:
            # A frame the debugger does not show (its unwind stopped early) has no level.
            host.write("#%s %s\n" % (e.get("level", "?"), e["text"]))

    def py_up(self, host, arg):
        self._move(host, arg, "py-up", +1)

    def py_down(self, host, arg):
        self._move(host, arg, "py-down", -1)

    def py_list(self, host, arg):
        frames = self._frames(host)
        f = frames[self.selected_index(host, frames)]
        line = f.get("line") or 1
        start, end = parse_list_args(arg, line)
        host.write(self.core.render_list(f["file"], line, start, end))

    def py_locals(self, host, arg):
        lwp, tp = host.thread()
        s = self.session(host)
        report = json.loads(s.report(lwp=lwp, tp=tp))
        frames = report["threads"][0]["frames"]
        idx = self.selected_index(host, frames)
        if tuple(int(x) for x in report["python"]["version"].split(".")[:2]) < (3, 11):
            host.write(s.render_locals(idx, lwp=lwp, tp=tp))
            return
        # libpython 3.11+: the selected frame and the older ones its eval-loop call runs, each
        # under "Locals for NAME".
        while idx is not None and idx < len(frames) and frames[idx]["kind"] == "python":
            host.write("Locals for %s\n" % frames[idx]["function"].rpartition(".")[2])
            host.write(s.render_locals(idx, lwp=lwp, tp=tp))
            if frames[idx].get("entry"):
                break
            idx += 1

    def py_print(self, host, arg):
        name = parse_name_arg("py-print", arg)
        frames = self._frames(host)
        idx = self.selected_index(host, frames)
        lwp, tp = host.thread()
        found = self.session(host).lookup(idx, name, lwp=lwp, tp=tp)
        if found is None:
            host.write("%r not found\n" % name)
        else:
            host.write("%s %r = %s\n" % (found[0], name, found[1]))

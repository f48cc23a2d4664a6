"""Ground truth recording shared by every scenario program.

A scenario is run as ``python SCENARIO.py TRUTH_JSON READY_FIFO``. It builds its state and then,
on ONE line, records the truth and blocks in a C call::

    _truth.ready(); _truth.HELD.acquire()

``ready()`` walks the caller's stack (its own frame is left out), samples every other thread
until their stacks are stable, writes the truth JSON and then writes ``ready`` into the FIFO.
Because both calls sit on the same line, the caller's ``f_lineno`` at the moment of recording
is the line a debugger sees while the thread waits in ``HELD.acquire()``. ``HELD`` is a lock
acquired at import and never released, so the call never returns, and it is a C method, so no
extra Python frame sits on top.

Worker threads use the same trick: ``started.set(); _truth.HELD.acquire()``.

Everything here comes from the interpreter itself; nothing about frames is hand-typed.
Runs on CPython 3.10 to 3.15, free-threaded 3.13 included.
"""

import json
import os
import platform
import sys
import sysconfig
import threading
import time

HELD = threading.Lock()
HELD.acquire()

# A --disable-gil build: Py_GIL_DISABLED is 1 there, 0 on other 3.13+ builds, unset (None)
# before 3.13.
FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))

# How long ready() waits for other threads to stop moving, and how far apart two samples of
# their stacks are taken.
MAX_SETTLE_SECONDS = 10.0
SAMPLE_GAP_SECONDS = 0.1


def type_name(cls):
    """``cls``'s ``tp_name``, the name a reader of the process's memory finds: ``_asyncio.Task``
    for the C Task (its ``__name__`` drops the module), ``Task`` for the pure-Python one,
    ``Thing`` for a class statement's (no ``__module__``, no ``__qualname__``). No attribute
    holds it, so it is read where the interpreter keeps it: ``tp_name`` is the first field
    after the ``PyVarObject`` header (Include/cpython/object.h, 3.10 to 3.15), and that header
    is ``object``'s instance size (16 bytes, 32 on a free-threaded build) plus ``ob_size``."""
    import ctypes  # only where a scenario needs it: it maps libffi into the process

    at = id(cls) + object.__basicsize__ + ctypes.sizeof(ctypes.c_ssize_t)
    return ctypes.c_char_p.from_address(at).value.decode("utf-8")


def code_name(code):
    """The name a debugger should show: co_qualname where the version has it (3.11+)."""
    return getattr(code, "co_qualname", code.co_name)


def frames_from(frame):
    """Frames from ``frame`` outwards (innermost first, like gdb's ``bt``)."""
    frames = []
    while frame is not None:
        code = frame.f_code
        frames.append(
            {"function": code_name(code), "file": code.co_filename, "line": frame.f_lineno}
        )
        frame = frame.f_back
    return frames


def _other_thread_stacks():
    """{ident: frames} for every thread but the calling one, as sys._current_frames() sees it."""
    me = threading.get_ident()
    return {
        ident: frames_from(frame)
        for ident, frame in sys._current_frames().items()
        if ident != me
    }


def settled_thread_stacks():
    """Stacks of all other threads, once two samples SAMPLE_GAP_SECONDS apart agree.

    Exits the process with a message if they have not settled within MAX_SETTLE_SECONDS.
    """
    deadline = time.monotonic() + MAX_SETTLE_SECONDS
    previous = _other_thread_stacks()
    while True:
        time.sleep(SAMPLE_GAP_SECONDS)
        current = _other_thread_stacks()
        if current == previous:
            return current
        if time.monotonic() > deadline:
            fail(
                "other threads did not settle within %.1f s; last two samples differ:\n%r\n%r"
                % (MAX_SETTLE_SECONDS, previous, current)
            )
        previous = current


def _thread_by_ident():
    return {t.ident: t for t in threading.enumerate()}


def _thread_entry(thread, frames):
    return {
        "native_id": thread.native_id,
        "thread_id": thread.ident,
        "name": thread.name,
        "frames": frames,
    }


def collect(caller, with_locals=False):
    """The truth dict: the calling thread (from ``caller``) first, then the others by name.

    ``with_locals``: the innermost frame of the calling thread gets
    ``"locals": {name: repr(value)}`` for every entry of ``caller.f_locals`` (in its order:
    the frame's own, arguments first), ``"local_objects": {name: {"type": tp_name, "id":
    id(value)}}`` (what a reader of memory can say of an object whose repr it cannot make) and
    ``"args"``: the names of the frame's arguments.

    ``free_threaded``: a --disable-gil build. ``gil_holder``: the ``thread_id`` of the thread
    holding the GIL at the stop, None for nobody: at a scenario's stop every thread blocks in
    a C call that released it (``HELD.acquire()``, ``time.sleep``, a read, the event loop's
    ``select``). A running scenario has no such stop: write_truth leaves the key out.
    """
    threads_by_ident = _thread_by_ident()
    me = threading.current_thread()
    mine = frames_from(caller)
    if with_locals:
        values = caller.f_locals
        mine[0]["locals"] = {name: repr(value) for name, value in values.items()}
        mine[0]["local_objects"] = {name: {"type": type_name(type(value)), "id": id(value)}
                                    for name, value in values.items()}
        mine[0]["args"] = list(caller.f_code.co_varnames[:_arg_count(caller.f_code)])
    entries = [_thread_entry(me, mine)]
    others = []
    for ident, frames in settled_thread_stacks().items():
        thread = threads_by_ident.get(ident)
        if thread is None:
            fail("thread %d has a frame but is not known to threading" % ident)
        others.append(_thread_entry(thread, frames))
    others.sort(key=lambda entry: entry["name"])
    return header(gil_holder=None, threads=entries + others)


def running_beside(name, target, **more):
    """A running scenario's main thread: starts thread ``name`` (``target(started)``), writes
    the truth (this thread's frames, the other's none: it runs) with ``more``, and blocks in
    ``HELD.acquire()``, on the line its frames were taken at."""
    start_threads({name: target})
    other = next(t for t in threading.enumerate() if t.name == name)
    threads = [_thread_entry(threading.current_thread(), frames_from(sys._getframe(0))),
               _thread_entry(other, [])]
    write_truth(header(running=True, threads=threads, **more)); HELD.acquire()  # noqa: E702


def header(**more):
    """What every truth starts with (the scenario, the interpreter, the process), and `more`."""
    return dict({
        "scenario": os.path.splitext(os.path.basename(sys.argv[0]))[0],
        "python": platform.python_version(),
        "pid": os.getpid(),
        "executable": sys.executable,
        "free_threaded": FREE_THREADED,
    }, **more)


def _arg_count(code):
    """How many of ``co_varnames`` are arguments: positional (and positional-only), keyword-only,
    then ``*args`` and ``**kwargs`` (Include/cpython/code.h: CO_VARARGS 0x4, CO_VARKEYWORDS
    0x8)."""
    return (code.co_argcount + code.co_kwonlyargcount
            + bool(code.co_flags & 0x4) + bool(code.co_flags & 0x8))


def write_truth(truth, signal=True):
    """Write the truth file, then (unless ``signal`` is false) signal the harness through the
    FIFO."""
    if truth.get("running"):
        # A program that keeps running has no holder at a fixed point.
        truth.pop("gil_holder", None)
    truth_path = sys.argv[1]
    tmp = truth_path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(truth, f, ensure_ascii=False, indent=1)
    os.replace(tmp, truth_path)
    if signal:
        signal_ready()


def signal_ready():
    with open(sys.argv[2], "w", encoding="ascii") as fifo:
        fifo.write("ready\n")


MAX_START_SECONDS = 10.0


def start_threads(targets):
    """Start a daemon thread per ``{name: target}``, each called as ``target(started)``, and
    wait until every one has set its ``started`` event."""
    events = []
    for name, target in targets.items():
        started = threading.Event()
        threading.Thread(target=target, args=(started,), name=name, daemon=True).start()
        events.append((name, started))
    for name, started in events:
        if not started.wait(MAX_START_SECONDS):
            fail("%s did not start within %.0f s" % (name, MAX_START_SECONDS))


def _join_truth(caller):
    """Add the calling thread (from ``caller``, on its blocking line) to the truth file written
    before, then signal ready."""
    with open(sys.argv[1], encoding="utf-8") as f:
        truth = json.load(f)
    truth.setdefault("threads", []).append(_thread_entry(threading.current_thread(), frames_from(caller)))
    write_truth(truth)


def signal_when_blocked(thread_ident, code):
    """Signal ready once thread ``thread_ident``'s innermost Python frame runs ``code``: the
    caller records, returns to its blocking line, and only then may the harness look (a
    signal sent from the recording thread itself races with its way back to that line)."""
    def watch():
        deadline = time.monotonic() + MAX_SETTLE_SECONDS
        while True:
            frame = sys._current_frames().get(thread_ident)
            if frame is not None and frame.f_code is code:
                break
            if time.monotonic() > deadline:
                fail("thread %d never reached its blocking line" % thread_ident)
            time.sleep(0.005)
        # Block rather than exit: a thread exiting while the harness reads the live process
        # would change the thread list under the reader. This thread is then part of the
        # process the harness reads, so it adds itself to the truth first.
        _join_truth(sys._getframe(0)); HELD.acquire()  # noqa: E702

    threading.Thread(target=watch, name="ready-signal", daemon=True).start()


def ready(with_locals=False, **extra):
    """Record the caller's stack and every other thread's, write the truth, signal ready.

    ``with_locals``: add the caller frame's locals (name -> repr) to its frame in the truth.
    ``extra``: more top-level keys for the truth JSON.
    """
    truth = collect(sys._getframe(1), with_locals)
    truth.update(extra)
    write_truth(truth)


def fail(message):
    sys.stderr.write("scenario %s: %s\n" % (sys.argv[0], message))
    sys.stderr.flush()
    os._exit(3)


def source_line_of(marker, path):
    """1-based line number of the only line in ``path`` containing ``marker``."""
    with open(path, encoding="utf-8") as f:
        hits = [n for n, text in enumerate(f, 1) if marker in text]
    if len(hits) != 1:
        fail("marker %r found on lines %r of %s, expected exactly one" % (marker, hits, path))
    return hits[0]

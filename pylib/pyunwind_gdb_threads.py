"""gdb: what gdb says of the selected inferior: its core file, its threads' keys, thread
pointers and system-call registers, and the selected thread's native frames and stack
pointers. No state of pyunwind's own but the inferiors' core files."""

import re

import gdb

import pyunwind_frontend as fe


def core_file():
    text = gdb.execute("info target", to_string=True)
    m = re.search(r"core dump file:\s*\n?\s*`(.+?)'", text)
    path = m.group(1) if m else None
    known_cores[gdb.selected_inferior().num] = path
    return path


# Inferior number -> its core file (None: a process), for what may not run `info target`.
known_cores = {}


def remember_core(_event=None):
    try:
        core_file()
    except gdb.error:
        pass


def thread_key(thread=None):
    thread = thread or gdb.selected_thread()
    if thread is None:
        raise gdb.GdbError("pyunwind: no thread selected (is a program running or a core loaded?)")
    return thread.ptid[1] or thread.ptid[0]


def thread_pointer():
    try:
        return int(gdb.parse_and_eval("$fs_base")) & 0xFFFFFFFFFFFFFFFF
    except gdb.error:
        return None


def each_thread(inf, read):
    """`read(thread)` with each thread of `inf` selected in turn, the non-None results; the
    selected thread and frame are restored afterwards."""
    out = []
    cur = gdb.selected_thread()
    try:
        frame = gdb.selected_frame()
    except gdb.error:
        frame = None
    try:
        for t in inf.threads():
            t.switch()
            v = read(t)
            if v is not None:
                out.append(v)
    finally:
        if cur is not None:
            cur.switch()
        if frame is not None:
            try:
                frame.select()
            except gdb.error:
                pass
    return out


def all_thread_ids(inf):
    """(lwp, thread pointer) of every thread; versions without native thread ids (3.10) need
    these."""
    def read(t):
        tp = thread_pointer()
        return None if tp is None else (thread_key(t), tp)
    return each_thread(inf, read)


def thread_syscalls(inf, names):
    """(lwp, [values of the registers `names`]) of every thread gdb can read them for (see
    Host.thread_syscalls): the system call each is in, for memory read through gdb, which has
    no core notes or /proc to say."""
    def read(t):
        try:
            f = gdb.newest_frame()
            values = fe.register_values(lambda r: int(f.read_register(r)), names)
        except gdb.error:
            return None
        return None if values is None else (thread_key(t), values)
    return each_thread(inf, read)


def native_frames():
    """gdb's frames of the selected thread, innermost first, up to where gdb's own unwinding
    fails (its `bt` stops there too)."""
    frames = []
    f = gdb.newest_frame()
    try:
        while f is not None and len(frames) < 100000:
            frames.append(f)
            f = f.older()
    except gdb.error:
        # A register or stack gdb cannot read (a corrupted core): the frames above are still
        # right, and losing them all would lose the Python frames they hold.
        pass
    return frames


def stack_pointers(frames):
    """Each frame's SP (the core places Python runs by them, without symbols), or None."""
    try:
        return [int(f.read_register("sp")) & 0xFFFFFFFFFFFFFFFF for f in frames]
    except (gdb.error, ValueError):
        return None

"""gdb: real frames (`set pyunwind-frames real`). Since 3.11 one eval-loop call runs a run of
Python frames; this unwinder gives each of them its own gdb frame, so that `frame N`, `up`,
`down`, `info frame` and MI reach every Python frame, and the frame filter names them one to one.

How: for an eval-loop frame running N Python frames the unwinder claims N-1 copies of it, each
handing its caller the very same registers, with frame ids told apart by `special`; the last
copy is left to gdb's own unwinder, which finds the real caller from those registers. The
Python frames of each run, and which frame runs which run, come from the core (`runs`,
`eval_ranges`, `frame_end`): the sniffer may neither run gdb commands nor ask for frames (gdb 13
has no PendingFrame.function(), so "is this the eval loop" is the core's address check). Where
the eval loop has no symbol (sid's `.cold`), any frame of the interpreter's own modules
(`interpreter_ranges`) whose stack frame holds a run's entry frame (3.12+) is that run's.

State: per stop and thread, which (SP, PC) became which run and at which levels its copies
sit. Dropped when the target resumes, never on `stop` (gdb unwinds before that event).
"""

import bisect

import gdb
from gdb.unwinder import Unwinder

MASK = 0xFFFFFFFFFFFFFFFF
# Every x86-64 register a copy hands its caller, so that gdb's unwinder, given the last copy,
# unwinds it as the eval-loop frame itself (and `$fs_base` stays readable in every copy).
_REGISTERS = ("rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11", "r12",
              "r13", "r14", "r15", "rip", "eflags", "fs_base", "gs_base")
# An innermost frame this close to the eval loop's start has not linked its Python frame yet
# (a breakpoint on the function, a step into it): it gets no copies and takes no run.
_PROLOGUE = 64


class _FrameId:
    def __init__(self, sp, pc, special):
        self.sp = sp
        self.pc = pc
        self.special = special


class _Thread:
    """One thread's runs and the eval-loop frames the unwinder met in this stop."""

    def __init__(self, runs, stamp):
        self.runs = runs
        # (where the thread's current Python frame is, the innermost frame's (SP, PC)) when
        # this was built: the unwinder starts again at frame 0 after every step of the
        # target, not only after what gdb reports as a resume.
        self.stamp = stamp
        # 3.12+: each run's entry shim lives in its eval-loop frame, so the run of a frame is
        # the one with the lowest shim at or above its SP. 3.11: runs go to eval frames in
        # the order gdb unwinds them (innermost first).
        self.shims = sorted((r[1], k) for k, r in enumerate(runs)) if runs and all(r[1] for r in runs) else None
        self.next_run = 0
        self.run_of = {}   # (sp, pc) -> run index or None
        # (sp, pc) -> the levels gdb gave its copies, ascending: with debug info gdb puts the
        # eval loop's inlined callees (3.14: PyObject_Vectorcall at the call's return address)
        # as inline frames before each copy, so copies are not at consecutive levels.
        self.levels = {}
        self.copies = {}   # level -> ((sp, pc), copy index) for the copies the unwinder claimed
        self.saved = {}    # (sp, pc) -> the registers its copies hand on

    def place(self, key, at_entry, frame_end, by_symbol=True):
        """The run of the eval-loop frame at `key` (None: it runs none), placed once.
        `at_entry`: the frame has not linked its Python frame yet; `frame_end()`: where its
        stack frame ends (its caller's SP), or None; `by_symbol`: the frame is known to be the
        eval loop's, else any frame of the interpreter that may be."""
        if key not in self.run_of:
            self.run_of[key] = None if at_entry else self._find(key[0], frame_end, by_symbol)
        return self.run_of[key]

    def _find(self, sp, frame_end, by_symbol=True):
        if self.shims is None:
            if self.next_run >= len(self.runs):
                return None
            self.next_run += 1
            return self.next_run - 1
        i = bisect.bisect_left(self.shims, (sp, -1))
        if i == len(self.shims):
            return None
        # A frame whose own run is gone (its entry frame just returned) must not take the
        # next one out, which lies in an older eval-loop frame.
        end = frame_end()
        if end is None:
            # Without the frame's end only the eval loop's own symbol vouches for it: any
            # other frame below an eval-loop frame would take that frame's run.
            return self.shims[i][1] if by_symbol else None
        return self.shims[i][1] if self.shims[i][0] < end else None

    def count(self, key):
        run = self.run_of.get(key)
        return len(self.runs[run][0]) if run is not None else 1


class State:
    """The mode, the eval loop's address ranges of the current target and the per-stop
    copies. `quiet_session()` opens the stop's session without gdb commands (or None);
    `report(e)` says why an error leaves gdb's frames."""

    def __init__(self, quiet_session, thread_key, drop_session, report):
        self.real = False
        self._quiet_session = quiet_session
        self._thread_key = thread_key
        self._drop_session = drop_session
        self.report = report
        self.forget_target()

    def forget_target(self, *_args):
        self.ranges_of = None
        self.starts = []
        self.ranges = []
        self.own_starts = []
        self.own = []
        self.drop()

    def drop(self, *_args):
        self.threads = {}
        # The sniffer could not open the session (a core whose path is not known yet): the
        # frames gdb built meanwhile have no copies, so they are rebuilt once it is.
        self.missed = False

    def eval_range(self, session, pc):
        """(the eval loop's range holding `pc`, True) when its symbol says so; else (the range
        of the interpreter's own module holding `pc`, False): an eval-loop frame there is
        known by the entry frame in its stack frame alone; else None."""
        # Neither moves while the target lives (dropped on new objfiles).
        inf = gdb.selected_inferior()
        if self.ranges_of != (inf.num, inf.pid):
            self.ranges = session.eval_ranges()
            self.starts = [r[0] for r in self.ranges]
            self.own = session.interpreter_ranges()
            self.own_starts = [r[0] for r in self.own]
            self.ranges_of = (inf.num, inf.pid)
        for starts, ranges, by_symbol in ((self.starts, self.ranges, True), (self.own_starts, self.own, False)):
            i = bisect.bisect_right(starts, pc) - 1
            if i >= 0 and pc < ranges[i][1]:
                return ranges[i], by_symbol
        return None

    def thread(self, session, lwp, tp, top=None):
        """(the thread's runs and copies, the session). `top`: the innermost frame's
        (SP, PC) when gdb unwinds it: the thread's state is rebuilt when that or its current
        Python frame changed, and the session reopened when its memory is stale."""
        t = self.threads.get(lwp)
        if t is not None and top is None:
            return t, session
        now = _current_frame(session, lwp, tp)
        if t is not None and (now, top) == t.stamp:
            return t, session
        if t is not None and now != t.stamp[0]:
            self._drop_session()
            session = self._quiet_session()
            if session is None:
                raise gdb.error("pyunwind: no session")
        try:
            runs = session.runs(lwp=lwp, tp=tp)
        except Exception as e:
            # No runs, no copies: the thread's frames stay gdb's, and the line says why.
            self.report(e)
            runs = []
        t = self.threads[lwp] = _Thread(runs, (now, top))
        return t, session

    def copy_at(self, frame):
        """(key, copy index) when the unwinder claimed `frame` as a copy, else None."""
        t = self.threads.get(self._thread_key())
        if t is None:
            return None
        return t.copies.get(frame.level())


class RealFramesUnwinder(Unwinder):
    def __init__(self, state):
        super().__init__("pyunwind-frames")
        self._state = state
        self.enabled = False

    def __call__(self, pending_frame):
        try:
            return self._claim(pending_frame)
        except gdb.error:
            # gdb's own doubts (a register, memory, no session yet): the frame is gdb's, as
            # without this mode.
            return None
        except Exception as e:
            self._state.report(e)
            return None

    def _claim(self, pf):
        st = self._state
        session = st._quiet_session()
        if session is None:
            st.missed = True
            return None
        pc = int(pf.read_register("rip")) & MASK
        found = st.eval_range(session, pc)
        if found is None:
            return None
        r, by_symbol = found
        sp = int(pf.read_register("rsp")) & MASK
        level = pf.level()
        thread = gdb.selected_thread()
        lwp = thread.ptid[1] or thread.ptid[0]
        tp = int(pf.read_register("fs_base")) & MASK
        t, session = st.thread(session, lwp, tp, (sp, pc) if level == 0 else None)
        if not by_symbol and t.shims is None:
            # Without a symbol only an entry frame on the C stack tells the eval loop (3.12+).
            return None
        key = (sp, pc)
        bp = int(pf.read_register("rbp")) & MASK
        t.place(key, by_symbol and level == 0 and pc - r[0] < _PROLOGUE,
                lambda: session.frame_end(pc, sp, bp, level == 0), by_symbol)
        levels = t.levels.setdefault(key, [])
        if level not in levels:
            bisect.insort(levels, level)
        i = levels.index(level)
        if i >= t.count(key) - 1:
            return None
        saved = t.saved.get(key)
        if saved is None:
            # Every copy hands on the same registers: read them once.
            saved = t.saved[key] = _registers(pf)
        # The id's stack address is SP + 1: with SP itself, a callee's own id (its CFA is
        # this SP, same code, no special) would match a copy's, and `next` would step into
        # calls. `special` tells the copies apart and stays put while the eval loop steps.
        sp_type, pc_type = saved["rsp"].type, saved["rip"].type
        fid = _FrameId(gdb.Value(sp + 1).cast(sp_type), gdb.Value(r[0]).cast(pc_type),
                       gdb.Value(i + 1).cast(sp_type))
        info = pf.create_unwind_info(fid)
        for name, v in saved.items():
            info.add_saved_register(name, v)
        t.copies[level] = (key, i)
        return info


def _registers(pf):
    """{name: value} of the pending frame's registers that are known."""
    out = {}
    for name in _REGISTERS:
        try:
            v = pf.read_register(name)
        except (gdb.error, ValueError):
            continue
        if not v.is_optimized_out:
            out[name] = v
    return out


def _current_frame(session, lwp, tp):
    """The thread's current Python frame pointer as the target holds it now (its memory,
    not the session's copy), or None."""
    try:
        slot, inner = session.current_frame_slot(lwp=lwp, tp=tp)
        mem = gdb.selected_inferior()
        value = int.from_bytes(bytes(mem.read_memory(slot, 8)), "little")
        if inner is not None:
            value = (value, int.from_bytes(bytes(mem.read_memory(value + inner, 8)), "little"))
        return value
    except Exception:
        return None


def rows(frames, actions, phys, copies):
    """Backtrace rows with copies: like pyunwind_frontend.spliced_rows, but indices are into
    `frames` (all of gdb's frames), `actions` are those of the frames `phys` (indices of the
    frames that are not copies), and copy i of an eval-loop frame shows the i-th Python frame
    of its run. `copies[n]` is (key, i) for a copy, else None: key is the eval-loop frame's
    (SP, PC)."""
    keys = [c[0] if c else None for c in copies]
    # gdb's inline frames of the eval loop's call site (with debug info) come again before
    # each further copy: shown once, before the first.
    copied = set()
    run_of_key = {}
    action_of = {}
    for p, a in zip(phys, actions):
        action_of[p] = a
        if a["action"] == "python":
            run_of_key.setdefault(_key(frames[p]), a["frames"])
    used = {}
    out = []
    for n in range(len(frames)):
        if copies[n] is not None:
            copied.add(keys[n])
            run = run_of_key.get(keys[n], [])
            i = copies[n][1]
            if i < len(run):
                used[keys[n]] = used.get(keys[n], 0) + 1
                out.append(("python", n, run[i]))
            else:
                out.append(("native", n))
            continue
        a = action_of.get(n)
        if a is None:
            continue
        if copied and a["action"] != "python" and _inline(frames[n]) and _key(frames[n]) in copied:
            continue
        if a["action"] == "python":
            for i in a["frames"][used.get(_key(frames[n]), 0):]:
                out.append(("python", n, i))
        elif a["action"] == "keep":
            out.append(("native", n))
    return out


def _inline(frame):
    try:
        return frame.type() == gdb.INLINE_FRAME
    except gdb.error:
        return False


def same_frame(a, b):
    """Whether two of gdb's frames stand on the same registers (a copy, its inline frames)."""
    k = _key(a)
    return k is not None and k == _key(b)


def _key(frame):
    try:
        return (int(frame.read_register("rsp")) & MASK, frame.pc() & MASK)
    except (gdb.error, ValueError):
        return None


def register(quiet_session, thread_key, drop_session, report):
    """`report(e)`: prints the one line saying an error left gdb's own frames (once per
    stop)."""
    state = State(quiet_session, thread_key, drop_session, report)
    unwinder = RealFramesUnwinder(state)
    gdb.unwinder.register_unwinder(None, unwinder, replace=True)
    gdb.events.cont.connect(state.drop)
    gdb.events.inferior_call.connect(state.drop)
    gdb.events.exited.connect(state.forget_target)
    gdb.events.new_objfile.connect(state.forget_target)
    if hasattr(gdb.events, "clear_objfiles"):
        gdb.events.clear_objfiles.connect(state.forget_target)
    return state, unwinder

"""gdb: the unwinder for frames in CPython's JIT code and perf trampolines, and their names in
`bt`. Thin: the map of JIT regions and the unwinding itself are in the Rust core
(`_pyunwind.Jit`); here only the per-stop cache and the translation to gdb's API.

The unwinder claims a frame only when its PC is inside a JIT executor or a trampoline arena of
the current stop, and only when the core can unwind it; every other frame is left to gdb
(`bt -no-filters` is the same with and without it on a stack with no JIT code).

gdb 13 limits (research/jit.md 4.1): no PendingFrame.pc(), so the PC is read as the `rip`
register (arm64: `pc`); frame ids need gdb.Value attributes; nothing in the sniffer may ask gdb
for frames.
"""

import bisect

import gdb
from gdb.FrameDecorator import FrameDecorator
from gdb.unwinder import Unwinder

import pyunwind_frontend as fe


class _Stop:
    """The JIT map of the current stop: region rows sorted by start, built on first use and
    dropped when the target resumes. ELF symbol results survive stops of the same target.
    `report(e)` says why an error leaves gdb's native frames as they are (once per stop)."""

    def __init__(self, core, host, report):
        self._core = core
        self._host = host
        self.report = report
        self._inputs = {}
        self.drop()

    def drop(self, *_args):
        self.key = None
        self.jit = None
        self.rows = []
        self.starts = []
        self.error = None

    def get(self):
        inf = gdb.selected_inferior()
        key = (inf.num, inf.pid)
        if key == self.key:
            return self
        self.drop()
        self.key = key
        if inf.pid == 0 and not self._host.core_file():
            return self
        try:
            target_key = (key, self._host.core_file(), self._host.executable())
            inputs = self._inputs.get(target_key)
            if inputs is False:
                return self  # not a Python process: known from an earlier stop
            try:
                self.jit = fe.open_jit(self._core(), self._host, inputs)
            except self._core().NoPythonError as e:
                self._inputs[target_key] = False
                self.error = str(e)
                return self
            self._inputs[target_key] = self.jit.inputs()
            self.rows = self.jit.regions()
            self.starts = [r[0] for r in self.rows]
        except Exception as e:  # never break gdb's unwinding: no map, gdb does its own thing
            self.error = "%s: %s" % (type(e).__name__, e)
            self.jit, self.rows, self.starts = None, [], []
            self.report(e)
        return self

    def forget_target(self, *_args):
        self._inputs.clear()
        self.drop()

    def region(self, pc):
        i = bisect.bisect_right(self.starts, pc) - 1
        if i >= 0 and pc < self.rows[i][1]:
            return self.rows[i]
        return None


class _FrameId:
    def __init__(self, sp, pc):
        self.sp = sp
        self.pc = pc


# By gdb architecture: the registers an unwind starts from (pc, stack pointer, and the frame
# pointer the core takes as `bp`: %rbp, arm64's x29), and a general register whose type the
# other restored registers take. The core names the caller's registers as gdb does (x86-64:
# rip, rsp, rbp, rbx...; arm64: pc, sp, x29, x19..x28).
_REGISTERS = {"x86_64": ("rip", "rsp", "rbp", "rbx"), "aarch64": ("pc", "sp", "x29", "x19")}
# Registers no frame changes, handed to the caller as they are: gdb takes a register the
# unwinder does not give as not saved, and on arm64 with pointer authentication (a core with
# NT_ARM_PAC_MASK) it reads the caller's pauth_cmask to strip the next return address ("Register
# 69 was not saved" otherwise, and `bt` ends there). Absent without the feature: skipped.
_UNCHANGED = {"x86_64": (), "aarch64": ("pauth_dmask", "pauth_cmask")}


class JitUnwinder(Unwinder):
    """Unwinds frames whose PC is in JIT code (3.14: through the entry shim found on the stack;
    3.15: through the frame pointer JIT code keeps) or in a perf trampoline."""

    def __init__(self, stop):
        super().__init__("pyunwind-jit")
        self._stop = stop
        # {architecture: (register names, {name: gdb type})}
        self._types = {}

    def _value(self, v, t):
        return gdb.Value(v).cast(t)

    def __call__(self, pending_frame):
        st = self._stop
        try:
            st = st.get()
            if not st.starts:
                return None
            # arm64 too (gdb-multiarch on an arm64 core): the registers by the frame's
            # architecture, not x86-64's names, which gdb refuses there ("Bad register").
            arch = fe.arch_of(pending_frame.architecture().name())
            (pc_r, sp_r, bp_r, other), types = self._types.get(arch) or (_REGISTERS[arch], None)
            pc = int(pending_frame.read_register(pc_r))
            if st.region(pc) is None:
                return None
            sp = int(pending_frame.read_register(sp_r))
            bp = int(pending_frame.read_register(bp_r))
            u = st.jit.unwind(pc, sp, bp)
            if u is None:
                return None
            if types is None:
                types = {r: pending_frame.read_register(r).type for r in (pc_r, sp_r, bp_r)}
                types["other"] = pending_frame.read_register(other).type
                self._types[arch] = (_REGISTERS[arch], types)
            t = types
            fid = _FrameId(self._value(u["frame_sp"], t[sp_r]), self._value(u["frame_pc"], t[pc_r]))
            info = pending_frame.create_unwind_info(fid)
            for name, v in u["caller"].items():
                info.add_saved_register(name, self._value(v, t.get(name, t["other"])))
            for name in _UNCHANGED[arch]:
                try:
                    v = pending_frame.read_register(name)
                except (ValueError, gdb.error):
                    continue  # no such register: gdb has no pointer authentication here
                info.add_saved_register(name, v)
            return info
        except Exception as e:
            # gdb unwinds the frame its own way (and stops at JIT code it cannot unwind).
            st.report(e)
            return None


class JitFrameDecorator(FrameDecorator):
    """A JIT or trampoline frame, named after the Python code it runs."""

    def __init__(self, base, name):
        super().__init__(base)
        self._name = name

    def function(self):
        return self._name


def region_name(stop, frame):
    """`[jit] qualname (file:line)` / `[jit] side exit` for a JIT frame, "[trampoline]" for a
    trampoline frame, None for any other frame."""
    st = stop.get()
    if not st.starts:
        return None
    try:
        r = st.region(frame.pc())
    except gdb.error:
        return None
    return r[3] if r else None


def name_frames(stop, decorators, actions=None, frames=None):
    """Decorators with JIT and trampoline frames renamed. With the splice `actions` and
    `frames()`, which gives the thread's Python frames (read only when a trampoline is there),
    a trampoline gets the name of the function it started."""
    kinds = {}
    for n, d in enumerate(decorators):
        name = region_name(stop, d.inferior_frame())
        if name:
            kinds[n] = name
    if not kinds:
        return decorators
    tramp = {}
    if actions is not None and frames is not None:
        is_t = lambda n: kinds.get(n, "").startswith("[trampoline]")  # noqa: E731
        for n, f in fe.trampoline_names(actions, frames(), is_t).items():
            label = fe.trampoline_label(f)
            if label is not None:
                tramp[n] = label
    out = list(decorators)
    for n, name in kinds.items():
        out[n] = JitFrameDecorator(decorators[n], tramp.get(n, name))
    return out


_stop = None


def register(core, host, report):
    """Register the unwinder (once) and return the per-stop state the frame filter shares.
    `report(e)`: prints the one line saying an error left gdb's own frames."""
    global _stop
    if _stop is not None:
        return _stop
    _stop = _Stop(core, host, report)
    gdb.unwinder.register_unwinder(None, JitUnwinder(_stop), replace=True)
    gdb.events.cont.connect(_stop.drop)
    gdb.events.exited.connect(_stop.forget_target)
    gdb.events.new_objfile.connect(_stop.forget_target)
    return _stop

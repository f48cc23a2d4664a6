"""gdb: how frames and locals are handed to gdb. Native frames gdb has no name for (`??`, or
the builtin a stripped build runs), Python locals as the symbols and values gdb's decorators
give, and the values gdb's DAP server prints as they are."""

import gdb
from gdb.FrameDecorator import FrameDecorator

import pyunwind_gdb_jit as jit


class Name(str):
    """A local's name where gdb wants a symbol: `bt full` and MI print it as a string, gdb's DAP
    server reads its `print_name` (gdb/dap/scopes.py)."""

    @property
    def print_name(self):
        return str(self)

    name = linkage_name = print_name


class Local:
    def __init__(self, name, value):
        self._name = Name(name)
        self._value = value

    def symbol(self):
        return self._name

    def value(self):
        return self._value


# Values handed to gdb's DAP server for Python locals, by id: its `variables` shows each
# through gdb.default_visualizer(value), given this very object, and pyunwind_gdb's _printer_lookup answers
# with the repr as it is (a gdb string value would be shown quoted). Dropped at each resume.
dap_reprs = {}


def dap_repr(text):
    value = gdb.Value(text)
    dap_reprs[id(value)] = (value, text)
    return value


class ReprPrinter:
    def __init__(self, text):
        self._text = text

    def to_string(self):
        return self._text


def drop_dap_reprs(_event=None):
    dap_reprs.clear()


DAPFrameDecorator = getattr(gdb.FrameDecorator, "DAPFrameDecorator", None)


def for_dap(decorator):
    """Whether gdb's DAP server asked for this frame: it wraps gdb's frames in its own
    decorator class before the filters run (and so all frames of one listing)."""
    d = decorator
    for _ in range(16):
        if DAPFrameDecorator is None or d is None:
            return False
        if isinstance(d, DAPFrameDecorator):
            return True
        d = getattr(d, "_base", None)
    return False


class UnnamedFrameDecorator(FrameDecorator):
    """A native frame gdb has no symbol for: `??` as gdb itself shows it."""

    def function(self):
        return "??"


class BuiltinFrameDecorator(FrameDecorator):
    """A native frame of a stripped build running the builtin the Python frame above calls:
    named from its PyMethodDef as the core found it (`sorted (builtin)`)."""

    def __init__(self, base, builtin):
        super().__init__(base)
        self._builtin = builtin

    def function(self):
        return "%s (builtin)" % self._builtin


def shown(d, builtin=None):
    """A native frame as `bt` shows it: `??` when neither gdb, the JIT map nor the core (the
    builtin it runs) names it."""
    named = d.inferior_frame().name() or isinstance(d, jit.JitFrameDecorator)
    if named:
        return d
    return BuiltinFrameDecorator(d, builtin) if builtin else UnnamedFrameDecorator(d)

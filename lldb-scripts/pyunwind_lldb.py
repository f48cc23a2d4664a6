"""pyunwind for lldb: `command script import /path/to/lldb-scripts/pyunwind_lldb.py` (`pyunwind
lldb-script` prints where a pip install put it).

Registers the py-* commands (the same as in gdb, from pylib/pyunwind_frontend.py), a `pyunwind`
command for settings, and on lldb 22+ a scripted frame provider that puts Python frames, and
names for JIT and perf-trampoline frames, into lldb's own `bt`. The code is in pylib/
(pyunwind_lldb_host, _commands, _provider, _hooks), found relative to this file, as is the built
_pyunwind module ($PYUNWIND_LIB overrides its path).
"""

import importlib
import os
import sys

# A pip install keeps pylib's modules beside this script; a checkout in ../pylib.
_here = os.path.dirname(os.path.realpath(__file__))
_pylib = _here if os.path.isfile(os.path.join(_here, "pyunwind_frontend.py")) else os.path.join(
    os.path.dirname(_here), "pylib")
if _pylib not in sys.path:
    sys.path.insert(0, _pylib)

# lldb reloads this module at each `command script import` of it: its modules start afresh with
# it (their settings, sessions, providers), as when they were all this one file.
for _name in ("pyunwind_lldb_host", "pyunwind_lldb_provider", "pyunwind_lldb_hooks", "pyunwind_lldb_commands"):
    if _name in sys.modules:
        importlib.reload(sys.modules[_name])

import pyunwind_lldb_commands  # noqa: E402

# lldb is given our commands, frame provider, stop hook and recognizer by their names in this
# module (`pyunwind_lldb.ProviderStopHook`).
globals().update(pyunwind_lldb_commands.lldb_names())


def __lldb_init_module(debugger, internal_dict):
    pyunwind_lldb_commands.register(debugger, __name__)

# pyunwind for gdb: `source` this file (or `gdb -x`). It finds pylib/ and the built _pyunwind
# module relative to its own path ($PYUNWIND_LIB overrides the module's path).
import os
import sys

_pylib = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "pylib")
if _pylib not in sys.path:
    sys.path.insert(0, _pylib)

import pyunwind_gdb  # noqa: E402

pyunwind_gdb.register()

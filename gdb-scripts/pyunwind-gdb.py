# pyunwind for gdb: `source` this file (or `gdb -x`). It finds pylib/ and the built _pyunwind
# module relative to its own path ($PYUNWIND_LIB overrides the module's path); `pyunwind
# gdb-script` prints where a pip install put it.
import os
import sys

# A pip install keeps pylib's modules beside this script; a checkout in ../pylib.
_here = os.path.dirname(os.path.realpath(__file__))
_pylib = _here if os.path.isfile(os.path.join(_here, "pyunwind_frontend.py")) else os.path.join(
    os.path.dirname(_here), "pylib")
if _pylib not in sys.path:
    sys.path.insert(0, _pylib)

import pyunwind_gdb  # noqa: E402

pyunwind_gdb.register()

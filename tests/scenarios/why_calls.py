"""Native waits name the call being made (issue 49 item 9), not a callable that only sits on
the value stack:

- ``sleeper`` calls ``time.sleep`` inside ``with lock:`` (the lock's bound ``__exit__``, or on
  3.14+ its ``__exit__`` and the lock, sit below the call for the ``with``): a ``sleep`` wait;
- ``pauser`` calls ``signal.pause()`` inside ``with rlock:``: a ``native`` wait in
  ``signal.pause``;
- ``ctyper`` calls libc's ``pause`` through a ``ctypes`` function pointer
  (``ctypes.CDLL("libc.so.6").pause``): a ``native`` wait named ``pause (libc.so.6)``;
- ``cpp_ctyper`` calls ``calls_park``, the C entry of a C++ library
  (tests/scenarios/why_calls_lib.cpp), through ``ctypes``: it waits on a
  ``std::condition_variable`` under ``calls::park_forever(int)``;
- ``cffier`` calls the same library's ``calls_wait`` through cffi's ABI mode
  (``ffi.dlopen``): ``lib.calls_wait`` is a cdata function pointer;
- ``cffi_apier`` calls the same entry through a cffi API-mode module the test built
  (``why_calls_api``): ``lib.calls_wait`` is a builtin bound to the module's ``Lib`` object;
- ``cythoner`` calls ``why_calls_cy.Worker().block()``, a Cython method
  (tests/scenarios/why_calls_cy.pyx) that releases the GIL and waits in libc's ``pause``;
- ``partialer`` calls ``functools.partial(time.sleep, 3600)``: a ``sleep`` wait;
- ``caller`` calls ``operator.methodcaller("pause")`` on the ``signal`` module, whose C type's
  ``tp_call`` calls ``signal.pause``.

PYUNWIND_CALLS_DIR names the folder the test built the C++ library (``libpyunwind_calls.so``),
the Cython module and the cffi API-mode module into; PYUNWIND_CFFI the folder with cffi for
this interpreter.

The main thread records the truth and blocks in ``_truth.HELD``. The truth has each thread's
native id under its name, ``pause``: ``signal.pause`` as native waits name it, ``cython``: the
Cython function's ``__module__`` and ``__qualname__``, ``methodcaller``: the ``tp_name`` of
``operator.methodcaller``, ``library``: the C++ library's file name, ``cffi_type``: the type
of ABI mode's ``lib.calls_wait``, and ``cffi_lib`` and ``cffi_lib_type``: the API-mode
module's ``lib`` (its id) and its type's ``tp_name``.
"""

import ctypes
import functools
import operator
import os
import signal
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.environ["PYUNWIND_CALLS_DIR"])
sys.path.insert(0, os.environ["PYUNWIND_CFFI"])
import _truth  # noqa: E402
import why_helpers  # noqa: E402
import cffi  # noqa: E402
import why_calls_api  # noqa: E402
import why_calls_cy  # noqa: E402

LOCK = threading.Lock()
RLOCK = threading.RLock()
LIBC = ctypes.CDLL("libc.so.6")
LIBRARY = os.path.join(os.environ["PYUNWIND_CALLS_DIR"], "libpyunwind_calls.so")
CPP = ctypes.CDLL(LIBRARY)
FFI = cffi.FFI()
FFI.cdef("int calls_wait(int why);")
CLIB = FFI.dlopen(LIBRARY)
SLEEP = functools.partial(time.sleep, 3600)
PAUSE = operator.methodcaller("pause")


def sleeper(started):
    with LOCK:
        started.set(); time.sleep(3600)  # noqa: E702


def pauser(started):
    with RLOCK:
        started.set(); signal.pause()  # noqa: E702


def ctyper(started):
    started.set(); LIBC.pause()  # noqa: E702


def cpp_ctyper(started):
    started.set(); CPP.calls_park(1)  # noqa: E702


def cffier(started):
    started.set(); CLIB.calls_wait(2)  # noqa: E702


def cffi_apier(started):
    started.set(); why_calls_api.lib.calls_wait(3)  # noqa: E702


def cythoner(started):
    started.set(); why_calls_cy.Worker().block()  # noqa: E702


def partialer(started):
    started.set(); SLEEP()  # noqa: E702


def caller(started):
    started.set(); PAUSE(signal)  # noqa: E702


def main():
    names = {"sleeper": sleeper, "pauser": pauser, "ctyper": ctyper, "cpp_ctyper": cpp_ctyper,
             "cffier": cffier, "cffi_apier": cffi_apier, "cythoner": cythoner,
             "partialer": partialer, "caller": caller}
    _truth.start_threads(names)
    ids = {t.name: t.native_id for t in threading.enumerate() if t.name in names}
    why_helpers.wait_blocked(os.getpid(), list(ids.values()))
    # A module's builtin as docs/report.md names it: its module's name and its own.
    pause = "%s.%s" % (signal.pause.__module__, signal.pause.__name__)
    block = why_calls_cy.Worker.block
    cython = "%s.%s" % (block.__module__, block.__qualname__)
    methodcaller = _truth.type_name(type(PAUSE))
    cffi_type = "%s.%s" % (type(CLIB.calls_wait).__module__, type(CLIB.calls_wait).__qualname__)
    _truth.ready(pause=pause, cython=cython, methodcaller=methodcaller,
                 library=os.path.basename(LIBRARY), cffi_type=cffi_type,
                 cffi_lib=id(why_calls_api.lib),
                 cffi_lib_type=_truth.type_name(type(why_calls_api.lib)), **ids)
    _truth.HELD.acquire()


if __name__ == "__main__":
    main()

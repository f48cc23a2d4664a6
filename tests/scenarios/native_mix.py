"""Python frames among native ones (`--native`): the main thread stops in a C-level signal
handler (a ctypes callback that libc's `raise` runs on a kernel signal frame), raised from a
Python signal handler that runs during a ctypes callback from libc's qsort, called from a
function that `map` calls, called from a `sorted` key function. Two workers block in native
code: one in a lock, one in a pipe read.
"""

import ctypes
import os
import signal
import sys
import threading

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402

LOCK = threading.Lock()
LOCK.acquire()
PIPE_R, PIPE_W = os.pipe()
CMP = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int))
HANDLER = ctypes.CFUNCTYPE(None, ctypes.c_int)
LIBC = ctypes.CDLL(None)


def in_c_handler(signum):
    _truth.ready(); _truth.HELD.acquire()  # noqa: E702


C_HANDLER = HANDLER(in_c_handler)


def on_signal(signum, frame):
    getattr(LIBC, "raise")(signal.SIGUSR2)


def compare(a, b):
    signal.raise_signal(signal.SIGUSR1)
    return a[0] - b[0]


def via_ctypes(_):
    libc = ctypes.CDLL(None)
    values = (ctypes.c_int * 2)(2, 1)
    libc.qsort(values, 2, ctypes.sizeof(ctypes.c_int), CMP(compare))
    return values[0]


def key(x):
    return list(map(via_ctypes, [x]))


def locked(started):
    started.set(); LOCK.acquire()  # noqa: E702


def reading(started):
    started.set(); os.read(PIPE_R, 1)  # noqa: E702


def main():
    signal.signal(signal.SIGUSR1, on_signal)
    # A C-level handler: the kernel's signal frame is on the stack while it runs.
    LIBC.signal.restype = ctypes.c_void_p
    LIBC.signal.argtypes = (ctypes.c_int, HANDLER)
    LIBC.signal(signal.SIGUSR2, C_HANDLER)
    _truth.start_threads({"locked": locked, "reading": reading})
    sorted([1], key=key)


if __name__ == "__main__":
    main()

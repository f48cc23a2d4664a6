"""The GIL held by a thread blocked in a system call, and threads blocked waiting for it: a
stop where the program itself knows who holds the GIL and who waits for it.

The main thread starts WAITERS threads, each blocked reading a pipe (GIL released), records
the truth, then on the same line wakes them and blocks in pause(), both through
ctypes.PyDLL, whose calls keep the GIL. Each woken waiter returns from os.read into
take_gil() and blocks there on the GIL's condition variable (a futex inside the GIL). The
switch interval is an hour: a waiter's timed wait on the GIL does not time out (which would
wake it for a moment) while a test looks, until a debugger's stop interrupts it (the kernel
then restarts it as restart_syscall): a test looks at one stop of each process.

Truth extras: ``gil_holder`` the main thread's ``thread_id``, ``gil_waiters`` the waiters'
native ids (free-threaded build: None and [], there is no GIL: the waiters go on to
``HELD.acquire()``, on the same line), ``holder_native_id``.
"""

import ctypes
import os
import sys
import threading

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402

WAITERS = 3
SWITCH_INTERVAL_SECONDS = 3600.0

# PyDLL: calls through it keep the GIL (CDLL's release it).
LIBC = ctypes.PyDLL(None)
WRITE = LIBC.write
WRITE.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t)
PAUSE = LIBC.pause
PAUSE.argtypes = ()


def wait_for_gil(gate, started):
    started.set(); os.read(gate, 1); _truth.HELD.acquire()  # noqa: E702  waiters park here


def main():
    sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)
    gate_r, gate_w = os.pipe()
    waiters = []
    for i in range(WAITERS):
        started = threading.Event()
        t = threading.Thread(target=wait_for_gil, args=(gate_r, started), name="waiter-%d" % i,
                             daemon=True)
        t.start()
        if not started.wait(_truth.MAX_START_SECONDS):
            _truth.fail("waiter-%d did not start" % i)
        waiters.append(t)
    ids = [] if _truth.FREE_THREADED else [t.native_id for t in waiters]
    holder = None if _truth.FREE_THREADED else threading.get_ident()
    truth = {"gil_holder": holder, "gil_waiters": ids,
             "holder_native_id": threading.get_native_id()}
    _truth.ready(**truth); WRITE(gate_w, b"w" * WAITERS, WAITERS); PAUSE()  # noqa: E702


if __name__ == "__main__":
    main()

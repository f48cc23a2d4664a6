"""Threads blocked in different system calls, for --why's `state` and `syscall`.

- "reader" in ``os.read`` on a pipe nobody writes to;
- "sleeper" in ``time.sleep``;
- "receiver" in ``socket.recv`` on a socketpair nobody writes to;
- "poller" in ``select.poll().poll()`` on that pipe, with no timeout;
- "locker" in ``LOCK.acquire()``, a Lock the main thread holds;
- "looper" in an asyncio event loop with nothing to do: idle in its selector;
- "uvlooper" (when ``PYUNWIND_UVLOOP`` names the folder holding uvloop) in a uvloop loop with
  nothing to do: idle in libuv, with no Python frame of the loop's own;
- the main thread records the truth and blocks in ``_truth.HELD.acquire()``.

The truth has ``doing``: thread name -> what it does (``read``, ``sleep``, ``recv``, ``poll``,
``lock``, ``loop``); which system call that is on this interpreter and C library is the
kernel's to say (the tests read /proc/PID/task/TID/syscall).
"""

import asyncio
import os
import select
import socket
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402

STOP_SECONDS = 3600

PIPE_R, PIPE_W = os.pipe()
SOCK_A, SOCK_B = socket.socketpair()
LOCK = threading.Lock()


def reader(started):
    started.set(); os.read(PIPE_R, 1)  # noqa: E702


def sleeper(started):
    started.set(); time.sleep(STOP_SECONDS)  # noqa: E702


def receiver(started):
    started.set(); SOCK_A.recv(1)  # noqa: E702


def poller(started):
    p = select.poll()
    p.register(PIPE_R, select.POLLIN)
    started.set(); p.poll()  # noqa: E702


def locker(started):
    started.set(); LOCK.acquire()  # noqa: E702


async def idle(started):
    never = asyncio.get_running_loop().create_future()
    started.set(); await never  # noqa: E702


def looper(started):
    asyncio.run(idle(started))


def uvlooper(started):
    loop = uvloop.new_event_loop()
    loop.run_until_complete(idle(started))


WORKERS = {"reader": reader, "sleeper": sleeper, "receiver": receiver, "poller": poller,
           "locker": locker, "looper": looper}
DOING = {"reader": "read", "sleeper": "sleep", "receiver": "recv", "poller": "poll",
         "locker": "lock", "looper": "loop", "MainThread": "lock"}
if os.environ.get("PYUNWIND_UVLOOP"):
    # The uvloop wheel for this interpreter, installed by tools/uvloop.sh.
    sys.path.insert(0, os.environ["PYUNWIND_UVLOOP"])
    import uvloop  # noqa: E402
    WORKERS["uvlooper"] = uvlooper
    DOING["uvlooper"] = "loop"


def main():
    LOCK.acquire()
    _truth.start_threads(WORKERS)
    _truth.ready(doing=DOING); _truth.HELD.acquire()  # noqa: E702


if __name__ == "__main__":
    main()

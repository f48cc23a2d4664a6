"""A bench program: N asyncio tasks, then it stops itself (no truth recorded: at 100,000 tasks
recording it would take longer than the bench).

    python many_tasks.py TRUTH_JSON READY_FIFO N ON_CPU

- N tasks sleep, all awaited by one `gather` in the main task (they share an awaiter);
- ON_CPU more tasks are running, nested: each is an eager task started by the one before it
  (`eager_task_factory`), so all of them are on the main thread's stack at once. The innermost
  blocks the loop thread; the program signals ready once it is there.
"""

import asyncio
import os
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tests", "scenarios"))
import _truth  # noqa: E402

N, ON_CPU = int(sys.argv[3]), int(sys.argv[4])


async def sleeper():
    await asyncio.sleep(100000)


async def nested(k):
    if k == 0:
        _truth.write_truth({"pid": os.getpid(), "tasks": N + ON_CPU + 1}, signal=False)
        _truth.signal_when_blocked(threading.get_ident(), sys._getframe(0).f_code)
        _truth.HELD.acquire()
    await asyncio.create_task(nested(k - 1))


async def main():
    tasks = [asyncio.create_task(sleeper()) for _ in range(N)]
    await asyncio.sleep(0)
    if ON_CPU:
        asyncio.get_running_loop().set_task_factory(asyncio.eager_task_factory)
        await asyncio.create_task(nested(ON_CPU - 1))
    else:
        _truth.write_truth({"pid": os.getpid(), "tasks": N + 1}, signal=False)
        asyncio.get_running_loop().call_later(0.3, _truth.signal_ready)
    await asyncio.gather(*tasks)


if __name__ == "__main__":
    sys.setrecursionlimit(100000)
    threading.stack_size(0)
    asyncio.run(main())

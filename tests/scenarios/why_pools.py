"""Pools and their idle threads (issue 37): what a real program's waiting-for-work threads look
like, beside one thread that is really blocked.

- A ``concurrent.futures.ThreadPoolExecutor`` (``tpool_0`` .. ``tpool_5``): five workers idle
  in ``work_queue.get`` (a ``queue.SimpleQueue``), one worker blocked in ``LOCK.acquire()``;
  the main thread holds ``LOCK`` in a ``with`` block (so its owner is known).
- A ``ProcessPoolExecutor`` of 2 processes (its manager thread idle in
  ``_ExecutorManagerThread``; its call queue's feeder thread idle; its worker processes idle
  in ``_process_worker``).
- A ``multiprocessing.Pool`` of 2 processes (its handler threads idle; its worker processes
  idle in ``worker``).
- A ``multiprocessing.Queue`` with one item put, so its feeder thread (``QueueFeederThread``)
  is started and idle in ``Queue._feed``.

Each worker process records its own truth (why_helpers.record_main_when_idle: a ``recorder``
thread writes the main thread's frames once it is blocked waiting for work, then blocks).

The truth has ``lock`` (``id(LOCK)``), ``main_with_line`` (the line of main's ``with LOCK:``),
``blocked_worker`` (native id), ``tpool_idle`` (native ids of the 5 idle workers),
``work_queue`` (``id()`` of the executor's SimpleQueue), ``ppool_manager``,
``mp_handlers`` ({``_handle_workers``/``_handle_tasks``/``_handle_results``: native id}),
``feeders`` (native ids of every ``QueueFeederThread``), ``my_queue_notempty``
(``id()`` of the Condition the feeder of ``MYQ`` waits on, and ``my_feeder``, its native id),
``ppool_workers`` and ``mp_workers``: [{pid, truth}].
"""

import concurrent.futures
import multiprocessing
import os
import sys
import threading

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402
import why_helpers  # noqa: E402

THREAD_WORKERS = 6
PROCESSES = 2
LOCK = threading.Lock()
BLOCKED = []  # native id of the worker blocked on LOCK
BLOCKED_STARTED = threading.Event()


def blocked_task():
    BLOCKED.append(threading.get_native_id())
    BLOCKED_STARTED.set(); LOCK.acquire()  # noqa: E702


def rendezvous(barrier):
    barrier.wait()


def square(x):
    return x * x


def child_init(prefix, kind):
    why_helpers.record_main_when_idle(prefix, {"kind": kind})


def main():
    prefix = sys.argv[1]
    with LOCK:  # main holds LOCK
        # Six workers: each submit starts a thread while no worker is idle (none has finished
        # a job); five of them finish at the barrier and go back to waiting for work.
        tpool = concurrent.futures.ThreadPoolExecutor(THREAD_WORKERS, thread_name_prefix="tpool")
        barrier = threading.Barrier(THREAD_WORKERS)
        tpool.submit(blocked_task)
        if not BLOCKED_STARTED.wait(_truth.MAX_START_SECONDS):
            _truth.fail("the blocked worker did not start")
        done = [tpool.submit(rendezvous, barrier) for _ in range(THREAD_WORKERS - 1)]
        barrier.wait()
        concurrent.futures.wait(done)
        if len(tpool._threads) != THREAD_WORKERS:
            _truth.fail("%d thread pool workers" % len(tpool._threads))

        ppool = concurrent.futures.ProcessPoolExecutor(
            PROCESSES, initializer=child_init, initargs=(prefix, "process_pool"))
        futures = [ppool.submit(square, i) for i in range(PROCESSES)]
        concurrent.futures.wait(futures)
        ppool_pids = sorted(ppool._processes)
        if len(ppool_pids) != PROCESSES:
            _truth.fail("%d process pool workers" % len(ppool_pids))

        mpool = multiprocessing.Pool(PROCESSES, initializer=child_init,
                                     initargs=(prefix, "mp_pool"))
        mpool.map(square, range(4))
        mp_pids = sorted(p.pid for p in mpool._pool)

        myq = multiprocessing.Queue()
        myq.put("x")

        ppool_workers = why_helpers.wait_for_child_truths(prefix, ppool_pids)
        mp_workers = why_helpers.wait_for_child_truths(prefix, mp_pids)
        by_ident = {t.ident: t for t in threading.enumerate()}
        feeders = sorted(t.native_id for t in by_ident.values() if t.name == "QueueFeederThread")
        blocked = BLOCKED[0]
        tpool_idle = sorted(t.native_id for t in tpool._threads if t.native_id != blocked)
        handlers = {"_handle_workers": mpool._worker_handler.native_id,
                    "_handle_tasks": mpool._task_handler.native_id,
                    "_handle_results": mpool._result_handler.native_id}
        manager = ppool._executor_manager_thread.native_id
        everyone = [t.native_id for t in by_ident.values() if t is not threading.current_thread()]
        why_helpers.wait_blocked(os.getpid(), everyone)
        with_line = _truth.source_line_of("# main " + "holds LOCK", __file__)
        truth = dict(lock=id(LOCK), main_with_line=with_line, blocked_worker=blocked,
                     tpool_idle=tpool_idle, work_queue=id(tpool._work_queue),
                     ppool_manager=manager, mp_handlers=handlers, feeders=feeders,
                     my_feeder=myq._thread.native_id, my_queue_notempty=id(myq._notempty),
                     ppool_workers=ppool_workers, mp_workers=mp_workers,
                     start_method=multiprocessing.get_start_method())
        _truth.ready(**truth); _truth.HELD.acquire()  # noqa: E702


if __name__ == "__main__":
    main()

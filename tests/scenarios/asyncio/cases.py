"""asyncio scenarios, each recording its own ground truth.

    python cases.py TRUTH_JSON READY_FIFO CASE IMPL

IMPL is ``c`` (the `_asyncio` Task) or ``py`` (``sys.modules['_asyncio'] = None`` before asyncio
is imported: the pure-Python Task and Future), or ``uvloop`` (the C Task on uvloop's loop, which
has no Python frames of its own; ``PYUNWIND_UVLOOP`` names the folder holding uvloop).

A case builds its tasks, then either
- ``ctx.idle()``: once the loop has gone idle, a recorder thread (a thread without a loop,
  which the truth lists too) records every thread's stack and every task, then blocks; or
- ``ctx.here()``: records from inside a running task (on-CPU) and blocks the loop thread in
  ``_truth.HELD.acquire()`` on the same line.

Task truth comes from the interpreter: coroutine chains by ``cr_await``/``ag_await``/
``gi_yieldfrom`` with each frame's ``f_lineno``; on-CPU frames by frame identity on the
thread's stack. What the scenario built (who awaits whom, cycles) it records as it builds it.
"""

import os
import sys

CASE, IMPL = sys.argv[3], sys.argv[4]
if IMPL == "py":
    sys.modules["_asyncio"] = None
elif IMPL == "uvloop":
    # The uvloop wheel for this interpreter, installed by tools/uvloop.sh.
    sys.path.insert(0, os.environ["PYUNWIND_UVLOOP"])

import asyncio  # noqa: E402
import concurrent.futures  # noqa: E402
import gc  # noqa: E402
import linecache  # noqa: E402
import re  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import types  # noqa: E402

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import _truth  # noqa: E402

FOREVER = 100000
SETTLE_SECONDS = 0.3


def frame_entry(f):
    return {"function": _truth.code_name(f.f_code), "file": f.f_code.co_filename,
            "line": f.f_lineno}


def chain_of(coro):
    """(frames innermost first, leaf object) of a suspended coroutine."""
    frames, obj, seen = [], coro, set()
    while obj is not None and id(obj) not in seen:
        seen.add(id(obj))
        if isinstance(obj, types.CoroutineType):
            f, nxt = obj.cr_frame, obj.cr_await
        elif isinstance(obj, types.AsyncGeneratorType):
            f, nxt = obj.ag_frame, obj.ag_await
        elif isinstance(obj, types.GeneratorType):
            f, nxt = obj.gi_frame, obj.gi_yieldfrom
        elif type(obj).__name__ in ("async_generator_asend", "async_generator_athrow"):
            gens = [r for r in gc.get_referents(obj) if isinstance(r, types.AsyncGeneratorType)]
            obj = gens[0] if gens else None
            continue
        else:
            break
        if f is None:
            break
        frames.append(frame_entry(f))
        if nxt is None:
            break
        obj = nxt
    frames.reverse()
    return frames, obj


AWAITS = re.compile(r"#.*\bawaits: (\w+)(?:; 3\.(\d+)-: (\w+))?")


def declared_awaiting(frames):
    """What the task waits on, as this file declares it: the innermost frame of this file in
    the chain is on an ``await`` line annotated ``# awaits: KIND`` (``# awaits: KIND; 3.N-:
    OTHER`` when the interpreter's asyncio waits on something else from 3.N on). The truth is
    what the scenario's author wrote, not a rule over the objects found: a wrong rule in
    pyunwind cannot be copied here."""
    mine = [f for f in frames if f["file"] == __file__]
    if not mine:
        _truth.fail("no frame of %s in the chain %r" % (__file__, frames))
    line = linecache.getline(__file__, mine[0]["line"])
    m = AWAITS.search(line)
    if not m:
        _truth.fail("line %d has no `# awaits:` annotation: %r" % (mine[0]["line"], line))
    kind, since, later = m.groups()
    return later if since and sys.version_info[1] >= int(since) else kind


class Ctx:
    def __init__(self):
        self.names = {}  # id(task) -> name known by construction (unnamed tasks: Task-N)
        self.awaited_by = {}  # id(child) -> set of id(parent)
        self.owned_by = {}
        self.cycles = []
        self.keep = []  # objects kept alive on purpose
        self.extra = {}
        self.loops = []
        self.non_tasks = []
        self.executor = {}  # id(task) -> worker thread name
        self.settled = threading.Event()

    def name(self, task, name):
        self.names[id(task)] = name
        return task

    def edge(self, child, parent):
        self.awaited_by.setdefault(id(child), set()).add(id(parent))

    def owned(self, child, parent):
        self.owned_by.setdefault(id(child), set()).add(id(parent))

    def cycle(self, tasks):
        self.cycles.append([id(t) for t in tasks])

    def idle(self):
        """Record once the calling loop has been idle for a while (called from the loop)."""
        loop = asyncio.get_running_loop()
        if loop not in self.loops:
            self.loops.append(loop)
        loop.call_later(SETTLE_SECONDS, self.settled.set)

    def here(self):
        """Record now, from a running task; the caller blocks on the same line."""
        loop = asyncio.get_running_loop()
        if loop not in self.loops:
            self.loops.append(loop)
        caller = sys._getframe(1)
        truth = _truth.collect(caller)
        truth.update(task_truth(self, thread_frames(threading.current_thread(), caller)))
        write(truth)
        _truth.signal_when_blocked(threading.get_ident(), caller.f_code)


def thread_frames(thread, frame):
    out = []
    while frame is not None:
        out.append(frame)
        frame = frame.f_back
    return {thread.native_id: out}


def all_tasks_of(loop):
    tasks = set()
    if sys.version_info >= (3, 14):
        # The C `_asyncio` keeps native tasks on per-thread lists only.
        tasks.update(asyncio.all_tasks(loop))
    for t in list(asyncio.tasks._all_tasks if hasattr(asyncio.tasks, "_all_tasks")
                  else asyncio.tasks._scheduled_tasks):
        tasks.add(t)
    for t in list(getattr(asyncio.tasks, "_eager_tasks", ())):
        tasks.add(t)
    out = []
    for t in tasks:
        if not isinstance(t, asyncio.Task):
            continue
        if t.get_loop() is loop and not t.done():
            out.append(t)
    return out


def task_truth(ctx, stacks):
    """stacks: {native_id: [frame objects innermost first]} of the loop threads."""
    tasks_out, loops_out = [], []
    for loop in ctx.loops:
        tasks = all_tasks_of(loop)
        loop_thread = ctx.extra.get("loop_threads", {}).get(id(loop))
        # On-CPU tasks: their coroutine frame is on a thread stack.
        tops = {}
        for nid, frames in stacks.items():
            for i, f in enumerate(frames):
                for t in tasks:
                    coro = t.get_coro()
                    if getattr(coro, "cr_frame", None) is f:
                        tops[id(t)] = (nid, i)
        for t in tasks:
            entry = {"id": id(t), "name": ctx.names.get(id(t)) or t.get_name(),
                     "awaited_by": sorted(ctx.awaited_by.get(id(t), ())),
                     "owned_by": sorted(ctx.owned_by.get(id(t), ())),
                     "loop": id(loop), "type": _truth.type_name(type(t))}
            if id(t) in tops:
                nid, i = tops[id(t)]
                newer = [j for (n2, j) in tops.values() if n2 == nid and j < i]
                start = max(newer) + 1 if newer else 0
                entry.update(on_cpu=True, native_id=nid, awaiting=None,
                             frames=[frame_entry(f) for f in stacks[nid][start:i + 1]])
            else:
                frames, _ = chain_of(t.get_coro())
                entry.update(on_cpu=False, native_id=loop_thread, frames=frames,
                             awaiting=declared_awaiting(frames))
                if id(t) in ctx.executor:
                    entry["executor_thread"] = ctx.executor[id(t)]
            tasks_out.append(entry)
        # The loop thread's frames from the loop outwards.
        upper = []
        for nid, frames in stacks.items():
            if nid != loop_thread:
                continue
            mine = [i for (n2, i) in (tops[id(t)] for t in tasks if id(t) in tops) if n2 == nid]
            if mine:
                upper = frames[max(mine) + 1:]
            else:
                idx = [i for i, f in enumerate(frames)
                       if f.f_code.co_name == "_run_once" and f.f_locals.get("self") is loop]
                # A loop written in C (uvloop) has no `_run_once` frame: every Python frame
                # of its thread is above it.
                upper = frames[idx[0]:] if idx else frames
        loops_out.append({"id": id(loop), "native_id": loop_thread, "type": type(loop).__name__,
                          "frames": [frame_entry(f) for f in upper]})
    # The sets asyncio registers tasks in (for the corrupt-core tests).
    registry = getattr(asyncio.tasks, "_scheduled_tasks", None)
    if registry is None:
        registry = asyncio.tasks._all_tasks
    return {"impl": IMPL, "case": CASE, "tasks": tasks_out, "loops": loops_out,
            "cycles": ctx.cycles, "non_tasks": ctx.non_tasks,
            "registry_set": id(registry.data)}


def write(truth):
    _truth.write_truth(truth, signal=False)


CTX = Ctx()


def record_all():
    """The truth, recorded from the recorder thread while every loop is idle."""
    truth = _truth.collect(sys._getframe(1))
    frames = sys._current_frames()
    stacks = {}
    for t in threading.enumerate():
        if t.ident in frames and t is not threading.current_thread():
            stacks[t.native_id] = thread_frames(t, frames[t.ident])[t.native_id]
    truth.update(task_truth(CTX, stacks))
    return truth


def recorder():
    """Waits for the loop to be idle, records everything, then blocks (on the same line, so
    the line recorded is the line it waits on)."""
    CTX.settled.wait()
    me, code = threading.get_ident(), sys._getframe(0).f_code
    write(record_all()); _truth.signal_when_blocked(me, code); _truth.HELD.acquire()  # noqa: E702,E501


# --- the cases ----------------------------------------------------------------------------

async def sleeper():
    await asyncio.sleep(FOREVER)  # awaits: sleep


async def case_idle(ctx):
    ctx.idle()
    await asyncio.sleep(FOREVER)  # awaits: sleep


async def deep_c():
    await asyncio.sleep(FOREVER)  # awaits: sleep


async def deep_b():
    await deep_c()


async def deep_a():
    await deep_b()


async def case_deep(ctx):
    ctx.idle()
    await deep_a()


async def chain_f(ctx, n):
    if n == 0:
        await asyncio.sleep(FOREVER)  # awaits: sleep
        return
    child = ctx.name(asyncio.create_task(chain_f(ctx, n - 1), name="f%d" % (n - 1)), "f%d" % (n - 1))
    ctx.edge(child, asyncio.current_task())
    await child  # awaits: task


async def case_chain3(ctx):
    ctx.idle()
    await chain_f(ctx, 3)


async def case_chain50(ctx):
    ctx.idle()
    await chain_f(ctx, 50)


async def case_gather(ctx):
    main = asyncio.current_task()
    ctx.idle()
    coros = [sleeper() for _ in range(3)]
    before = set(asyncio.all_tasks())
    # gather wraps each coroutine in a task (Task-2 to Task-4, named by their default).
    fut = asyncio.gather(*coros)
    for t in asyncio.all_tasks() - before:
        ctx.edge(t, main)
    await fut  # awaits: gather


async def f5():
    await asyncio.sleep(FOREVER)  # awaits: sleep


async def f4():
    await f5()


async def f3(ctx):
    me = asyncio.current_task()
    a = ctx.name(asyncio.create_task(f4(), name="F4_0"), "F4_0")
    b = ctx.name(asyncio.create_task(f4(), name="F4_1"), "F4_1")
    ctx.edge(a, me)
    ctx.edge(b, me)
    await asyncio.gather(a, b, a)  # awaits: gather


async def f2(ctx):
    me = asyncio.current_task()
    t = ctx.name(asyncio.create_task(f3(ctx), name="F3"), "F3")
    ctx.edge(t, me)
    await t  # awaits: task


async def f1(ctx):
    await f2(ctx)


async def case_gather_named(ctx):
    main = asyncio.current_task()
    ctx.idle()
    t = ctx.name(asyncio.create_task(f1(ctx), name="F1"), "F1")
    ctx.edge(t, main)
    await asyncio.gather(t)  # awaits: gather


async def tg_a(ctx):
    me = asyncio.current_task()
    async with asyncio.TaskGroup() as tg:  # awaits: future
        for n in ("B1", "B2"):
            ctx.edge(ctx.name(tg.create_task(sleeper(), name=n), n), me)


async def case_taskgroup(ctx):
    main = asyncio.current_task()
    ctx.idle()
    async with asyncio.TaskGroup() as tg:  # awaits: future
        ctx.edge(ctx.name(tg.create_task(tg_a(ctx), name="A"), "A"), main)


async def case_shield(ctx):
    main = asyncio.current_task()
    inner = ctx.name(asyncio.create_task(sleeper(), name="inner"), "inner")
    ctx.edge(inner, main)
    ctx.idle()
    await asyncio.shield(inner)  # awaits: future


async def case_wait_for(ctx):
    main = asyncio.current_task()
    inner = ctx.name(asyncio.create_task(sleeper(), name="inner"), "inner")
    ctx.edge(inner, main)
    ctx.idle()
    await asyncio.wait_for(inner, FOREVER)  # awaits: future; 3.12-: task


async def quick():
    return 1


def cpu():
    CTX.here(); _truth.HELD.acquire()  # noqa: E702


async def case_wait_first(ctx):
    fast = asyncio.create_task(quick(), name="fast")
    slow = [ctx.name(asyncio.create_task(sleeper(), name="slow%d" % i), "slow%d" % i)
            for i in range(2)]
    await asyncio.wait([fast] + slow, return_when=asyncio.FIRST_COMPLETED)  # awaits: future
    cpu()


def sync_code():
    CTX.here(); _truth.HELD.acquire()  # noqa: E702


def sync_code_outer():
    sync_code()


async def inner3():
    sync_code_outer()


async def inner2():
    await inner3()


async def inner1(ctx):
    t = ctx.name(asyncio.create_task(inner2(), name="Task-2"), "Task-2")
    ctx.edge(t, asyncio.current_task())
    await t  # awaits: task


async def outer(ctx):
    await inner1(ctx)


async def case_recursive_on_cpu(ctx):
    await outer(ctx)


async def eager_child_suspends():
    await asyncio.sleep(FOREVER)  # awaits: sleep


async def case_eager_suspend(ctx):
    loop = asyncio.get_running_loop()
    loop.set_task_factory(asyncio.eager_task_factory)
    main = asyncio.current_task()
    child = ctx.name(asyncio.create_task(eager_child_suspends(), name="child"), "child")
    ctx.edge(child, main)
    ctx.idle()
    await child  # awaits: task


def in_eager_step():
    CTX.here(); _truth.HELD.acquire()  # noqa: E702


async def eager_child_runs():
    in_eager_step()


async def case_eager_step(ctx):
    loop = asyncio.get_running_loop()
    loop.set_task_factory(asyncio.eager_task_factory)
    # The eager step runs inside create_task; the child's name is applied only after it,
    # so during the step it is the default "Task-2".
    asyncio.create_task(eager_child_runs(), name="child")


async def case_eager_done(ctx):
    loop = asyncio.get_running_loop()
    loop.set_task_factory(asyncio.eager_task_factory)
    t = asyncio.create_task(quick(), name="done-eagerly")
    ctx.keep.append(t)
    loop.set_task_factory(None)
    ctx.idle()
    await asyncio.sleep(FOREVER)  # awaits: sleep


async def cyc(ctx, me_name, other_holder):
    while not other_holder:
        await asyncio.sleep(0)  # awaits: sleep
    await other_holder[0]  # awaits: task


async def case_cycle(ctx):
    main = asyncio.current_task()
    holders = {n: [] for n in ("task_a", "task_b", "c1", "c2", "c3")}
    tasks = {}
    pairs = {"task_a": "task_b", "task_b": "task_a", "c1": "c2", "c2": "c3", "c3": "c1"}
    for n in holders:
        tasks[n] = ctx.name(asyncio.create_task(cyc(ctx, n, holders[n]), name=n), n)
    for n, other in pairs.items():
        holders[n].append(tasks[other])
        ctx.edge(tasks[other], tasks[n])
    ctx.cycle([tasks["task_a"], tasks["task_b"]])
    ctx.cycle([tasks["c1"], tasks["c2"], tasks["c3"]])
    ctx.keep.append(main)
    ctx.idle()
    await asyncio.sleep(FOREVER)  # awaits: sleep


def second_loop(ctx, started):
    async def other_main():
        me = asyncio.current_task()
        ctx.extra.setdefault("loop_threads", {})[id(asyncio.get_running_loop())] = \
            threading.get_native_id()
        for n in ("other1", "other2"):
            ctx.edge(ctx.name(asyncio.create_task(sleeper(), name=n), n), me)
        me.set_name("other-main")
        if asyncio.get_running_loop() not in ctx.loops:
            ctx.loops.append(asyncio.get_running_loop())
        started.set()
        await asyncio.gather(*[t for t in asyncio.all_tasks() if t is not me])  # awaits: gather
    asyncio.run(other_main())


def plain_thread(started):
    started.set(); _truth.HELD.acquire()  # noqa: E702


async def case_two_loops(ctx):
    s1, s2 = threading.Event(), threading.Event()
    threading.Thread(target=second_loop, args=(ctx, s1), name="loop-2", daemon=True).start()
    threading.Thread(target=plain_thread, args=(s2,), name="plain", daemon=True).start()
    s1.wait(10)
    s2.wait(10)
    ctx.idle()
    await asyncio.sleep(FOREVER)  # awaits: sleep


def slow_sync_function(started):
    started.set(); _truth.HELD.acquire()  # noqa: E702


async def case_executor(ctx):
    loop = asyncio.get_running_loop()
    started = threading.Event()
    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="worker")
    ctx.keep.append(pool)
    fut = loop.run_in_executor(pool, slow_sync_function, started)
    ctx.executor[id(asyncio.current_task())] = "worker_0"
    while not started.is_set():
        await asyncio.sleep(0.01)  # awaits: sleep
    ctx.idle()
    await fut  # awaits: future


async def deep_dependency():
    await asyncio.sleep(FOREVER)  # awaits: sleep


async def async_generator_dep():
    await deep_dependency()
    yield 1


async def async_generator():
    async for x in async_generator_dep():
        yield x


async def asynchronous_function():
    async for _ in async_generator():
        pass


async def case_asyncgen(ctx):
    ctx.idle()
    await asynchronous_function()


async def fan_waiter(t):
    await t  # awaits: task


async def case_fan_in(ctx):
    shared = ctx.name(asyncio.create_task(sleeper(), name="shared"), "shared")
    t1 = ctx.name(asyncio.create_task(fan_waiter(shared), name="T1"), "T1")
    t2 = ctx.name(asyncio.create_task(fan_waiter(shared), name="T2"), "T2")
    ctx.edge(shared, t1)
    ctx.edge(shared, t2)
    ctx.keep.append((t1, t2))
    ctx.idle()
    await asyncio.sleep(FOREVER)  # awaits: sleep


async def spinner(ctx, i):
    n = 0
    while True:
        await asyncio.sleep(0)  # awaits: sleep
        n += 1
        if i == 9 and n == 3:
            cpu()


async def case_ready_queue(ctx):
    for i in range(10):
        ctx.keep.append(ctx.name(asyncio.create_task(spinner(ctx, i), name="spin%d" % i),
                                 "spin%d" % i))
    await asyncio.sleep(FOREVER)  # awaits: sleep


async def case_many(ctx):
    main = asyncio.current_task()
    n = int(os.environ.get("PYUNWIND_TASKS", "10000"))
    tasks = [asyncio.create_task(sleeper(), name="w%d" % i) for i in range(n)]
    for t in tasks:
        ctx.edge(ctx.name(t, t.get_name()), main)
    ctx.idle()
    await asyncio.gather(*tasks)  # awaits: gather


async def case_finished(ctx):
    done = ctx.name(asyncio.create_task(quick(), name="finished"), "finished")
    cancelled = ctx.name(asyncio.create_task(sleeper(), name="cancelled"), "cancelled")
    ctx.keep.extend([done, cancelled])
    await asyncio.sleep(0)  # awaits: sleep
    cancelled.cancel()
    await asyncio.sleep(0.01)  # awaits: sleep
    ctx.idle()
    await asyncio.sleep(FOREVER)  # awaits: sleep


async def r(ctx, n):
    if n == 0:
        CTX.here(); _truth.HELD.acquire()  # noqa: E702
    t = ctx.name(asyncio.create_task(r(ctx, n - 1), name="r%d" % (n - 1)), "r%d" % (n - 1))
    ctx.edge(t, asyncio.current_task())
    await t  # awaits: task


async def case_recursion_shared_code(ctx):
    t = ctx.name(asyncio.create_task(r(ctx, 3), name="r3"), "r3")
    ctx.edge(t, asyncio.current_task())
    await t  # awaits: task


class MyTask(asyncio.Task):
    pass


class DuckTask:
    """Future-like but not an asyncio.Task, registered as a task."""
    _name = "duck"

    def __init__(self, loop):
        self._loop = loop

    def get_loop(self):
        return self._loop

    def done(self):
        return False


async def case_subclass(ctx):
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    loop.set_task_factory(lambda loop, coro, **kw: MyTask(coro, loop=loop, **kw))
    t = ctx.name(asyncio.create_task(sleeper(), name="mytask"), "mytask")
    ctx.edge(t, main)
    duck = DuckTask(loop)
    ctx.keep.append(duck)
    asyncio.tasks._register_task(duck)
    ctx.non_tasks.append({"id": id(duck), "type": _truth.type_name(DuckTask)})
    ctx.idle()
    await t  # awaits: task


CASES = {
    "idle": case_idle, "deep": case_deep, "chain3": case_chain3, "chain50": case_chain50,
    "gather": case_gather, "gather_named": case_gather_named, "taskgroup": case_taskgroup,
    "shield": case_shield, "wait_for": case_wait_for, "wait_first": case_wait_first,
    "recursive_on_cpu": case_recursive_on_cpu, "eager_suspend": case_eager_suspend,
    "eager_step": case_eager_step, "eager_done": case_eager_done, "cycle": case_cycle,
    "two_loops": case_two_loops, "executor": case_executor, "asyncgen": case_asyncgen,
    "fan_in": case_fan_in, "ready_queue": case_ready_queue, "many": case_many,
    "finished": case_finished, "recursion_shared_code": case_recursion_shared_code,
    "subclass": case_subclass,
}


async def main():
    CTX.extra.setdefault("loop_threads", {})[id(asyncio.get_running_loop())] = \
        threading.get_native_id()
    CTX.name(asyncio.current_task(), "Task-1")
    await CASES[CASE](CTX)


if __name__ == "__main__":
    threading.Thread(target=recorder, name="recorder", daemon=True).start()
    if IMPL == "uvloop":
        import uvloop
        uvloop.run(main())
    else:
        asyncio.run(main())
    _truth.fail("case %s returned" % CASE)

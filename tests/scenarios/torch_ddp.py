"""A torch.distributed job under torchrun: four ranks (gloo backend, on the CPU) train a tiny
model in DistributedDataParallel. Rank 2 (STALLED) is stuck in its data step, in Python
(`load_batch`, before its forward pass); ranks 0, 1 and 3 are in `loss.backward()`, their main
thread blocked in native code: DDP's reducer waits, at the end of the backward pass, for an
all-reduce that rank 2 never joins.

    python torch_ddp.py TRUTH SIGNAL         the launcher: runs torchrun (beside sys.executable)
    torchrun ... torch_ddp.py TRUTH SIGNAL rank     one rank (started by torchrun)

Run by the torch venv's python (tools/torch.sh). Each rank records its own truth into
``TRUTH.rank<I>.json``, as prefork.py's workers do:

- a waiting rank starts a thread ("truth") before its backward pass, which waits until the
  main thread's innermost Python frame is torch's ``_engine_run_backward`` (the one calling
  the engine's ``run_backward``) and the thread is blocked in ``futex``, twice in a row; it then
  records every other Python thread (the main thread's frames as it waits) and ends, so that
  the rank's only wait is the main thread's. The truth names the C function the main thread
  calls (``function``: the engine's ``tp_name``, a dot, ``run_backward``), the engine object
  (``engine``: its id) and the truth thread (``truth_thread``: its native id).
- the stalled rank records its main thread's stack on the line where it blocks in
  ``_truth.HELD.acquire()`` (a Lock taken at import: no holder known), ``waits`` saying so.

The launcher waits (MAX_RANKS_SECONDS at most) until every rank's truth is written, and then
until the truth thread is gone (a waiting rank) or the main thread blocked in ``futex`` (the
stalled rank), then records its own stack with ``torchrun_pid``
and ``ranks``: [{"rank", "pid", "stalled", "truth"}], signals the harness and blocks. torchrun
starts each rank in a session of its own, so a kill of the launcher's process group does not
reach them: each rank asks the kernel for SIGKILL when torchrun (its parent) dies
(PR_SET_PDEATHSIG), torchrun the same when the launcher dies, and the test kills every rank by
pid as well.
"""

import ctypes
import datetime
import json
import os
import platform
import signal
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402

RANKS = 4
STALLED = 2
# Four ranks importing torch at once on a small machine take a while.
MAX_RANKS_SECONDS = 300.0
MAX_BLOCK_SECONDS = 120.0
# x86-64's futex system call: where a condition variable or HELD.acquire() blocks.
SYS_FUTEX = "202"
# prctl(2): PR_SET_PDEATHSIG.
PR_SET_PDEATHSIG = 1


def rank_path(i):
    return sys.argv[1] + ".rank%d.json" % i


def in_futex(tid):
    """Thread ``tid`` of this process is blocked in futex."""
    try:
        with open("/proc/self/task/%d/syscall" % tid) as f:
            return f.read().split()[0] == SYS_FUTEX
    except (OSError, IndexError):
        return False


def write_json(path, data):
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False, indent=1)
    os.replace(path + ".tmp", path)


# --- a rank ------------------------------------------------------------------------------


def rank_truth(rank, threads, **extra):
    truth = {"pid": os.getpid(), "rank": rank, "python": platform.python_version(),
             "threads": threads}
    truth.update(extra)
    return truth


def load_batch(rank, torch):
    if rank == STALLED:
        waits = {"kind": "lock", "object": id(_truth.HELD), "frame": 0}
        me = threading.current_thread()
        record_stalled(rank, sys._getframe(0), me, waits); _truth.HELD.acquire()  # noqa: E702
    return torch.ones(2, 4)


def record_stalled(rank, caller, me, waits):
    others = [_truth._thread_entry(t, frames) for t, frames in other_threads(me)]
    write_json(rank_path(rank), rank_truth(
        rank, [_truth._thread_entry(me, _truth.frames_from(caller))] + others, waits=waits))


def other_threads(me):
    """(thread, frames) of every other Python thread, by name."""
    by_ident = {t.ident: t for t in threading.enumerate()}
    out = [(by_ident[ident], _truth.frames_from(frame))
           for ident, frame in sys._current_frames().items() if ident != me.ident]
    return sorted(out, key=lambda entry: entry[0].name)


def blocked_in_backward(rank, main, engine_code):
    """The frames of thread ``main`` once it is blocked in the engine's run_backward (its
    innermost frame runs ``engine_code``, it is in futex), the same twice 0.1 s apart."""
    deadline = time.monotonic() + MAX_BLOCK_SECONDS
    previous = None
    while True:
        frame = sys._current_frames().get(main.ident)
        frames = None
        if frame is not None and frame.f_code is engine_code and in_futex(main.native_id):
            frames = _truth.frames_from(frame)
            if frames == previous:
                return frames
        previous = frames
        if time.monotonic() > deadline:
            _truth.fail("rank %d: the main thread did not block in run_backward within %.0f s"
                        % (rank, MAX_BLOCK_SECONDS))
        time.sleep(0.1)


def watch_backward(rank, main, engine_code, function, engine):
    """The "truth" thread of a waiting rank: records once the main thread blocks in the
    engine's run_backward, then ends."""
    frames = blocked_in_backward(rank, main, engine_code)
    me = threading.current_thread()
    threads = [_truth._thread_entry(main, frames)]
    threads += [_truth._thread_entry(t, f) for t, f in other_threads(me) if t is not main]
    write_json(rank_path(rank), rank_truth(rank, threads, function=function, engine=engine,
                                           truth_thread=me.native_id))


def parent_is_torchrun():
    try:
        with open("/proc/%d/cmdline" % os.getppid(), "rb") as f:
            return any(os.path.basename(arg) == b"torchrun" for arg in f.read().split(b"\0"))
    except OSError:
        return False


def train_step(model, rank, torch):
    batch = load_batch(rank, torch)
    loss = model(batch).sum()
    loss.backward()


def die_with_parent():
    """SIGKILL this process when its parent dies (prctl(2) PR_SET_PDEATHSIG)."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def rank_main():
    # Die with torchrun: it starts the ranks in sessions of their own. (If it died before the
    # prctl, this rank has another parent by now.)
    die_with_parent()
    if not parent_is_torchrun():
        os._exit(3)
    import torch
    import torch.distributed as dist
    from torch.autograd import graph
    from torch.autograd.variable import Variable
    from torch.nn.parallel import DistributedDataParallel

    rank = int(os.environ["RANK"])
    # No collective may time out while the test looks at the job.
    dist.init_process_group("gloo", timeout=datetime.timedelta(hours=1))
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(4, 1))
    if rank != STALLED:
        # The call that blocks: graph._engine_run_backward calls
        # Variable._execution_engine.run_backward (torch/autograd/graph.py).
        engine = Variable._execution_engine
        function = _truth.type_name(type(engine)) + ".run_backward"
        threading.Thread(target=watch_backward, name="truth", daemon=True, args=(
            rank, threading.main_thread(), graph._engine_run_backward.__code__,
            function, id(engine))).start()
    train_step(model, rank, torch)
    _truth.fail("rank %d: backward returned" % rank)


# --- the launcher ------------------------------------------------------------------------


def wait_for_ranks(torchrun):
    deadline = time.monotonic() + MAX_RANKS_SECONDS
    ranks = []
    for i in range(RANKS):
        while True:
            if torchrun.poll() is not None:
                _truth.fail("torchrun exited with %r" % torchrun.returncode)
            if time.monotonic() > deadline:
                _truth.fail("rank %d not blocked within %.0f s" % (i, MAX_RANKS_SECONDS))
            if os.path.exists(rank_path(i)):
                with open(rank_path(i), encoding="utf-8") as f:
                    truth = json.load(f)
                if i == STALLED:
                    # Back on its blocking line after writing the truth.
                    done = blocked(truth["pid"], truth["pid"])
                else:
                    done = not os.path.exists("/proc/%d/task/%d" % (truth["pid"],
                                                                    truth["truth_thread"]))
                if done:
                    break
            time.sleep(0.05)
        ranks.append({"rank": i, "pid": truth["pid"], "stalled": i == STALLED, "truth": truth})
    return ranks


def blocked(pid, tid):
    try:
        with open("/proc/%d/task/%d/syscall" % (pid, tid)) as f:
            return f.read().split()[0] == SYS_FUTEX
    except (OSError, IndexError):
        return False


def launch():
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    # --standalone: a rendezvous store of its own on a free port of localhost.
    # torchrun dies with the launcher (whatever kills it), and the ranks with torchrun.
    proc = subprocess.Popen(
        [torchrun, "--standalone", "--nnodes=1", "--nproc_per_node=%d" % RANKS,
         "--max_restarts=0", os.path.abspath(__file__), sys.argv[1], sys.argv[2], "rank"],
        stdin=subprocess.DEVNULL, env=env, preexec_fn=die_with_parent)
    ranks = wait_for_ranks(proc)
    run_job(proc.pid, ranks)


def run_job(torchrun, ranks):
    _truth.ready(torchrun_pid=torchrun, ranks=ranks); _truth.HELD.acquire()  # noqa: E702


if __name__ == "__main__":
    if sys.argv[3:4] == ["rank"]:
        rank_main()
    else:
        launch()

"""A torch.distributed job that makes progress and then stalls, for `pyunwind watch
--children` (issue 52 item 5): three ranks (gloo backend, on the CPU) train a tiny model in
DistributedDataParallel, step after step, for PROGRESS_SECONDS; then rank 1 (STALLED) blocks in
its data step (in Python, `load_batch`, on a Lock nobody releases) and the other ranks, in
their next `loss.backward()`, wait in native code for the all-reduce it never joins.

    python watch_torch.py TRUTH SIGNAL [PROGRESS_SECONDS]     the launcher
    torchrun ... watch_torch.py TRUTH SIGNAL rank PROGRESS     one rank (started by torchrun)

Run by the torch venv's python (tools/torch.sh). The launcher starts a shell that sleeps
SHELL_SLEEP_SECONDS and then runs torchrun (the shell runs no Python, and has no Python child
until torchrun starts: a watch begun on it must wait for its children), records ``shell_pid``
and signals the harness at once, then waits for torchrun in a polling loop.

The ranks do not begin their steps until every rank has imported torch and joined the process
group (a file per rank, looked for by polling, then ``dist.barrier()``), so that no rank waits
for the others' imports in a native wait, which a watch would rightly call a stall. Each rank
records its own truth into ``TRUTH.rank<I>.json``, as torch_ddp.py's do:

- the stalled rank, just before it blocks: its pid and torchrun's, its main thread's stack on the blocking
  line (``frames``), the steps it made (``steps``) and ``began``, ``time.time()`` then;
- a waiting rank: a thread ("truth") that starts once PROGRESS_SECONDS are over waits until
  the main thread's innermost Python frame is torch's ``_engine_run_backward`` and the thread
  is blocked in ``futex`` (twice in a row, 0.1 s apart), records its pid and torchrun's, the
  main thread's stack and ``steps``, and ends. Until then it sleeps in one ``time.sleep``, a
  wait that a watch does not count as a stall. The main thread is then the rank's only Python
  thread.

The harness's kill of the launcher's process group reaches the shell and torchrun; torchrun
starts each rank in a session of its own, so each rank asks the kernel for SIGKILL when
torchrun (its parent) dies (PR_SET_PDEATHSIG), and the test kills every rank by pid as well.
"""

import datetime
import os
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402
# The rank's file, its JSON written whole, the wait for the backward pass's block and the
# death with torchrun are torch_ddp.py's.
from torch_ddp import (blocked_in_backward, die_with_parent,  # noqa: E402
                       rank_path, write_json)

RANKS = 3
STALLED = 1
SHELL_SLEEP_SECONDS = 3
# Three ranks importing torch at once on a small machine take a while.
MAX_START_SECONDS = 300.0
POLL_SECONDS = 0.1


# --- a rank ------------------------------------------------------------------------------


STEPS = [0]


def load_batch(rank, torch, stall_at):
    if rank == STALLED and time.monotonic() >= stall_at:
        # Recorded on the line that blocks, as the frame's line is while it waits.
        record_stalled(rank, sys._getframe(0)); _truth.HELD.acquire()  # noqa: E702
    return torch.ones(2, 4)


def record_stalled(rank, caller):
    me = threading.current_thread()
    write_json(rank_path(rank), {
        "pid": os.getpid(), "torchrun_pid": os.getppid(), "rank": rank, "steps": STEPS[0],
        "began": time.time(),
        "threads": [_truth._thread_entry(me, _truth.frames_from(caller))]})


def train_step(model, rank, torch, stall_at):
    batch = load_batch(rank, torch, stall_at)
    loss = model(batch).sum()
    loss.backward()


def watch_backward(rank, main, engine_code, stall_at):
    """The "truth" thread of a waiting rank: from the stall's time on, records once the main
    thread blocks in the engine's run_backward, then ends."""
    time.sleep(max(0.0, stall_at - time.monotonic()))
    frames = blocked_in_backward(rank, main, engine_code)
    write_json(rank_path(rank), {"pid": os.getpid(), "torchrun_pid": os.getppid(), "rank": rank,
                                 "steps": STEPS[0],
                                 "threads": [_truth._thread_entry(main, frames)]})


def wait_for_every_rank(rank):
    """Every rank has imported torch: each writes its file, then looks for the others'."""
    path = sys.argv[1] + ".imported%d" % rank
    open(path, "w").close()
    deadline = time.monotonic() + MAX_START_SECONDS
    while not all(os.path.exists(sys.argv[1] + ".imported%d" % i) for i in range(RANKS)):
        if time.monotonic() > deadline:
            _truth.fail("rank %d: the other ranks did not start within %.0f s"
                        % (rank, MAX_START_SECONDS))
        time.sleep(POLL_SECONDS)


def rank_main():
    die_with_parent()
    progress_s = float(sys.argv[4])
    import torch
    import torch.distributed as dist
    from torch.autograd import graph
    from torch.nn.parallel import DistributedDataParallel

    rank = int(os.environ["RANK"])
    wait_for_every_rank(rank)
    # No collective may time out while the test looks at the job.
    dist.init_process_group("gloo", timeout=datetime.timedelta(hours=1))
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(4, 1))
    dist.barrier()
    stall_at = time.monotonic() + progress_s
    if rank != STALLED:
        threading.Thread(target=watch_backward, name="truth", daemon=True, args=(
            rank, threading.main_thread(), graph._engine_run_backward.__code__,
            stall_at)).start()
    while True:
        train_step(model, rank, torch, stall_at)
        STEPS[0] += 1


# --- the launcher ------------------------------------------------------------------------


def launch():
    progress_s = sys.argv[3] if len(sys.argv) > 3 else "6"
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    # --standalone: a rendezvous store of its own on a free port of localhost. The shell
    # waits for torchrun (not exec: the shell stays the job's root).
    command = 'sleep %d; "$@"; exit $?' % SHELL_SLEEP_SECONDS
    shell = subprocess.Popen(
        ["/bin/sh", "-c", command, "sh", torchrun, "--standalone", "--nnodes=1",
         "--nproc_per_node=%d" % RANKS, "--max_restarts=0", os.path.abspath(__file__),
         sys.argv[1], sys.argv[2], "rank", progress_s],
        stdin=subprocess.DEVNULL, env=env, preexec_fn=die_with_parent)
    _truth.write_truth({"scenario": "watch_torch", "pid": os.getpid(), "shell_pid": shell.pid,
                        "ranks": RANKS, "stalled": STALLED, "progress_seconds":
                        float(progress_s), "running": True})
    while shell.poll() is None:
        time.sleep(POLL_SECONDS)
    _truth.fail("the job's shell exited with %r" % shell.returncode)


if __name__ == "__main__":
    if sys.argv[3:4] == ["rank"]:
        rank_main()
    else:
        launch()

#!/usr/bin/env python3
"""Benchmark `--native` where the native code is big (issue 39): a PyTorch training loop on
the CPU, stopped inside its backward pass (bench/torch_train.py, run by the torch venv's
python from tools/torch.sh: pyenv 3.12.1, torch from PyPI), whose stack runs through
libtorch_cpu.so (448 MB: 545,000 symbols, 350,000 FDEs) and libtorch_python.so.

Side by side in one run, each the best of RUNS after a warm-up run of each, the tools taking
turns:

  live   pyunwind pid P --native --json    pystack remote P --native    py-spy dump --pid P --native
  core   pyunwind core C --native --json   pystack core C PYTHON --native      (C: a gcore core)

Every run's output is checked before it counts: the main thread's Python frames (function,
file, line; our qualified names compared by their last part) must be pystack's, innermost
first, and its native frames must include the autograd engine's
(`torch::autograd::Engine::evaluate_function`, mangled or not). py-spy's Python frames are
checked the same way (function and line).

Targets: ours at most a third of the faster peer's time, live and from the core (a speed-up of
at least 3x); the moonshot (10x, and under 50 ms) is printed, not required. `--also CLI` times
another build of pyunwind (one of main, say) in the same turns, with no target.

Exit status (bench/verdicts.py): 0 when every measurement was made and every target met; 1
otherwise, each problem on a `bench: ...` line at the end; 2 for a usage or set-up problem.
Stdlib only.
"""

import argparse
import json
import os
import pathlib
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from verdicts import Verdicts

ROOT = pathlib.Path(__file__).resolve().parent.parent
CLI = pathlib.Path(os.environ.get("PYUNWIND_CLI") or ROOT / "target" / "release" / "pyunwind")
SCENARIO = ROOT / "bench" / "torch_train.py"
RUNS = 3
TARGET_SPEEDUP = 3.0
MOONSHOT_SPEEDUP = 10.0
MOONSHOT_S = 0.05
READY_TIMEOUT_S = 300.0
TOOL_TIMEOUT_S = 120.0
GCORE_TIMEOUT_S = 300.0
# The autograd engine's C++ function every tool must show on the main thread.
ENGINE = "evaluate_function"
ENGINE_MANGLED = "Engine17evaluate_function"

# pystack:  '    (Python) File "/x/torch_train.py", line 23, in block_forever'
PYSTACK_FRAME = re.compile(r'^\s*\(Python\) File "([^"]*)", line (\d+), in (\S+)')
PYSTACK_THREAD = re.compile(r"^Traceback for thread (\d+)")
# py-spy:  '    block_forever (torch_train.py:23)' (native: '    read (libc.so.6)')
PYSPY_FRAME = re.compile(r"^\s+(\S.*) \(([^()]*\.py):(\d+)\)$")
PYSPY_THREAD = re.compile(r"^Thread (?:0x)?([0-9a-fA-F]+)")


class Failure(Exception):
    pass


def last(name):
    """`Tensor.backward` -> `backward`: our qualified names against pystack's code names."""
    return name.rsplit(".", 1)[-1] if name and not name.startswith("<") else name


def ours_frames(out, pid):
    """(Python frames as (function, file, line), whether the engine's frame is there) of the
    main thread of our JSON report."""
    try:
        report = json.loads(out)
    except ValueError as e:
        raise Failure(f"not one JSON object: {e}")
    for t in report.get("threads") or []:
        if t.get("native_id") == pid:
            frames = t.get("frames") or []
            python = [(last(f.get("function")), f.get("file"), f.get("line"))
                      for f in frames if f.get("kind") == "python"]
            engine = any(ENGINE in (f.get("function") or "") or ENGINE_MANGLED in
                         (f.get("symbol") or f.get("function") or "")
                         for f in frames if f.get("kind") == "native")
            return python, engine
    raise Failure(f"no thread {pid} in the report")


def pystack_frames(out, pid):
    frames, engine, inside = [], False, False
    for line in out.splitlines():
        m = PYSTACK_THREAD.match(line)
        if m:
            inside = int(m.group(1)) == pid
            continue
        if not inside:
            continue
        m = PYSTACK_FRAME.match(line)
        if m:
            frames.append((m.group(3), m.group(1), int(m.group(2))))
        elif "(C)" in line and ENGINE in line:
            engine = True
    if not frames:
        raise Failure(f"no Python frames for thread {pid}")
    return frames[::-1], engine  # pystack prints the innermost last


def pyspy_frames(out, pid):
    frames, engine, inside = [], False, False
    for line in out.splitlines():
        m = PYSPY_THREAD.match(line)
        if m:
            # Its native id, or where py-spy has none, its pthread id: then by name.
            inside = m.group(1) == str(pid) or '"MainThread"' in line
            continue
        if not inside:
            continue
        m = PYSPY_FRAME.match(line)
        if m:
            frames.append((last(m.group(1)), m.group(2), int(m.group(3))))
        elif ENGINE in line:
            engine = True
    if not frames:
        raise Failure(f"no Python frames for thread {pid}")
    return frames, engine


def check(name, got, truth, files=True):
    """`got`'s Python frames are `truth`'s (without files: py-spy shortens them), and the
    engine's native frame is there."""
    python, engine = got
    if not files:
        python = [(f, None, line) for f, _, line in python]
        truth = [(f, None, line) for f, _, line in truth]
    if python != truth:
        raise Failure(f"{name}: Python frames {python} differ from pystack's {truth}")
    if not engine:
        raise Failure(f"{name}: no native frame of the autograd engine ({ENGINE})")


def run(argv, timeout=TOOL_TIMEOUT_S):
    start = time.perf_counter()
    try:
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                           timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        raise Failure(f"no answer after {timeout:.0f} s: {' '.join(map(str, argv))}")
    elapsed = time.perf_counter() - start
    out = p.stdout.decode("utf-8", "replace")
    if p.returncode != 0:
        tail = p.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
        raise Failure(f"exit {p.returncode}: {' '.join(map(str, argv))}: {' | '.join(tail)}")
    return elapsed, out


def start_training(python):
    proc = subprocess.Popen([python, "-W", "ignore", str(SCENARIO)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    deadline = time.monotonic() + READY_TIMEOUT_S
    line = b""
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or proc.poll() is not None:
            err = proc.stderr.read().decode("utf-8", "replace") if proc.poll() is not None else ""
            stop(proc)
            raise SystemExit(f"bench: torch_train.py not ready: {err.strip()[-500:]}")
        ready, _, _ = select.select([proc.stdout], [], [], min(left, 1.0))
        if ready:
            line += os.read(proc.stdout.fileno(), 1)
    word, pid = line.decode().split()
    assert word == "ready" and int(pid) == proc.pid, line
    # The hook blocks in os.read(0) on the main thread; give the intra-op threads a moment to
    # go idle too.
    time.sleep(1.0)
    return proc


def stop(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def side_by_side(tools, verdicts, where):
    """{name: best seconds or None}; each tool run once untimed, then RUNS times in turns."""
    best = {name: None for name, _, _ in tools}
    failed = set()
    for round_ in range(RUNS + 1):
        for name, argv, checker in tools:
            if name in failed:
                continue
            try:
                elapsed, out = run(argv)
                checker(out)
            except Failure as e:
                failed.add(name)
                what = f"{name} {where}"
                if name.startswith(("ours", "also")):
                    verdicts.failed(what, str(e))
                else:
                    verdicts.not_measured(what, str(e))
                continue
            if round_ > 0:
                best[name] = elapsed if best[name] is None else min(best[name], elapsed)
    return best


def fmt(s):
    return "-" if s is None else f"{s:.3f} s"


def ratio(a, b):
    return None if a is None or b is None else a / max(b, 0.001)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-core", action="store_true", help="measure the live process only")
    parser.add_argument("--also", metavar="CLI", default=None,
                        help="another build of pyunwind to time beside ours (e.g. one of main), "
                        "checked and timed the same way, with no target")
    args = parser.parse_args()
    cache = pathlib.Path(os.environ.get("PYUNWIND_CACHE") or pathlib.Path.home() / ".cache/pyunwind")
    venv = cache / "bench-venv" / "bin"
    pystack, pyspy = venv / "pystack", venv / "py-spy"
    for need in (CLI, pystack, pyspy):
        if not need.exists():
            print(f"bench: missing {need} (make build; bash bench/setup.sh)", file=sys.stderr)
            return 2
    torch_sh = subprocess.run(["bash", str(ROOT / "tools" / "torch.sh")], capture_output=True,
                              text=True)
    if torch_sh.returncode != 0:
        print(f"bench: tools/torch.sh failed: {torch_sh.stderr.strip()[-500:]}", file=sys.stderr)
        return 2
    python = torch_sh.stdout.strip().splitlines()[-1]
    verdicts = Verdicts()
    proc = start_training(python)
    pid = proc.pid
    core_dir = tempfile.mkdtemp(prefix="bench-torch-", dir=cache)
    try:
        truth = pystack_frames(run([pystack, "remote", str(pid), "--native"])[1], pid)[0]
        print(f"bench: torch_train.py pid {pid}, {len(truth)} Python frames on the main thread; "
              f"best of {RUNS}, in turns", flush=True)
        also = []
        if args.also:
            also = [("also pid --native --json", [args.also, "pid", str(pid), "--native", "--json"],
                     lambda out: check("also", ours_frames(out, pid), truth))]
        live = side_by_side(also + [
            ("ours pid --native --json", [CLI, "pid", str(pid), "--native", "--json"],
             lambda out: check("ours", ours_frames(out, pid), truth)),
            ("pystack remote --native", [pystack, "remote", str(pid), "--native"],
             lambda out: check("pystack", pystack_frames(out, pid), truth)),
            ("py-spy dump --native", [pyspy, "dump", "--pid", str(pid), "--native"],
             lambda out: check("py-spy", pyspy_frames(out, pid), truth, files=False)),
        ], verdicts, "(live)")
        core = {}
        if not args.no_core:
            prefix = os.path.join(core_dir, "torch")
            subprocess.run(["gcore", "-o", prefix, str(pid)], capture_output=True,
                           timeout=GCORE_TIMEOUT_S, check=True)
            path = f"{prefix}.{pid}"
            size = os.path.getsize(path)
            print(f"bench: core {size / 1e9:.2f} GB", flush=True)
            also = []
            if args.also:
                also = [("also core --native --json", [args.also, "core", path, "--native", "--json"],
                         lambda out: check("also", ours_frames(out, pid), truth))]
            core = side_by_side(also + [
                ("ours core --native --json", [CLI, "core", path, "--native", "--json"],
                 lambda out: check("ours", ours_frames(out, pid), truth)),
                ("pystack core --native", [pystack, "core", path, python, "--native"],
                 lambda out: check("pystack", pystack_frames(out, pid), truth)),
            ], verdicts, "(core)")
    finally:
        stop(proc)
        shutil.rmtree(core_dir, ignore_errors=True)

    print()
    for name, s in list(live.items()) + list(core.items()):
        print(f"  {name:<28} {fmt(s):>9}")
    print()
    ours = live["ours pid --native --json"]
    peers = [s for n, s in live.items() if n.startswith(("pystack", "py-spy")) and s is not None]
    faster = min(peers) if len(peers) == 2 else None
    results = [("pid --native --json vs the faster of pystack and py-spy", ours, faster,
                "pystack or py-spy not measured")]
    if not args.no_core:
        results.append(("core --native --json vs pystack core --native",
                        core["ours core --native --json"], core["pystack core --native"],
                        "pystack core not measured"))
    for what, mine, theirs, why in results:
        speedup = ratio(theirs, mine)
        word = verdicts.at_least(what, speedup, TARGET_SPEEDUP, "%.1fx",
                                 why_not=None if mine is not None else "ours failed" if
                                 theirs is not None else why)
        moon = (speedup is not None and speedup >= MOONSHOT_SPEEDUP and mine < MOONSHOT_S)
        print(f"{what}: {fmt(mine)} vs {fmt(theirs)}: "
              + ("-" if speedup is None else f"{speedup:.1f}x")
              + f" (target >= {TARGET_SPEEDUP:.0f}x): {word}; moonshot "
              f"(>= {MOONSHOT_SPEEDUP:.0f}x, < {MOONSHOT_S * 1000:.0f} ms): "
              + ("met" if moon else "not met"))
    return verdicts.finish()


if __name__ == "__main__":
    sys.exit(main())

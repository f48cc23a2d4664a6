#!/usr/bin/env python3
"""Benchmark `pyunwind core CORE --greenlets` on cores of many suspended greenlets (the target:
100,000 suspended greenlets in a core are listed in under 1 s, and the time grows linearly).

For pyenv's 3.12 and Debian sid's 3.14 (stripped, debug info hidden), with greenlet from
tools/greenlet.sh's `latest` set, and N = 10,000 and 100,000, this file runs itself as the
program (see `program`): N greenlets, each suspended DEPTH calls deep (`descend`, then a switch
to its parent, the main greenlet); the program records what it made (how many greenlets the
collector tracks, and each suspended one's frames, read from its `gr_frame`), signals ready and
blocks. It is dumped with gcore, then on that core, best of REPEAT (wall clock):

  plain        target/release/pyunwind core CORE --json
  --greenlets  target/release/pyunwind core CORE --greenlets --json

Each --greenlets run is checked against the program's record: every greenlet listed (N + 1),
N of them suspended, each with exactly the frames the program recorded for it (function and
line, innermost first), not truncated, and the main greenlet running. The table gives both
times, the greenlet cost beyond plain (also per greenlet), and the ratio of the 100k time to
the 10k time (linear growth: about 10x). Stdlib only; exit status (bench/verdicts.py) 1 when a
run fails or the target is missed, each problem named on a `bench: FAILED|MISSED: ...` line at
the end.

    python3 bench/greenlets.py                 the benchmark
    python greenlets.py TRUTH FIFO program N   the program (run by the benchmark)
"""

import gc
import json
import os
import sys
import threading
import time

from verdicts import Verdicts

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH_DIR)

DEPTH = 3  # descend(3) -> descend(2) -> descend(1) -> descend(0), then the switch
INTERPS = ("pyenv-3.12", "debian-3.14")
SCALE = (10000, 100000)
REPEAT = 3
TIMEOUT = 300
TARGET_S = 1.0
READY_TIMEOUT = 600


# --- the program ----------------------------------------------------------------------------

def descend(n, home):
    if n == 0:
        home.switch()  # every greenlet parks here
        return
    descend(n - 1, home)


def program(n):
    """Make n suspended greenlets, record them, signal ready and block."""
    sys.path.insert(0, os.path.join(REPO, "tests", "scenarios"))
    import _truth
    sys.path.insert(0, os.environ["PYUNWIND_GREENLET"])
    import greenlet

    home = greenlet.getcurrent()
    keep = []
    for _ in range(n):
        g = greenlet.greenlet(descend)
        g.switch(DEPTH, home)
        keep.append(g)
    # The truth: every greenlet the collector tracks, and each suspended one's frames (as
    # (function, line) pairs, innermost first), grouped by shape to keep the file small.
    tracked = [o for o in gc.get_objects() if isinstance(o, greenlet.greenlet)]
    shapes, suspended = {}, {}
    for g in tracked:
        if g is home:
            continue
        if not g or g.gr_frame is None:
            _truth.fail("greenlet %#x is not suspended" % id(g))
        frames = tuple((f["function"], f["line"]) for f in _truth.frames_from(g.gr_frame))
        suspended[str(id(g))] = shapes.setdefault(frames, len(shapes))
    truth = {"pid": os.getpid(), "python": sys.version.split()[0],
             "greenlet_version": greenlet.__version__,
             "greenlets": len(tracked), "main": id(home),
             "shapes": [[list(f) for f in frames] for frames, _ in
                        sorted(shapes.items(), key=lambda kv: kv[1])],
             "suspended": suspended,
             "threads": [{"native_id": threading.get_native_id()}]}
    _truth.write_truth(truth); _truth.HELD.acquire()  # noqa: E702


# --- the benchmark --------------------------------------------------------------------------

def timed(argv, check):
    """Best of REPEAT wall-clock runs of argv; every run's output goes through check(stdout),
    which raises Failure."""
    import subprocess
    best = None
    for _ in range(REPEAT):
        start = time.monotonic()
        p = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT)
        took = time.monotonic() - start
        if p.returncode != 0:
            raise Failure("%s: exit %d\n%s" % (" ".join(argv), p.returncode, p.stderr[-2000:]))
        check(p.stdout)
        best = took if best is None else min(best, took)
    return best


class Failure(Exception):
    pass


def check_plain(truth):
    def check(out):
        report = json.loads(out)
        if not report.get("threads"):
            raise Failure("plain: no threads in the report")
        if "greenlets" in report:
            raise Failure("plain: the report lists greenlets without --greenlets")
    return check


def check_greenlets(truth):
    want_suspended = truth["suspended"]
    shapes = [[tuple(f) for f in frames] for frames in truth["shapes"]]

    def check(out):
        report = json.loads(out)
        listed = report.get("greenlets")
        if listed is None:
            raise Failure("--greenlets: no `greenlets` in the report (errors: %r)"
                          % report.get("errors"))
        if len(listed) != truth["greenlets"]:
            raise Failure("--greenlets: %d greenlets listed, the program tracks %d"
                          % (len(listed), truth["greenlets"]))
        seen = 0
        for g in listed:
            if g["truncated"]:
                raise Failure("--greenlets: greenlet %#x truncated" % g["address"])
            if g["address"] == truth["main"]:
                if not g["main"] or g["state"] != "running":
                    raise Failure("--greenlets: main greenlet %r" % {k: g[k] for k in g
                                                                     if k != "frames"})
                continue
            shape = want_suspended.get(str(g["address"]))
            if shape is None or g["state"] != "suspended" or g["parent"] != truth["main"]:
                raise Failure("--greenlets: unexpected greenlet %r"
                              % {k: g[k] for k in g if k != "frames"})
            frames = [(f.get("function"), f.get("line")) for f in g["frames"]
                      if f["kind"] == "python"]
            if frames != shapes[shape]:
                raise Failure("--greenlets: greenlet %#x has frames %r, the program recorded %r"
                              % (g["address"], frames, shapes[shape]))
            seen += 1
        if seen != len(want_suspended):
            raise Failure("--greenlets: %d suspended greenlets, the program made %d"
                          % (seen, len(want_suspended)))
    return check


def greenlet_dir(harness, interp):
    path = harness.cache_dir() / "greenlet" / "latest" / ("cp3%d" % interp.minor)
    if not (path / "STAMP").is_file():
        raise harness.HarnessError("%s is missing: run tools/greenlet.sh (tools/test-env.sh)"
                                   % path)
    return str(path)


def main():
    import subprocess
    sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
    import harness

    cli = str(harness.cli_path())
    if not os.access(cli, os.X_OK):
        print("no CLI at %s (make build)" % cli)
        return 1
    rows, verdicts = [], Verdicts()
    for interp in harness.pick(INTERPS):
        for n in SCALE:
            what = "%s N=%d" % (interp.id, n)
            try:
                rows.append(measure(harness, interp, n, cli))
            except (Failure, harness.HarnessError, subprocess.TimeoutExpired) as e:
                verdicts.failed(what, e, detail=e)

    print("greenlets: `pyunwind core CORE --greenlets --json` on a gcore core of N suspended "
          "greenlets (each %d Python frames deep), best of %d, every greenlet and its frames "
          "checked against the program's own record" % (DEPTH + 1, REPEAT))
    print("peers: none (pystack and py-spy cannot list greenlets out of process)")
    head = ("python", "N", "core MiB", "plain --json", "--greenlets --json", "beyond plain",
            "per greenlet", "target < %.0f s" % TARGET_S)
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    by_interp = {}
    for iid, n, size, plain, glets, depth, version in rows:
        by_interp.setdefault(iid, {})[n] = (plain, glets)
        verdict = ""
        if n == SCALE[-1]:
            verdict = verdicts.under("%s: %d suspended greenlets listed" % (iid, n), glets,
                                     TARGET_S, "%.3f s")
        print("| %s (greenlet %s) | %d | %.0f | %.3f s | %.3f s | %.3f s | %.2f µs | %s |"
              % (iid, version, n, size / 2**20, plain, glets, glets - plain,
                 (glets - plain) / n * 1e6, verdict))
    for iid, times in by_interp.items():
        if all(n in times for n in SCALE):
            lo, hi = times[SCALE[0]], times[SCALE[-1]]
            print("| %s | ratio %dk/%dk | | %.1fx | %.1fx | %.1fx | | linear: about %dx |"
                  % (iid, SCALE[-1] // 1000, SCALE[0] // 1000, hi[0] / lo[0], hi[1] / lo[1],
                     (hi[1] - hi[0]) / max(lo[1] - lo[0], 1e-6), SCALE[-1] // SCALE[0]))
    print("target: %d suspended greenlets listed in under %.0f s, on %s"
          % (SCALE[-1], TARGET_S, " and ".join(INTERPS)))
    return verdicts.finish()


def measure(harness, interp, n, cli):
    """One row: (interpreter, N, core size, plain and --greenlets seconds, depth, greenlet's
    version). Raises Failure."""
    env = {"PYUNWIND_GREENLET": greenlet_dir(harness, interp)}
    with harness.Scenario(interp, "bench-greenlets", script=os.path.abspath(__file__),
                          args=("program", n), env=env, timeout=READY_TIMEOUT) as s:
        truth = s.truth
        if truth["greenlets"] != n + 1 or len(truth["suspended"]) != n:
            raise Failure("the program made %d greenlets" % truth["greenlets"])
        core = s.make_core()
        size = os.path.getsize(core)
        # Written back before timing: the reader, not the write-back of the core gcore just
        # wrote, is what is measured.
        os.sync()
        try:
            plain = timed([cli, "core", core, "--json"], check_plain(truth))
            glets = timed([cli, "core", core, "--greenlets", "--json"], check_greenlets(truth))
        finally:
            os.unlink(core)
    depth = len(truth["shapes"][0]) if len(truth["shapes"]) == 1 else None
    return (interp.id, n, size, plain, glets, depth, truth["greenlet_version"])


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[3] == "program":
        program(int(sys.argv[4]))
    else:
        sys.exit(main())

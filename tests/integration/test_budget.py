"""The per-stop budget (src/cpython/budget.rs) and the walks' caps on a real core: 5 threads of
250,100 Python frames each (1.25 million, past the budget of 1,000,000 frames a stop decodes)
give exactly 1,000,000 frames, `truncated: true` on every cut thread, one error entry per cut
naming the cap and where, and a peak RSS of the CLI under the bound docs/command-line.md states.
"""

import json

import harness

INTERP = harness.pick(["pyenv-3.12"])[0]
THREADS = 5
DEPTH = 250_100
MAX_FRAMES = 250_000            # src/cpython/frames.rs
MAX_FRAMES_PER_STOP = 1_000_000  # src/cpython/budget.rs
# docs/command-line.md, "Bounded memory": the CLI's peak memory on any input.
MAX_CLI_RSS_BYTES = 2 << 30

PAYLOAD = """\
import sys, threading, time
sys.setrecursionlimit(%(depth)d + 1000)
ready = threading.Barrier(%(threads)d + 1)

def deep(n):
    if n == 0:
        ready.wait()
        time.sleep(600)
    deep(n - 1)

for _ in range(%(threads)d):
    threading.Thread(target=deep, args=(%(depth)d,), daemon=True).start()
ready.wait()
print("ready", flush=True)
time.sleep(600)
"""


def test_budget_cuts_a_huge_stop_and_says_where(tmp_path):
    payload = tmp_path / "deep.py"
    payload.write_text(PAYLOAD % {"depth": DEPTH, "threads": THREADS})
    core = harness.payload_core(INTERP.exe, payload, tmp_path / "deep", INTERP.env)
    maxrss, out = harness.cli_peak_rss(["core", core, "--json"], tmp_path)
    assert maxrss < MAX_CLI_RSS_BYTES, maxrss
    report = json.loads(out)
    core.unlink()

    threads = report["threads"]
    assert len(threads) == THREADS + 1
    assert sum(len(t["frames"]) for t in threads) == MAX_FRAMES_PER_STOP
    main, workers = threads[0], threads[1:]
    assert not main["truncated"] and main["frames"][-1]["function"] == "<module>"
    # Threads in the order they are decoded: full ones cut at MAX_FRAMES, then the one the
    # budget ran out in, then those with no frame left.
    left = MAX_FRAMES_PER_STOP - len(main["frames"])
    whats = [e["what"] for e in report["errors"]]
    for t in workers:
        want = min(MAX_FRAMES, left)
        left -= want
        assert t["truncated"] and len(t["frames"]) == want, (len(t["frames"]), want)
        assert all(f["function"] == "deep" for f in t["frames"][:want])
        cap = ("250000 frames in one thread" if want == MAX_FRAMES
               else "1000000 frames per stop")
        line = "thread %d: frame walk: stopped at the limit of %s at " % (t["native_id"], cap)
        entries = [w for w in whats if w.startswith(line)]
        assert len(entries) == 1, (line, whats)
        # Where: the first frame not walked (below the last one shown, or the innermost).
        addr = int(entries[0][len(line):], 16)
        assert addr != 0 and addr not in {f["address"] for f in t["frames"]}
    assert len(whats) == THREADS, whats
    print("peak RSS %.0f MiB" % (maxrss / 2**20))

"""The merged call tree (`--tree`) and the straggler verdict (`--group --why` over several
processes), issue 38 items 1, 2 and 5: live (`pid --children`), from gcore cores (`core C...`)
and from saved reports (`merge --tree --why`).

Scenarios, each process recording its own truth:

- tests/scenarios/spawn_barrier.py: a `multiprocessing` job started with the spawn method,
  five ranks meeting at a shared `multiprocessing.Barrier` in `all_reduce` (even ranks through
  `wait_even`, odd ones through `wait_odd`, on the same line of `all_reduce`), rank 2 stalled
  in `load_shard` (`time.sleep`). Each rank's recorder thread samples its main thread's stack
  once it is blocked; the parent records its own and the resource tracker's pid (the one
  Python process of the job's tree that records no truth).
- tests/scenarios/ranks.py: a launcher of six plain Python ranks (even and odd ranks wait on
  two lines of `allreduce`, rank 3 in `load_batch`).

Every expectation is computed from those truths: the tree (each node's function, file, line,
count of threads and of processes, and the threads that end there), the verdict's majority
(the longest stack prefix the ranks other than the straggler share, as the scenario places
them) and its one outlier (the straggler, with its frames from its innermost one out to where
it leaves the majority). The checks are shown to fail on altered copies of what the CLI printed.
"""

import collections
import copy
import json
import os
import socket

import pytest

import harness
from test_many import cli, json_lines  # the CLI run and its output checked as there
from test_why_state import core_syscalls, proc_syscall

HOST = socket.gethostname()
# The bound for `merge` of 1,000 saved rank reports (issue 38, item 5).
SYNTH_RANKS = 1000
# The words the verdict's text gives a kind of wait, where they are not the kind itself
# (docs/report.md, "The straggler verdict").
WAIT_WORDS = {"sleep": "sleeping", "native": "in native code", "gil": "waiting for the GIL",
              "child": "waiting for a child", "socket": "on a socket", "pipe": "on a pipe",
              "file": "on a file", "fd": "on a file descriptor"}
STATE_WORDS = {"gil_wait": "waiting for the GIL", "gc": "collecting garbage",
               "loop_idle": "idle in its event loop"}


def words(state, syscall, waiting, call=None, library=None):
    """A thread's state in the verdict's words; for the majority's, where in library code it
    waits after them: a native wait's C function, else the library (docs/report.md)."""
    if waiting:
        out = WAIT_WORDS.get(waiting, waiting)
    elif state == "syscall":
        out = "in %s" % syscall if syscall else "in a system call"
    else:
        out = STATE_WORDS.get(state, state)
    if call:
        return "%s %s" % (out, call)
    return "%s (%s)" % (out, library) if library else out


def library_of(path):
    """The library a frame's file is in (docs/report.md, "The straggler verdict"): the first
    name under the interpreter's own lib/pythonX.Y, a site-packages or a dist-packages, or a
    frozen module's; None for the application's code."""
    if path.startswith("<frozen ") and path.endswith(">"):
        return path[len("<frozen "):-1].split(".")[0]
    parts = path.split("/")
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] in ("site-packages", "dist-packages") and i + 1 < len(parts):
            return parts[i + 1].removesuffix(".py")
    for i in range(len(parts) - 2):
        ver = parts[i + 1].removeprefix("python").removesuffix("t")
        if (parts[i] == "lib" and parts[i + 1].startswith("python")
                and len(ver.split(".")) == 2 and all(x.isdigit() for x in ver.split("."))):
            return parts[i + 2].removesuffix(".py")
    return None


def why_of(thread):
    """A thread's (state, syscall, waiting kind, native wait's function, library of its
    innermost Python frame) from its `--why --json` report."""
    w = thread["waiting"] or {}
    inner = next((f for f in thread["frames"] if f["kind"] == "python"), None)
    return (thread["state"], thread["syscall"], w.get("kind"),
            w.get("function") if w.get("kind") == "native" else None,
            library_of(inner["file"]) if inner else None)


# --- the truths ------------------------------------------------------------------------------


def processes(sc):
    """[(host, pid, truth threads)] of the launcher and every rank, in pid order."""
    out = [(HOST, sc.pid, sc.truth["threads"])]
    out += [(HOST, r["pid"], r["truth"]["threads"]) for r in sc.truth["ranks"]]
    return sorted(out, key=lambda p: p[1])


def frame_key(f, by_line=True):
    return (f["function"], f["file"], f["line"] if by_line else None)


def node_key(f, by_line=True):
    """A tree node's key for a truth frame: its kind (`python`, or a mark the test places:
    `truncated`, `unreadable`, `elided`), function, file and line."""
    return (f.get("kind", "python"),) + frame_key(f, by_line)


def expected_tree(procs, by_line=True):
    """The tree the truths make: {key: node}, node = {"count", "processes": {(host, pid)},
    "threads": [member], "children": {key: node}}, keys (function, file, line) from the
    outermost frame in; with by_line False, lines are None (the CLI then shows a line only
    where all agree: `lines` holds each node's lines)."""
    top = {}
    for host, pid, threads in procs:
        for t in threads:
            level, node = top, None
            for f in reversed(t["frames"]):
                node = level.setdefault(node_key(f, by_line), {
                    "count": 0, "processes": set(), "threads": [], "children": {},
                    "lines": set()})
                node["count"] += 1
                node["processes"].add((host, pid))
                node["lines"].add(f["line"])
                level = node["children"]
            node["threads"].append((host, pid, t["native_id"], t["name"]))
    return top


def canon_expected(tree, by_line=True):
    return {(key[0], key[1], key[2], key[3] if by_line else
             (next(iter(n["lines"])) if len(n["lines"]) == 1 else None)):
            (n["count"], len(n["processes"]), sorted(n["threads"]),
             canon_expected(n["children"], by_line))
            for key, n in tree.items()}


def canon(nodes):
    """The CLI's JSON tree in the shape of canon_expected; asserts its own invariants on the
    way: branches biggest first, a node's count is its children's plus the threads ending at
    it, `threads` only where some end."""
    counts = [(n["count"], n["processes"]) for n in nodes]
    assert counts == sorted(counts, reverse=True), "branches not sorted by count: %r" % counts
    out = {}
    for n in nodes:
        key = (n["kind"], n["function"], n["file"], n["line"])
        assert key not in out, "two sibling nodes for %r" % (key,)
        threads = n.get("threads", [])
        assert "threads" not in n or threads, "an empty thread list"
        assert n["count"] == len(threads) + sum(c["count"] for c in n["children"]), n
        out[key] = (n["count"], n["processes"],
                    sorted((m["host"], m["pid"], m["native_id"], m["name"]) for m in threads),
                    canon(n["children"]))
    return out


def check_tree(nodes, procs, by_line=True):
    assert canon(nodes) == canon_expected(expected_tree(procs, by_line), by_line)


def without_process(nodes, pid):
    """A copy of the CLI's tree without process `pid`'s threads (a process of the job that
    records no truth): its members are taken out and the nodes its threads pass through
    counted down. Returns (tree, [its paths, each a list of (function, file, line) from the
    outermost frame])."""
    paths = []

    def walk(nodes, path):
        kept = []
        gone = 0
        for n in nodes:
            n = dict(n)
            here = path + [(n["function"], n["file"], n["line"])]
            children, below = walk(n["children"], here)
            mine = [m for m in n.get("threads", []) if m["pid"] == pid]
            paths.extend(here for _ in mine)
            left = [m for m in n.get("threads", []) if m["pid"] != pid]
            n["children"] = children
            if left:
                n["threads"] = left
            else:
                n.pop("threads", None)
            n["count"] -= below + len(mine)
            if below or mine:
                # One process's threads count it once.
                n["processes"] -= 1
            gone += below + len(mine)
            if n["count"]:
                kept.append(n)
        return kept, gone

    tree, _ = walk(nodes, [])
    return tree, paths


def rank_threads(sc):
    """{pid: main thread truth} of the ranks."""
    return {r["pid"]: r["truth"]["threads"][0] for r in sc.truth["ranks"]}


def outermost_first(thread):
    return [frame_key(f) for f in reversed(thread["frames"])]


def common_prefix(stacks):
    out = []
    for level in zip(*stacks):
        if any(s != level[0] for s in level):
            break
        out.append(level[0])
    return out


def group_frames(keys):
    """(function, file, line) keys, innermost first, as the verdict's frames."""
    return [{"kind": "python", "function": f, "file": p, "line": line}
            for f, p, line in reversed(keys)]


def expected_verdict(sc, whys, left_out, hosts=None):
    """The verdict the truths make: the ranks other than the straggler meet where their stacks
    stop being the same (the scenario splits them in halves below that frame, so no further
    frame holds a majority); the straggler is elsewhere from where its stack leaves theirs.
    `whys`: {pid: (state, syscall, waiting kind)} of each rank's main thread, from `--why`;
    `left_out`: the pids that are no rank."""
    straggler = sc.truth["ranks"][sc.truth["straggler"]]["pid"]
    return verdict_of(rank_threads(sc), straggler, whys, left_out)


def verdict_of(mains, straggler, whys, left_out, host=HOST):
    """The verdict of ranks whose main threads' truths are `mains` ({pid: thread}), all but
    `straggler` at one place: they meet where their stacks stop being the same, and the
    straggler is elsewhere from where its stack leaves theirs; `left_out`: the pids that are no
    rank."""
    others = [outermost_first(t) for p, t in mains.items() if p != straggler]
    meet = common_prefix(others)
    # The text names the innermost application frame of the majority's.
    frame = next((i for i, (_, path, _) in enumerate(reversed(meet))
                  if library_of(path) is None), 0)
    mine = outermost_first(mains[straggler])
    shared = len(common_prefix([meet, mine]))
    waits = {}
    for p in mains:
        if p != straggler:
            waits[whys[p]] = waits.get(whys[p], 0) + 1
    state, syscall, waiting = whys[straggler][:3]
    return {
        "ranks": len(mains),
        "majority": {"count": len(mains) - 1, "frames": group_frames(meet), "frame": frame,
                     "waits": [{"state": s, "syscall": c, "waiting": w, "call": f,
                                "library": lib, "count": n}
                               for (s, c, w, f, lib), n in sorted(waits.items(),
                                                                  key=lambda i: -i[1])]},
        "outliers": [{"host": host, "pid": straggler, "native_id": mains[straggler]["native_id"],
                      "name": "MainThread", "frames": group_frames(mine[shared:]),
                      "state": state, "syscall": syscall, "waiting": waiting}],
        "left_out": sorted(({"host": HOST, "pid": p} for p in left_out),
                           key=lambda e: e["pid"]),
    }


def check_verdict(verdict, want):
    got = dict(verdict, left_out=sorted(verdict["left_out"], key=lambda e: e["pid"]))
    assert got == want


def whys_of(reports):
    """{pid: why_of(its main thread)} of each report (`--why --json`)."""
    out = {}
    for r in reports:
        main = r["threads"][0]
        assert main["name"] == "MainThread"
        out[r["pid"]] = why_of(main)
    return out


def kernel_whys(sc, syscalls):
    """{pid: why_of's tuple} of each rank's main thread from outside the tool: the wait the rank
    recorded (its truth's `waits`), the system call the kernel shows it blocked in (`syscalls`:
    {pid: name}, from /proc or a core's NT_PRSTATUS notes; blocked in a call, its state is
    `syscall`), no native call (every wait is a Python one), and the library of its innermost
    recorded frame."""
    out = {}
    for r in sc.truth["ranks"]:
        main = r["truth"]["threads"][0]
        out[r["pid"]] = ("syscall", syscalls[r["pid"]], r["truth"]["waits"]["kind"], None,
                         library_of(main["frames"][0]["file"]))
    return out


def live_syscalls(pids):
    return {p: proc_syscall(p, p) for p in pids}


def cores_syscalls(cores):
    """{pid: system call} of each process's main thread, from its core (`cores`: {pid: path})."""
    return {p: core_syscalls(path)[p] for p, path in cores.items()}


def place(f):
    return "%s (%s:%d)" % (f["function"], os.path.basename(f["file"]), f["line"])


def verdict_line(v):
    m = v["majority"]
    (w,) = m["waits"]
    (o,) = v["outliers"]
    return ("%d of %d processes wait in %s: %s; pid %d (host %s) is elsewhere: %s, %s"
            % (m["count"], v["ranks"], place(m["frames"][m["frame"]]),
               words(w["state"], w["syscall"], w["waiting"], w["call"], w["library"]),
               o["pid"], o["host"],
               place(o["frames"][0]), words(o["state"], o["syscall"], o["waiting"])))


def shape(tree):
    """A canon tree's frames alone, without counts or threads."""
    return {key: shape(node[3]) for key, node in tree.items()}


def broken_trees(tree):
    """Altered copies of a tree that check_tree must refuse."""
    out = []
    b = copy.deepcopy(tree)
    b[0]["children"][0]["line"] += 1
    out.append(b)
    b = copy.deepcopy(tree)
    leaf = b[0]
    while leaf["children"]:
        leaf = leaf["children"][-1]
    leaf["threads"][0]["native_id"] += 1
    out.append(b)
    b = copy.deepcopy(tree)
    b[0]["count"] += 1
    b[0]["threads"] = [{"host": HOST, "pid": 1, "native_id": 1, "name": "x"}]
    out.append(b)
    # Two branches out of order: the first node with two children of different counts.
    b = copy.deepcopy(tree)
    stack = list(b)
    while stack:
        n = stack.pop()
        if len({c["count"] for c in n["children"]}) > 1:
            n["children"].reverse()
            out.append(b)
            break
        stack.extend(n["children"])
    assert len(out) == 4, "no node with two branches of different counts"
    return out


def broken_verdicts(verdict):
    out = []
    for path, value in ((("majority", "count"), 1), (("ranks",), 99)):
        b = copy.deepcopy(verdict)
        if len(path) == 1:
            b[path[0]] = value
        else:
            b[path[0]][path[1]] = value
        out.append(b)
    b = copy.deepcopy(verdict)
    b["majority"]["frames"].pop(0)
    out.append(b)
    b = copy.deepcopy(verdict)
    b["outliers"][0]["frames"][0]["line"] += 1
    out.append(b)
    b = copy.deepcopy(verdict)
    b["outliers"][0]["pid"] += 1
    out.append(b)
    return out


def gcore(sc, pid):
    prefix = sc.tmpdir / "rank"
    env = {k: v for k, v in os.environ.items() if k != "DEBUGINFOD_URLS"}
    rc, out, err = harness.run(["gcore", "-o", prefix, pid], harness.GCORE_TIMEOUT_SECONDS,
                               env=env)
    path = sc.tmpdir / ("rank.%d" % pid)
    if rc != 0 or not path.is_file():
        raise harness.HarnessError("gcore of pid %d failed: %s" % (pid, err))
    harness.refill_guarded_mappings(path, pid)
    return path


# --- a multiprocessing spawn job at a Barrier --------------------------------------------------


SPAWN_INTERPS = harness.pick(["pyenv-3.12", "debian-3.11", "pyenv-3.10", "pyenv-3.13"])


@pytest.mark.parametrize("interp", SPAWN_INTERPS, ids=lambda i: i.id)
def test_spawn_job_live_tree_and_verdict(interp):
    with harness.Scenario(interp, "spawn_barrier", timeout=90) as sc:
        tracker = sc.truth["tracker_pid"]
        ranks = sorted(rank_threads(sc))
        rc, out, err = cli("pid", sc.pid, *ranks, "--why", "--json")
        assert rc == 0, err
        whys = kernel_whys(sc, live_syscalls(ranks))
        assert whys_of(json_lines(out)[1:]) == whys
        straggler = sc.truth["ranks"][sc.truth["straggler"]]["pid"]
        assert whys[straggler][2] == "sleep", whys
        # The others wait at multiprocessing's Barrier: threading's `Barrier.wait` over a
        # multiprocessing Condition (its `wait_for`, `wait`, then a C `SemLock.acquire`); the
        # outermost library frame, `Barrier.wait`, names the wait and its object.
        for r in json_lines(out)[1:]:
            if r["pid"] == straggler:
                continue
            w = r["threads"][0]["waiting"]
            assert (w["kind"], w["type"], w["owner"]) == ("barrier", "Barrier", None), w
            f = r["threads"][0]["frames"][w["frame"]]
            assert (f["function"].rsplit(".", 1)[-1], os.path.basename(f["file"])) == (
                "wait", "threading.py"), f
            inner = [g["file"] for g in r["threads"][0]["frames"][:w["frame"]]]
            assert inner and all(x.endswith(("/threading.py", "/multiprocessing/synchronize.py"))
                                 for x in inner), inner

        rc, out, err = cli("pid", "--children", sc.pid, "--tree", "--why", "--json")
        assert rc == 0, err
        got = json.loads(out)
        assert got["failed"] == []
        assert got["reports"] == len(ranks) + 2
        # The resource tracker records no truth: its one thread is taken out of the tree,
        # after checking that it starts as the ranks' threads do (`python -c`).
        tree, paths = without_process(got["tree"], tracker)
        (path,) = paths
        assert path[0] == outermost_first(rank_threads(sc)[ranks[0]])[0]
        check_tree(tree, processes(sc))
        for b in broken_trees(tree):
            with pytest.raises(AssertionError):
                check_tree(b, processes(sc))
        want = expected_verdict(sc, whys, [sc.pid, tracker])
        check_verdict(got["verdict"], want)
        for b in broken_verdicts(got["verdict"]):
            with pytest.raises(AssertionError):
                check_verdict(b, want)
        assert want["majority"]["frames"][0]["function"] == "all_reduce"
        # The ranks wait inside multiprocessing (their innermost frame is synchronize.py's).
        assert [(w["call"], w["library"]) for w in want["majority"]["waits"]] == [
            (None, "multiprocessing")], want

        rc, text, err = cli("pid", "--children", sc.pid, "--tree", "--why")
        assert rc == 0, err
        lines = text.splitlines()
        assert lines[0] == verdict_line(got["verdict"])
        assert lines[0].startswith("%d of %d processes wait in all_reduce (spawn_barrier.py:%d): "
                                   "barrier (multiprocessing); "
                                   % (len(ranks) - 1, len(ranks),
                                      want["majority"]["frames"][0]["line"])), lines[0]
        assert lines[1] == ("2 other processes not counted as ranks (no thread starts as the "
                            "ranks' do): %s" % ", ".join(
                                "pid %d (host %s)" % (p, HOST) for p in sorted([sc.pid, tracker])))
        assert lines[3] == ("Call tree of %d threads over %d processes: outermost frames first, "
                            "each with how many threads pass through it"
                            % (got["threads"], got["reports"]))
        # The straggler's leaf: its innermost frame, indented by its depth, naming it.
        s = rank_threads(sc)[straggler]
        f = s["frames"][0]
        leaf = "%s1 %s (%s:%d): pid %d (host %s) thread %d \"MainThread\"" % (
            "  " * (len(s["frames"]) - 1), f["function"], f["file"], f["line"], straggler, HOST,
            s["native_id"])
        assert leaf in lines

        # --group --why: the same verdict first, then the groups.
        rc, text, err = cli("pid", "--children", sc.pid, "--group", "--why")
        assert rc == 0, err
        assert text.splitlines()[0] == verdict_line(got["verdict"])
        rc, out, err = cli("pid", "--children", sc.pid, "--group", "--why", "--json")
        assert rc == 0, err
        grouped = json.loads(out)
        check_verdict(grouped["verdict"], want)
        assert "tree" not in grouped


@pytest.mark.parametrize("interp", harness.pick(["pyenv-3.12", "debian-3.11"]),
                         ids=lambda i: i.id)
def test_spawn_job_cores_tree_and_verdict(interp):
    with harness.Scenario(interp, "spawn_barrier", timeout=90) as sc:
        ranks = sorted(rank_threads(sc))
        rc, out, err = cli("pid", sc.pid, *ranks, "--why", "--json")
        assert rc == 0, err
        assert whys_of(json_lines(out)[1:]) == kernel_whys(sc, live_syscalls(ranks))
        cores = [gcore(sc, pid) for pid in [sc.pid] + ranks]
        rc, out, err = cli("core", *cores, "--tree", "--why", "--json")
        assert rc == 0, err
        got = json.loads(out)
        assert got["failed"] == []
        check_tree(got["tree"], processes(sc))
        # A core shows the same states as the live process (its registers and notes).
        rc, out, err = cli("core", *cores[1:], "--why", "--json")
        assert rc == 0, err
        whys = kernel_whys(sc, cores_syscalls(dict(zip(ranks, cores[1:]))))
        assert whys_of(json_lines(out)) == whys
        check_verdict(got["verdict"], expected_verdict(sc, whys, [sc.pid]))


@pytest.mark.parametrize("interp", harness.pick(["pyenv-3.12"]), ids=lambda i: i.id)
def test_merge_of_a_thousand_rank_reports(interp, tmp_path):
    """1,000 saved rank reports, synthesized from the real ones of a live run (each rank's
    report copied under another host and pid, the straggler's once), merged: the same tree and
    verdict as the live run's, counted over a thousand ranks."""
    with harness.Scenario(interp, "spawn_barrier", timeout=90) as sc:
        ranks = sorted(rank_threads(sc))
        straggler = sc.truth["ranks"][sc.truth["straggler"]]["pid"]
        rc, out, err = cli("pid", *ranks, "--why", "--json")
        assert rc == 0, err
        reports = {r["pid"]: r for r in json_lines(out)}
        rc, out, err = cli("pid", *ranks, "--tree", "--why", "--json")
        assert rc == 0, err
        live = json.loads(out)
        kernel = kernel_whys(sc, live_syscalls(ranks))
    truths = rank_threads(sc)
    others = [p for p in ranks if p != straggler]
    synth, procs, whys, mains = [], [], {}, {}
    for i in range(SYNTH_RANKS):
        base = straggler if i == SYNTH_RANKS - 1 else others[i % len(others)]
        host, pid = "node%03d" % i, 200000 + i
        r = copy.deepcopy(reports[base])
        r["host"], r["pid"] = host, pid
        r["python"]["pid"] = pid
        synth.append(json.dumps(r, separators=(",", ":")))
        procs.append((host, pid, [t for t in
                                  next(x["truth"]["threads"] for x in sc.truth["ranks"]
                                       if x["pid"] == base)]))
        whys[pid] = kernel[base]
        mains[pid] = truths[base]
    saved = tmp_path / "ranks.json"
    saved.write_text("\n".join(synth) + "\n")
    # (make bench times this merge: bench/tree.py.)
    rc, out, err = cli("merge", saved, "--tree", "--why", "--json")
    assert rc == 0, err
    got = json.loads(out)
    assert (got["reports"], got["failed"]) == (SYNTH_RANKS, [])
    check_tree(got["tree"], procs)
    v = got["verdict"]
    last = 200000 + SYNTH_RANKS - 1
    check_verdict(v, verdict_of(mains, last, whys, [], host="node%03d" % (SYNTH_RANKS - 1)))
    # The live run's verdict, over a thousand ranks.
    assert v["majority"]["frames"] == live["verdict"]["majority"]["frames"]
    assert [w["count"] for w in v["majority"]["waits"]] == [SYNTH_RANKS - 1]
    assert [dict(w, count=0) for w in v["majority"]["waits"]] == \
        [dict(w, count=0) for w in live["verdict"]["majority"]["waits"]]
    (o,) = v["outliers"]
    (lo,) = live["verdict"]["outliers"]
    assert (o["host"], o["pid"]) == ("node%03d" % (SYNTH_RANKS - 1), 200000 + SYNTH_RANKS - 1)
    assert dict(o, host=None, pid=None) == dict(lo, host=None, pid=None)
    # And the live tree is the thousand ranks' tree, node for node, counted over five ranks.
    assert shape(canon(live["tree"])) == shape(canon(got["tree"]))
    assert truths[straggler]["frames"][0]["function"] == "load_shard"
    rc, text, err = cli("merge", saved, "--why")
    assert rc == 0, err
    assert text.splitlines()[0] == verdict_line(v)
    assert verdict_line(v).endswith("; pid %d (host node%03d) is elsewhere: %s, sleeping" % (
        last, SYNTH_RANKS - 1, place(o["frames"][0])))


# --- plain ranks of one launcher --------------------------------------------------------------


def test_ranks_live_tree_and_verdict(interp):
    with harness.Scenario(interp, "ranks") as sc:
        rc, out, err = cli("pid", "--children", sc.pid, "--why", "--json")
        assert rc == 0, err
        whys = kernel_whys(sc, live_syscalls(sorted(rank_threads(sc))))
        assert whys_of(json_lines(out)[1:]) == whys
        rc, out, err = cli("pid", "--children", sc.pid, "--tree", "--why", "--json")
        assert rc == 0, err
        got = json.loads(out)
        check_tree(got["tree"], processes(sc))
        want = expected_verdict(sc, whys, [sc.pid])
        check_verdict(got["verdict"], want)
        # Even and odd ranks part in allreduce, on two lines: the majority is in the frame
        # that calls it, train_step.
        assert want["majority"]["frames"][0]["function"] == "train_step"
        # By function, they meet in allreduce (its line left out: it differs).
        rc, out, err = cli("pid", "--children", sc.pid, "--tree", "--group-by", "function",
                           "--json")
        assert rc == 0, err
        by_function = json.loads(out)
        check_tree(by_function["tree"], processes(sc), by_line=False)
        assert "verdict" not in by_function


@pytest.mark.parametrize("interp", harness.pick(["pyenv-3.12", "pyenv-3.10-stripped"]),
                         ids=lambda i: i.id)
def test_ranks_verdict_by_function_from_cores(interp):
    with harness.Scenario(interp, "ranks") as sc:
        pids = [sc.pid] + sorted(rank_threads(sc))
        cores = [gcore(sc, pid) for pid in pids]
        rc, out, err = cli("core", *cores, "--group-by", "function", "--why", "--json")
        assert rc == 0, err
        v = json.loads(out)["verdict"]
        straggler = sc.truth["ranks"][sc.truth["straggler"]]["pid"]
        mains = rank_threads(sc)
        # By function, the five ranks meet in allreduce, whose lines differ.
        meet = common_prefix([[k[:2] for k in outermost_first(t)]
                              for p, t in mains.items() if p != straggler])
        assert meet[-1][0] == "allreduce"
        frames = [dict(kind="python", function=f, file=p) for f, p in reversed(meet)]
        # A node's line is shown where every thread through it has the same, the launcher's
        # and the straggler's included.
        paths = [outermost_first(t) for _, _, threads in processes(sc) for t in threads]
        lines = [{path[i][2] for path in paths
                  if len(path) > i and [k[:2] for k in path[:i + 1]] == meet[:i + 1]}
                 for i in range(len(meet))]
        for f, ls in zip(frames, reversed(lines)):
            if len(ls) == 1:
                f["line"] = ls.pop()
        # The straggler: its frames below where its stack leaves the majority's, by function,
        # each with its line; every rank's wait from its truth and its core's notes.
        mine = outermost_first(mains[straggler])
        shared = len(common_prefix([meet, [k[:2] for k in mine]]))
        whys = kernel_whys(sc, cores_syscalls(dict(zip(pids[1:], cores[1:]))))
        waits = collections.Counter(w for p, w in whys.items() if p != straggler)
        state, syscall, waiting = whys[straggler][:3]
        check_verdict(v, {
            "ranks": len(mains),
            "majority": {
                "count": len(mains) - 1, "frames": frames,
                "frame": next(i for i, f in enumerate(frames) if library_of(f["file"]) is None),
                "waits": [{"state": s, "syscall": c, "waiting": w, "call": f, "library": lib,
                           "count": n} for (s, c, w, f, lib), n in waits.most_common()]},
            "outliers": [{"host": HOST, "pid": straggler,
                          "native_id": mains[straggler]["native_id"], "name": "MainThread",
                          "frames": group_frames(mine[shared:]), "state": state,
                          "syscall": syscall, "waiting": waiting}],
            "left_out": [{"host": HOST, "pid": sc.pid}]})
        assert [(o["pid"], o["frames"][0]["function"]) for o in v["outliers"]] == \
            [(straggler, "load_batch")]


def test_one_process_has_no_verdict_and_tree_text_without_why():
    interp = harness.pick(["pyenv-3.12"])[0]
    with harness.Scenario(interp, "ranks") as sc:
        rc, out, err = cli("pid", sc.pid, "--group", "--why", "--json")
        assert rc == 0, err
        assert "verdict" not in json.loads(out)
        rc, text, err = cli("pid", "--children", sc.pid, "--tree")
        assert rc == 0, err
        lines = text.splitlines()
        assert lines[0].startswith("Call tree of 7 threads over 7 processes")
        # Every node's line: its count, its frame, and where threads end, who they are.
        want = []

        def walk(level, depth):
            for (func, file, line), n in level.items():
                s = "%s%d %s (%s:%d)" % ("  " * depth, n["count"], func, file, line)
                n = dict(n, children={k[1:]: c for k, c in n["children"].items()})
                if n["threads"]:
                    if len(n["threads"]) <= 3:
                        s += ": " + "; ".join(
                            "pid %d (host %s) thread %d \"%s\"" % (p, h, t, name)
                            for h, p, t, name in n["threads"])
                    else:
                        s += ": %d threads in %d processes" % (
                            len(n["threads"]), len({(h, p) for h, p, _, _ in n["threads"]}))
                want.append(s)
                walk(n["children"], depth + 1)

        walk({k[1:]: n for k, n in expected_tree(processes(sc)).items()}, 0)
        assert sorted(lines[1:]) == sorted(want)


# --- the caps and the marks: real stacks deeper than the tree's depth, and cut short ----------


# src/report/tree.rs: MAX_TREE_DEPTH, and the outermost frames a deeper stack keeps.
MAX_TREE_DEPTH = 120
OUTER_FRAMES = 60


def mark(kind):
    return {"kind": kind, "function": None, "file": None, "line": None}


@pytest.mark.parametrize("interp", harness.pick(["pyenv-3.11", "pyenv-3.12"]),
                         ids=lambda i: i.id)
def test_a_deep_stack_keeps_both_ends_around_an_elided_node(interp):
    with harness.Scenario(interp, "recursion") as sc:
        rc, out, err = cli("pid", sc.pid, "--tree", "--json")
        assert rc == 0, err
        rc, text, err = cli("pid", sc.pid, "--tree")
        assert rc == 0, err
    (main,) = sc.truth["threads"]
    frames = main["frames"]
    assert len(frames) > 2 * sc.truth["levels"] > MAX_TREE_DEPTH
    inner = MAX_TREE_DEPTH - OUTER_FRAMES - 1
    shown = frames[:inner] + [mark("elided")] + frames[-OUTER_FRAMES:]
    tree = json.loads(out)["tree"]
    check_tree(tree, [(HOST, sc.pid, [dict(main, frames=shown)])])
    lines = text.splitlines()
    assert len(lines) == 1 + MAX_TREE_DEPTH
    assert lines[1 + OUTER_FRAMES] == "%s1 (frames not shown: stacks deeper than %d frames keep " \
        "their %d outermost and %d innermost)" % ("  " * OUTER_FRAMES, MAX_TREE_DEPTH,
                                                  OUTER_FRAMES, inner)


def plain_gcore(sc, dest):
    """gcore as a user runs it: guarded mappings not refilled (test_truncation.py)."""
    env = {k: v for k, v in os.environ.items() if k != "DEBUGINFOD_URLS"}
    rc, out, err = harness.run(["gcore", "-o", dest, sc.pid], harness.GCORE_TIMEOUT_SECONDS,
                               env=env)
    path = "%s.%d" % (dest, sc.pid)
    assert rc == 0 and os.path.isfile(path), out + err
    return path


@pytest.mark.parametrize("interp", harness.pick(["debian-3.14"]), ids=lambda i: i.id)
def test_truncated_stacks_hang_under_their_own_top_node(interp, tmp_path):
    """Debian sid's 3.14 under glibc 2.41+: gcore writes zeros for the workers' guarded stack
    pages (test_truncation.py), so each worker's walk stops after `Thread.run`, truncated: its
    frames go under the `truncated` node, behind an `unreadable` one."""
    with harness.Scenario(interp, "threads") as sc:
        core = plain_gcore(sc, str(tmp_path / "plain"))
        rc, out, err = cli("core", core, "--tree", "--json")
        assert rc == 0, err
    main, workers = sc.truth["threads"][0], sc.truth["threads"][1:]
    threads = [main]
    for w in workers:
        run = [f["function"] for f in w["frames"]].index("Thread.run")
        threads.append(dict(w, frames=w["frames"][:run + 1] +
                            [mark("unreadable"), mark("truncated")]))
    tree = json.loads(out)["tree"]
    check_tree(tree, [(HOST, sc.pid, threads)])
    assert [n["kind"] for n in tree] == ["truncated", "python"]

"""Many processes in one run (issue 28): `pid PID...`, `pid --children PID`, `core CORE...`,
`--group` / `--group-by function` (with `--native`, `--async`), `--tree --async`
(`task_tree`), and `merge` of saved reports.

Scenarios, each process recording its own truth: tests/scenarios/ranks.py (a launcher of six
plain Python ranks, even ranks waiting in `allreduce` on one line, odd ranks on another, rank 3
the straggler still in `load_batch`), pool.py (a `multiprocessing.Pool`), prefork.py (a
gunicorn-style pre-fork server) and async_ranks.py (asyncio ranks, tasks grouped by their await
chains). Every expectation (each frame's function, file and line, which pids and tasks share a
group) is computed from those truths, never typed in.
"""

import copy
import json
import os
import pathlib
import socket
import subprocess

import pytest

import harness

HOST = socket.gethostname()
CLI_TIMEOUT_SECONDS = 120
# Live reads run on the whole matrix; cores (one gcore per rank) on a pyenv build, Debian's
# stripped 3.11 and a stripped libpython.
CORE_INTERPS = harness.pick(["pyenv-3.12", "debian-3.11", "pyenv-3.10-stripped"])


def cli(*args, input=None):
    """Runs the CLI; returns (rc, stdout, stderr). Every JSON document it prints (one per line
    for several targets) is checked against docs/report.schema.json."""
    proc = subprocess.run([str(harness.cli_path()), *map(str, args)], capture_output=True,
                          text=True, timeout=CLI_TIMEOUT_SECONDS, input=input,
                          stdin=None if input is not None else subprocess.DEVNULL)
    harness.assert_no_panic(proc.stderr, proc.returncode)
    if "--json" in args:
        for line in proc.stdout.splitlines():
            harness.check_report_schema(json.loads(line))
    return proc.returncode, proc.stdout, proc.stderr


def json_lines(out):
    return [json.loads(line) for line in out.splitlines()]


def stack(frames):
    """(function, file, line) per Python frame, innermost first."""
    return [(f["function"], f["file"], f["line"]) for f in frames if f["kind"] == "python"]


def truth_stack(truth):
    (thread,) = truth["threads"]
    assert thread["name"] == "MainThread"
    return [(f["function"], f["file"], f["line"]) for f in thread["frames"]]


def processes(sc):
    """{pid: truth} of the launcher and every rank."""
    out = {sc.pid: sc.truth}
    out.update({r["pid"]: r["truth"] for r in sc.truth["ranks"]})
    return out


def check_report(report, truth, pid):
    assert report["host"] == HOST
    assert report["pid"] == pid
    assert report["python"]["pid"] == pid
    assert report["errors"] == []
    (thread,) = report["threads"]
    assert (thread["native_id"], thread["name"]) == (pid, "MainThread")
    assert stack(thread["frames"]) == truth_stack(truth)


def expected_groups(truths, by_line=True):
    """Sets of pids with the same stack, by the truths; and their stacks."""
    groups = {}
    for pid, truth in truths.items():
        key = tuple(s if by_line else s[:2] for s in truth_stack(truth))
        groups.setdefault(key, set()).add(pid)
    return groups


def check_groups(grouped, truths, by_line=True):
    want = expected_groups(truths, by_line)
    assert grouped["reports"] == len(truths)
    assert grouped["threads"] == len(truths)
    got = {}
    for g in grouped["groups"]:
        key = tuple((f["function"], f["file"], f["line"]) if by_line
                    else (f["function"], f["file"]) for f in g["frames"])
        pids = {t["pid"] for t in g["threads"]}
        assert key not in got, "two groups with one stack: %r" % (key,)
        got[key] = pids
        assert g["count"] == len(g["threads"]) == g["processes"] == len(pids)
        assert g["outlier"] is (len(pids) == 1)
        assert {t["host"] for t in g["threads"]} == {HOST}
        assert all(t["name"] == "MainThread" and t["native_id"] == t["pid"]
                   for t in g["threads"])
        if not by_line:
            # Lines are shown where every member has the same one.
            for i, f in enumerate(g["frames"]):
                lines = {truth_stack(truths[p])[i][2] for p in pids}
                assert f.get("line") == (lines.pop() if len(lines) == 1 else None)
    assert got == want
    counts = [g["count"] for g in grouped["groups"]]
    assert counts == sorted(counts, reverse=True), "biggest group first"


def straggler_pid(sc):
    (pid,) = [r["pid"] for r in sc.truth["ranks"] if r["straggler"]]
    return pid


def rank_pids(sc):
    return [r["pid"] for r in sc.truth["ranks"]]


def gone_pid():
    """A pid no process has: one that just exited and was reaped."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    assert not os.path.exists("/proc/%d" % proc.pid)
    return proc.pid


# --- several live processes -------------------------------------------------------------------


def test_pids_each_with_its_own_report_and_a_bad_one_gets_an_error_line(interp):
    with harness.Scenario(interp, "ranks") as sc:
        truths = processes(sc)
        pids = rank_pids(sc)
        bad = gone_pid()
        args = pids[:2] + [bad] + pids[2:]
        rc, out, err = cli("pid", *args, "--json")
        assert rc == 1, err
        lines = json_lines(out)
        assert len(lines) == len(args)
        assert lines[2] == {"target": str(bad), "host": HOST, "pid": bad,
                            "error": "no process with pid %d" % bad}
        for pid, report in zip(pids, lines[:2] + lines[3:]):
            check_report(report, truths[pid], pid)

        rc, out, err = cli("pid", *pids)
        assert rc == 0, err
        headers = [line for line in out.splitlines() if line.startswith("==> ")]
        assert headers == ["==> pid %d on %s <==" % (p, HOST) for p in pids]


def test_children_group_the_ranks_and_flag_the_straggler(interp):
    with harness.Scenario(interp, "ranks") as sc:
        truths = processes(sc)
        rc, out, err = cli("pid", "--children", sc.pid, "--group", "--json")
        assert rc == 0, err
        grouped = json.loads(out)
        assert grouped["failed"] == []
        check_groups(grouped, truths)
        # Even ranks, odd ranks but the straggler, the straggler, the launcher.
        sizes = [len(g["threads"]) for g in grouped["groups"]]
        assert sizes == [3, 2, 1, 1]
        straggler = straggler_pid(sc)
        outliers = sorted(t["pid"] for g in grouped["groups"] if g["outlier"]
                          for t in g["threads"])
        assert outliers == sorted([sc.pid, straggler])

        rc, out, err = cli("pid", "--children", sc.pid, "--group-by", "function", "--json")
        assert rc == 0, err
        by_function = json.loads(out)
        check_groups(by_function, truths, by_line=False)
        assert [len(g["threads"]) for g in by_function["groups"]] == [5, 1, 1]

        rc, out, err = cli("pid", "--children", sc.pid, "--group")
        assert rc == 0, err
        lines = out.splitlines()
        assert lines[0] == "4 groups of identical Python stacks over 7 processes, 7 threads"
        assert "3 processes × MainThread" in lines
        assert "1 process (pid %d, host %s) × MainThread [outlier]" % (straggler, HOST) in lines
        # The straggler's stack under its headline, innermost first.
        at = lines.index("1 process (pid %d, host %s) × MainThread [outlier]" % (straggler, HOST))
        function, file, line = truth_stack(truths[straggler])[0]
        assert lines[at + 1] == '  File "%s", line %d, in %s' % (file, line, function)


@pytest.mark.parametrize("interp", harness.pick(["pyenv-3.12", "debian-3.11"]),
                         ids=lambda i: i.id)
def test_group_native(interp):
    with harness.Scenario(interp, "ranks") as sc:
        truths = processes(sc)
        rc, out, err = cli("pid", *rank_pids(sc), "--native", "--group", "--json")
        assert rc == 0, err
        grouped = json.loads(out)
        del truths[sc.pid]
        check_groups(grouped, truths)
        for g in grouped["groups"]:
            native = g["native_frames"]
            assert any(f["kind"] == "native" for f in native)
            assert stack(native) == [(f["function"], f["file"], f["line"]) for f in g["frames"]]


# --- cores ---------------------------------------------------------------------------------


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


@pytest.mark.parametrize("interp", CORE_INTERPS, ids=lambda i: i.id)
def test_cores_of_every_rank(interp, tmp_path):
    with harness.Scenario(interp, "ranks") as sc:
        truths = processes(sc)
        del truths[sc.pid]
        cores = {pid: gcore(sc, pid) for pid in rank_pids(sc)}
        bad = tmp_path / "not-a-core"
        bad.write_bytes(b"\x7fELF" + os.urandom(4096))
        paths = list(cores.values())
        args = paths[:1] + [bad] + paths[1:]
        rc, out, err = cli("core", *args, "--json")
        assert rc == 1, err
        lines = json_lines(out)
        assert len(lines) == len(args)
        assert lines[1]["target"] == str(bad) and lines[1]["pid"] is None
        assert lines[1]["error"]
        for (pid, _), report in zip(cores.items(), lines[:1] + lines[2:]):
            assert report["python"]["source"] == "core"
            check_report(report, truths[pid], pid)

        rc, out, err = cli("core", *paths, "--group", "--json")
        assert rc == 0, err
        check_groups(json.loads(out), truths)

        rc, out, err = cli("core", *paths)
        assert rc == 0, err
        headers = [line for line in out.splitlines() if line.startswith("==> ")]
        assert headers == ["==> core %s (pid %d) on %s <==" % (c, p, HOST)
                           for p, c in cores.items()]


# --- merge ----------------------------------------------------------------------------------


@pytest.mark.parametrize("interp", harness.pick(["pyenv-3.12"]), ids=lambda i: i.id)
def test_merge_saved_reports_with_a_corrupt_and_a_truncated_one(interp, tmp_path):
    # Two runs of the job, saved the two ways a user saves them: one file per process, and
    # one stream of the lines a multi-target run prints.
    runs = []
    for run in range(2):
        with harness.Scenario(interp, "ranks") as sc:
            truths = processes(sc)
            files = []
            for pid in truths:
                rc, out, err = cli("pid", pid, "--json")
                assert rc == 0, err
                path = tmp_path / ("run%d.%d.json" % (run, pid))
                path.write_text(out)
                files.append(path)
            rc, stream, err = cli("pid", "--children", sc.pid, "--json")
            assert rc == 0, err
            runs.append((truths, files, stream))
    (truths0, files0, _), (truths1, _, stream1) = runs
    # One report cut in half, one file of garbage, and one report pretty-printed.
    truncated = files0[1]
    whole = truncated.read_text()
    truncated.write_text(whole[:len(whole) // 2])
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_bytes(b"\x00\x01garbage, not JSON\n")
    pretty = files0[2]
    pretty.write_text(json.dumps(json.loads(pretty.read_text()), indent=2))
    # The stream also has a report cut short in its middle.
    lines = stream1.splitlines()
    cut = lines[1][:len(lines[1]) // 2]
    stream = "\n".join(lines[:1] + [cut] + lines[1:]) + "\n"

    rc, out, err = cli("merge", *files0, corrupt, "-", "--json", input=stream)
    assert rc == 1, err
    grouped = json.loads(out)
    failed = {(f["target"], f["error"].split(":")[0]) for f in grouped["failed"]}
    assert failed == {(str(truncated), "report at line 1"), (str(corrupt), "report at line 1"),
                      ("-", "report at line 2")}
    assert all("truncated" in f["error"] or "not JSON" in f["error"]
               for f in grouped["failed"]), grouped["failed"]
    # What was merged: run 0 without the truncated report's process, and all of run 1 (the
    # stream's cut line cost only itself).
    lost = int(truncated.name.split(".")[1])
    merged = {("run0", p): t for p, t in truths0.items() if p != lost}
    merged.update({("run1", p): t for p, t in truths1.items()})
    assert grouped["reports"] == len(merged)
    want = {}
    for (_, pid), truth in merged.items():
        want.setdefault(tuple(truth_stack(truth)), []).append(pid)
    got = {tuple((f["function"], f["file"], f["line"]) for f in g["frames"]):
           sorted(t["pid"] for t in g["threads"]) for g in grouped["groups"]}
    assert got == {k: sorted(v) for k, v in want.items()}
    for g in grouped["groups"]:
        assert g["processes"] == g["count"] == len(g["threads"])
        assert g["outlier"] is (g["processes"] == 1)

    rc, text, err = cli("merge", *files0[:1], "-", input=stream1)
    assert rc == 0, err
    assert text.startswith("4 groups of identical Python stacks over 8 processes, 8 threads\n")


def test_a_panic_reading_one_target_is_its_error_entry_and_exit_status_70():
    # Injected into every target's read (the entry `cli-target`): each becomes an error entry
    # saying so, nothing else is printed, and the run exits with the panic's own status.
    pids = [os.getpid(), os.getppid()]
    env = harness.child_env({"PYUNWIND_TEST_PANIC": "cli-target"})
    proc = subprocess.run([str(harness.cli_path()), "pid", *map(str, pids), "--json"],
                          capture_output=True, text=True, timeout=CLI_TIMEOUT_SECONDS, env=env)
    assert proc.returncode == 70, proc
    assert proc.stderr == ""
    lines = json_lines(proc.stdout)
    assert [line["pid"] for line in lines] == pids
    for line in lines:
        harness.check_report_schema(line)
        assert line["error"].startswith("internal error in cli-target at src/panic.rs:"), line


# --- a multiprocessing.Pool, found with --children -------------------------------------------


def check_pool_threads(grouped, pid, truth):
    """Every thread each process of the pool counted itself (`native_ids`: the parent's main
    and pool threads, each worker's) is in exactly one group, and none other is; the total
    is their number."""
    counted = {(pid, n) for n in truth["native_ids"]}
    for t in truth["tasks"]:
        counted |= {(t["pid"], n) for n in t["truth"]["native_ids"]}
    # The parent has its pool's threads beside its main thread.
    assert len(truth["native_ids"]) > 1, truth["native_ids"]
    members = [(t["pid"], t["native_id"]) for g in grouped["groups"] for t in g["threads"]]
    assert grouped["threads"] == len(members) == len(counted), (grouped["threads"], members,
                                                                counted)
    assert sorted(members) == sorted(counted)


@pytest.mark.parametrize("interp", harness.pick(["pyenv-3.10", "pyenv-3.12", "debian-3.11"]),
                         ids=lambda i: i.id)
def test_children_of_a_pool_group_its_workers(interp):
    with harness.Scenario(interp, "pool") as sc:
        # (pid, native id) -> stack of every thread the truths know: the workers' and the
        # parent's main thread (its pool threads move, so they have no truth).
        want_threads = {}
        for t in sc.truth["tasks"]:
            (thread,) = t["truth"]["threads"]
            want_threads[(t["pid"], thread["native_id"])] = truth_stack(t["truth"])
        (main,) = sc.truth["threads"]
        want_threads[(sc.pid, main["native_id"])] = truth_stack(sc.truth)
        rc, out, err = cli("pid", "--children", sc.pid, "--group", "--json")
        assert rc == 0, err
        grouped = json.loads(out)
        assert grouped["failed"] == []
        assert grouped["reports"] == 1 + len(sc.truth["tasks"])
        check_pool_threads(grouped, sc.pid, sc.truth)
        # Broken copies fail: a thread dropped from a group (the total left, or lowered
        # with it), a thread given another's native id.
        brokens = []
        for lower_total in (False, True):
            broken = copy.deepcopy(grouped)
            broken["groups"][-1]["threads"].pop()
            broken["groups"][-1]["count"] -= 1
            broken["threads"] -= lower_total
            brokens.append(broken)
        broken = copy.deepcopy(grouped)
        broken["groups"][0]["threads"][0]["native_id"] += 1
        brokens.append(broken)
        for broken in brokens:
            with pytest.raises(AssertionError):
                check_pool_threads(broken, sc.pid, sc.truth)
        want, got = {}, {}
        for member, frames in want_threads.items():
            want.setdefault(tuple(frames), set()).add(member)
        for g in grouped["groups"]:
            members = {(t["pid"], t["native_id"]) for t in g["threads"]}
            known = members & set(want_threads)
            if known:
                assert known == members, "a known thread grouped with unknown ones"
                got[tuple((f["function"], f["file"], f["line"]) for f in g["frames"])] = members
            else:
                # The parent's pool threads.
                assert {pid for pid, _ in members} == {sc.pid}, g
        assert got == want
        slow = [t["pid"] for t in sc.truth["tasks"] if t["task"] == sc.truth["slow_task"]]
        outliers = {t["pid"] for g in grouped["groups"] if g["outlier"] for t in g["threads"]}
        assert set(slow) <= outliers
        (big,) = [g for g in grouped["groups"] if g["count"] == len(sc.truth["tasks"]) - 1]
        assert not big["outlier"] and big["processes"] == len(sc.truth["tasks"]) - 1


# --- a pre-fork server, found with --children -----------------------------------------------


@pytest.mark.parametrize("interp", harness.pick(["pyenv-3.11", "pyenv-3.13", "debian-3.11"]),
                         ids=lambda i: i.id)
def test_children_of_a_prefork_server(interp):
    with harness.Scenario(interp, "prefork") as sc:
        truths = {sc.pid: sc.truth}
        truths.update({w["pid"]: w["truth"] for w in sc.truth["workers"]})
        rc, out, err = cli("pid", "--children", sc.pid, "--group", "--json")
        assert rc == 0, err
        grouped = json.loads(out)
        assert grouped["failed"] == []
        check_groups(grouped, truths)
        # Three idle workers in accept(), the busy one and the arbiter on their own.
        assert [g["count"] for g in grouped["groups"]] == [3, 1, 1]
        (busy,) = [w["pid"] for w in sc.truth["workers"] if w["busy"]]
        outliers = sorted(t["pid"] for g in grouped["groups"] if g["outlier"]
                          for t in g["threads"])
        assert outliers == sorted([sc.pid, busy])


WAITER = 'import sys, time\ndef wait():\n    print("ready", flush=True); time.sleep(600)\nwait()\n'


def test_children_leave_out_processes_without_python(tmp_path):
    # A shell that starts Python, then becomes `sleep` (exec): the root, in which no Python
    # runs, is named on stderr and left out; its Python child is read.
    interp = harness.pick(["pyenv-3.12"])[0]
    shell = subprocess.Popen(["sh", "-c", '"$0" -c "$1" & exec sleep 600', interp.exe, WAITER],
                             stdout=subprocess.PIPE, env=harness.child_env(interp.env),
                             start_new_session=True)
    try:
        assert shell.stdout.readline() == b"ready\n"
        rc, out, err = cli("pid", "--children", shell.pid, "--json")
        assert rc == 0, err
        (report,) = json_lines(out)
        assert report["pid"] != shell.pid
        (thread,) = report["threads"]
        assert stack(thread["frames"]) == [("wait", "<string>", 3), ("<module>", "<string>", 4)]
        assert err == "pyunwind: no Python in 1 process(es) of the tree, left out: %d (sleep)\n" \
            % shell.pid
    finally:
        harness._kill_group(shell.pid)
        shell.wait()


# --- asyncio tasks grouped by their await chains ---------------------------------------------


def task_groups_want(sc):
    want = {}
    for r in sc.truth["ranks"]:
        for t in r["truth"]["tasks"]:
            key = tuple((f["function"], f["file"], f["line"]) for f in t["frames"])
            want.setdefault(key, set()).add((r["pid"], t["id"], t["name"]))
    return want


def task_groups_got(groups):
    got = {}
    for g in groups:
        key = tuple((f["function"], f["file"], f["line"]) for f in g["frames"])
        assert key not in got, "two task groups with one await chain: %r" % (key,)
        got[key] = {(t["pid"], t["task"], t["name"]) for t in g["threads"]}
        assert g["count"] == len(g["threads"]) == len(got[key])
        assert g["processes"] == len({t["pid"] for t in g["threads"]})
        assert g["outlier"] is (g["processes"] == 1)
    return got


@pytest.mark.parametrize("interp", harness.pick(["pyenv-3.12", "debian-3.11"]),
                         ids=lambda i: i.id)
def test_group_async_tasks_by_await_chain(interp, tmp_path):
    with harness.Scenario(interp, "async_ranks") as sc:
        pids = rank_pids(sc)
        rc, out, err = cli("pid", *pids, "--group", "--async", "--json")
        assert rc == 0, err
        grouped = json.loads(out)
        want = task_groups_want(sc)
        assert task_groups_got(grouped["task_groups"]) == want
        # fetch-0..2 of 4 ranks, then the main tasks, then the straggler's retry (an outlier).
        assert [g["count"] for g in grouped["task_groups"]] == [12, 4, 1]
        (retry,) = [g for g in grouped["task_groups"] if g["outlier"]]
        (straggler,) = [r["pid"] for r in sc.truth["ranks"] if r["straggler"]]
        assert [t["pid"] for t in retry["threads"]] == [straggler]

        rc, text, err = cli("pid", *pids, "--group", "--async")
        assert rc == 0, err
        tasks = sum(len(r["truth"]["tasks"]) for r in sc.truth["ranks"])
        assert tasks == 17 and len(want) == 3, (tasks, want)
        assert "asyncio: %d groups of identical await chains, %d tasks" % (len(want), tasks) \
            in text.splitlines(), text
        assert "1 process (pid %d, host %s) × 1 task named retry [outlier]" \
            % (straggler, HOST) in text.splitlines()

        # The same from saved --async reports.
        saved = tmp_path / "async.json"
        rc, out, err = cli("pid", *pids, "--async", "--json")
        assert rc == 0, err
        saved.write_text(out)
        rc, out, err = cli("merge", saved, "--json")
        assert rc == 0, err
        assert task_groups_got(json.loads(out)["task_groups"]) == want

        # --tree: the tasks' await chains merged into task_tree, beside the threads' tree.
        rc, out, err = cli("pid", *pids, "--tree", "--async", "--json")
        assert rc == 0, err
        got = json.loads(out)
        assert task_tree_got(got["task_tree"]) == task_tree_want(sc)
        for b in broken_task_trees(got["task_tree"]):
            with pytest.raises(AssertionError):
                assert task_tree_got(b) == task_tree_want(sc)
        assert task_groups_got(got["task_groups"]) == want
        rc, out, err = cli("merge", saved, "--tree", "--json")
        assert rc == 0, err
        assert json.loads(out)["task_tree"] == got["task_tree"]
        rc, text, err = cli("pid", *pids, "--tree", "--async")
        assert rc == 0, err
        assert ("asyncio: call tree of %d tasks over %d processes: outermost coroutines first"
                % (tasks, len(pids))) in text.splitlines(), text


def task_tree_want(sc):
    """The tree the tasks' recorded await chains make, outermost coroutine first: {(function,
    file, line): (count, processes, {(pid, id, name)} ending there, children)}."""
    top = {}
    for r in sc.truth["ranks"]:
        for t in r["truth"]["tasks"]:
            level, node = top, None
            for f in reversed(t["frames"]):
                node = level.setdefault((f["function"], f["file"], f["line"]),
                                        {"count": 0, "pids": set(), "tasks": set(),
                                         "children": {}})
                node["count"] += 1
                node["pids"].add(r["pid"])
                level = node["children"]
            node["tasks"].add((r["pid"], t["id"], t["name"]))

    def canon(level):
        return {k: (n["count"], len(n["pids"]), n["tasks"], canon(n["children"]))
                for k, n in level.items()}
    return canon(top)


def task_tree_got(nodes):
    """task_tree in task_tree_want's shape; asserts on the way that branches come biggest
    first, that a node's count is its children's plus the tasks ending at it, and that its
    members are tasks."""
    counts = [(n["count"], n["processes"]) for n in nodes]
    assert counts == sorted(counts, reverse=True), counts
    out = {}
    for n in nodes:
        assert n["kind"] == "python" and "threads" not in n and "greenlets" not in n, n
        tasks = {(m["pid"], m["task"], m["name"]) for m in n.get("tasks", [])}
        assert n["count"] == len(tasks) + sum(c["count"] for c in n["children"]), n
        out[(n["function"], n["file"], n["line"])] = (n["count"], n["processes"], tasks,
                                                      task_tree_got(n["children"]))
    return out


def broken_task_trees(tree):
    out = []
    b = copy.deepcopy(tree)
    b[0]["count"] += 1
    out.append(b)
    b = copy.deepcopy(tree)
    leaf = b[0]
    while leaf["children"]:
        leaf = leaf["children"][0]
    leaf["tasks"].pop()
    out.append(b)
    b = copy.deepcopy(tree)
    b[0]["line"] += 1
    out.append(b)
    return out


# --- --why: the threads' state is part of the key --------------------------------------------


# x86-64's system call numbers (arch/x86/entry/syscalls/syscall_64.tbl) of the calls the
# scenarios' processes block in.
SYSCALL_NAMES = {202: "futex"}


def kernel_syscall(pid):
    """The system call the kernel says thread `pid` is blocked in (/proc/PID/task/PID/syscall),
    by name."""
    with open("/proc/%d/task/%d/syscall" % (pid, pid)) as f:
        first = f.read().split()[0]
    assert first.isdigit(), "pid %d is not blocked in a system call: %s" % (pid, first)
    return SYSCALL_NAMES.get(int(first), first)


def check_why_against_truth(grouped, reports, truths, syscalls):
    """`--group --why` (`grouped`) and each process's `--why` (`reports`) against what each
    process recorded (`truths`: {pid: truth}, its `waits`: the lock it waits on, and in which
    frame) and the system call the kernel shows it blocked in (`syscalls`: {pid: name}):
    every process's one thread is blocked in that call (state `syscall`), waiting on its lock
    (no owner: a Lock taken by `acquire()` keeps no trace of its holder) in that frame; each
    group's state, call and kind of wait are those of every process in it."""
    assert sorted(r["pid"] for r in reports) == sorted(truths)
    for report in reports:
        pid = report["pid"]
        (thread,) = report["threads"]
        waits = truths[pid]["waits"]
        assert thread["native_id"] == pid
        assert (thread["state"], thread["syscall"]) == ("syscall", syscalls[pid]), (pid, thread)
        assert thread["waiting"] == {"kind": waits["kind"], "object": waits["object"],
                                     "type": "Lock", "owner": None,
                                     "frame": waits["frame"]}, (pid, thread["waiting"], waits)
    members = sorted(t["pid"] for g in grouped["groups"] for t in g["threads"])
    assert members == sorted(truths), members
    for g in grouped["groups"]:
        for t in g["threads"]:
            want = ("syscall", syscalls[t["pid"]], truths[t["pid"]]["waits"]["kind"])
            assert (g["state"], g["syscall"], g["waiting"]) == want, (t["pid"], g)


@pytest.mark.parametrize("interp", harness.pick(["pyenv-3.12", "debian-3.11"]),
                         ids=lambda i: i.id)
def test_group_why_carries_each_thread_state(interp):
    with harness.Scenario(interp, "ranks") as sc:
        truths = processes(sc)
        pids = list(truths)
        rc, out, err = cli("pid", *pids, "--group", "--why", "--json")
        assert rc == 0, err
        grouped = json.loads(out)
        check_groups(grouped, truths)
        rc, out, err = cli("pid", *pids, "--why", "--json")
        assert rc == 0, err
        reports = json_lines(out)
        syscalls = {pid: kernel_syscall(pid) for pid in pids}
        # Every process blocks in HELD.acquire(): a futex.
        assert set(syscalls.values()) == {"futex"}, syscalls
        check_why_against_truth(grouped, reports, truths, syscalls)
        # Broken copies fail: a group's wait or call changed, a process's lock, frame or
        # call changed, a process dropped from the groups.
        brokens = []
        for field, value in (("waiting", None), ("syscall", "read"), ("state", "running")):
            broken = copy.deepcopy(grouped)
            broken["groups"][-1][field] = value
            brokens.append((broken, reports))
        for field, value in (("object", truths[pids[1]]["waits"]["object"] + 16), ("frame", 1)):
            broken = copy.deepcopy(reports)
            broken[1]["threads"][0]["waiting"][field] = value
            brokens.append((grouped, broken))
        broken = copy.deepcopy(reports)
        broken[2]["threads"][0]["syscall"] = "read"
        brokens.append((grouped, broken))
        broken = copy.deepcopy(grouped)
        broken["groups"][0]["threads"].pop()
        brokens.append((broken, reports))
        for g, r in brokens:
            with pytest.raises(AssertionError):
                check_why_against_truth(g, r, truths, syscalls)

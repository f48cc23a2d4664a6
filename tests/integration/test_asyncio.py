"""asyncio task graphs from real processes and their gcore cores: the CLI (`--async --json`),
gdb's `py-bt-async --json` / `py-tasks --json` and their text, against the truth each case of
tests/scenarios/asyncio/cases.py records about itself (tasks, frames, edges, leaves, loops,
cycles), with the C Task and the pure-Python Task."""

import json

import pytest

import harness
from test_stacks import check_report, expected, got, json_from, run_gdb

CASES_SCRIPT = harness.repo_root() / "tests" / "scenarios" / "asyncio" / "cases.py"
# asyncio tasks are decoded on 3.11+; 3.10 has its own test below. Debian sid's 3.14/3.15 run
# with their debug info hidden (as for a user without -dbg packages).
INTERPS = [i for i in harness.interpreters() if i.minor >= 11] + \
    [i for i in harness.provisioned_interpreters() if not i.debug_dir]
IMPLS = ["c", "py"]
CASES = ["idle", "deep", "chain3", "chain50", "gather", "gather_named", "taskgroup", "shield",
         "wait_for", "wait_first", "recursive_on_cpu", "eager_suspend", "eager_step",
         "eager_done", "cycle", "two_loops", "executor", "asyncgen", "fan_in", "ready_queue",
         "finished", "recursion_shared_code", "subclass"]
# `asyncio.eager_task_factory` is new in 3.12: these cases do not exist on 3.11.
NEEDS_312 = {"eager_suspend", "eager_step", "eager_done"}
MANY_TASKS = 10000


def params():
    for interp in INTERPS:
        for case in CASES:
            if case in NEEDS_312 and interp.minor < 12:
                continue
            for impl in IMPLS:
                yield pytest.param(interp, case, impl, id="%s-%s-%s" % (interp.id, case, impl))


def start(scenario, interp, case, impl, env=None):
    return scenario(interp, "asyncio-" + case, script=CASES_SCRIPT, args=(case, impl), env=env)


def cli(*args):
    rc, out, err = harness.run([harness.cli_path(), *map(str, args)], 120)
    assert rc == 0, "pyunwind %s failed (%d): %s" % (" ".join(map(str, args)), rc, err)
    return out


def rotate(cycle):
    i = cycle.index(min(cycle))
    return tuple(cycle[i:] + cycle[:i])


def check_async(report, truth, live_cli=False):
    """Every task, edge, leaf, frame, loop and cycle of the truth, exactly."""
    check_report(report, truth, live_cli=live_cli)
    tasks = {t["id"]: t for t in report["tasks"]}
    want = {t["id"]: t for t in truth["tasks"]}
    non_tasks = {n["id"]: n for n in truth["non_tasks"]}
    assert set(tasks) == set(want) | set(non_tasks), "tasks: got %s, want %s" % (
        sorted(t["name"] for t in report["tasks"]), sorted(t["name"] for t in truth["tasks"]))
    threads = {t["name"]: t["native_id"] for t in truth["threads"]}
    for tid, w in want.items():
        g = tasks[tid]
        who = "task %s" % w["name"]
        assert g["name"] == w["name"], who
        assert g["type"] == w["type"], who
        assert g["state"] == "pending", who
        assert g["supported"] is True, who
        assert g["on_cpu"] == w["on_cpu"], who
        assert g["loop"] == w["loop"], who
        assert g["native_id"] == w["native_id"], who
        assert got(g["frames"]) == expected(w["frames"]), who
        assert sorted(g["awaited_by"]) == w["awaited_by"], who
        assert sorted(g["owned_by"]) == w["owned_by"], who
        assert (g["awaiting"] or {}).get("kind") == w["awaiting"], who
        if "executor_thread" in w:
            assert g["awaiting"]["executor_native_id"] == threads[w["executor_thread"]], who
    for nid, n in non_tasks.items():
        assert tasks[nid]["supported"] is False
        assert tasks[nid]["type"] == n["type"]
    loops = {lp["id"]: lp for lp in report["loops"]}
    for wl in truth["loops"]:
        gl = loops[wl["id"]]
        assert gl["running"] is True
        assert gl["native_id"] == wl["native_id"]
        assert got(gl["frames"]) == expected(wl["frames"]), "loop frames"
    assert sorted(map(rotate, report["cycles"])) == sorted(map(rotate, truth["cycles"]))
    assert report["errors"] == []


@pytest.mark.parametrize("interp,case,impl", list(params()))
def test_async_graph(scenario, interp, case, impl):
    check_case(scenario, interp, case, impl)


# Debian sid's 3.14/3.15 with their debug info visible to gdb: the same answers (pyunwind reads
# none of it).
@pytest.mark.parametrize("interp,case", [(i, c) for i in harness.provisioned_interpreters()
                                         if i.debug_dir for c in ("taskgroup", "eager_step")],
                         ids=lambda x: getattr(x, "id", x))
def test_async_graph_with_debug_info(scenario, interp, case):
    check_case(scenario, interp, case, "c")


def check_case(scenario, interp, case, impl):
    s = start(scenario, interp, case, impl)
    truth = s.truth
    check_async(json.loads(cli("pid", s.pid, "--async", "--json")), truth, live_cli=True)
    if impl == "c" and interp.id in STDLIB_IDS:
        check_same_as_stdlib_ps(s, interp, case)
    core = s.make_core()
    check_async(json.loads(cli("core", core, "--async", "--json")), truth)
    # One gdb session, as a user who looks at the core and then attaches to the process: the
    # session must follow the new target (`source` says which was read). One gdb start instead
    # of two, where loading the interpreter's symbols is most of a run.
    out, _ = run_gdb(interp, "py-bt-async --json", "py-tasks", "echo @@LIVE@@\\n", "core-file",
                     "attach %d" % s.pid, "py-tasks --json", "detach", core=core)
    out, live = out.split("@@LIVE@@")
    report = json_from(out[:out.index("\n└──") if "\n└──" in out else len(out)])
    assert report["python"]["source"] == "core"
    check_async(report, truth)
    check_tree_text(out, truth)
    report = json_from(live)
    assert report["python"]["source"] == "live"
    check_async(report, truth)


# uvloop (tools/uvloop.sh) has wheels for cp311 to cp315, not for the free-threaded 3.13t. Its loop
# runs in C: which thread runs it comes from the thread's running-loop state alone.
UVLOOP_INTERPS = [i for i in INTERPS if not i.id.startswith("ft-")]
# Idle in I/O (every task waits), and a task running (on-CPU, the loop thread inside it).
UVLOOP_CASES = ["taskgroup", "recursive_on_cpu"]


@pytest.mark.parametrize("interp,case", [(i, c) for i in UVLOOP_INTERPS for c in UVLOOP_CASES],
                         ids=lambda x: getattr(x, "id", x))
def test_uvloop(scenario, interp, case):
    env = {"PYUNWIND_UVLOOP": str(harness.cache_dir() / "uvloop" / ("cp3%d" % interp.minor))}
    s = start(scenario, interp, case, "uvloop", env=env)
    truth = s.truth
    assert all(lp["frames"] for lp in truth["loops"]), "the loop thread's Python frames"
    check_async(json.loads(cli("pid", s.pid, "--tasks", "--json")), truth, live_cli=True)
    if interp.id in STDLIB_IDS:
        check_same_as_stdlib_ps(s, interp, case)
    core = s.make_core()
    report = json.loads(cli("core", core, "--tasks", "--json"))
    check_async(report, truth)
    assert [(lp["id"], lp["type"]) for lp in report["loops"]] == \
        [(lp["id"], lp["type"]) for lp in truth["loops"]] == [(truth["loops"][0]["id"], "Loop")]
    out, _ = run_gdb(interp, "py-tasks --json", core=core)
    check_async(json_from(out), truth)


# What `python3.1X -m asyncio ps PID` prints, as data: the rows of `asyncio.tools.build_task_table`
# (thread, task id, name, coroutine stack, awaiter chain, awaiter name, awaiter id).
STDLIB_PS = """
import asyncio.tools, json, sys
rows = asyncio.tools.build_task_table(asyncio.tools.get_all_awaited_by(int(sys.argv[1])))
print(json.dumps(rows))
"""
# 3.14+ has `asyncio ps`: test_async_graph (C tasks) and test_uvloop check it on their own live
# program, every case of each, rather than starting each program once more.
STDLIB_IDS = {i.id for i in INTERPS if i.minor >= 14}


def check_same_as_stdlib_ps(s, interp, case):
    """Our native tasks are exactly those `python -m asyncio ps` lists, and every awaiter edge
    it shows is ours too (ours may have more: the edges done callbacks give)."""
    rc, out, err = harness.run([interp.exe, "-c", STDLIB_PS, str(s.pid)], 60,
                               env=harness.child_env(interp.env))
    assert rc == 0, err
    rows = json.loads(out)
    report = json.loads(cli("pid", s.pid, "--tasks", "--json"))
    ours = {t["id"] for t in report["tasks"] if t["supported"]}
    theirs = {int(r[1], 16) for r in rows}
    if case == "two_loops" and interp.minor == 14:
        # 3.14.10's `asyncio ps` lists the tasks of the main thread's loop only; those of the
        # loop in thread loop-2 are missing there (3.15's lists both). The truth has them, and
        # so do we.
        main = next(t["native_id"] for t in s.truth["threads"] if t["name"] == "MainThread")
        assert ours == {t["id"] for t in s.truth["tasks"]}
        ours = {t["id"] for t in report["tasks"] if t["native_id"] == main}
    assert ours == theirs
    edges = {(t["id"], w) for t in report["tasks"] for w in t["awaited_by"] + t["owned_by"]}
    their_edges = {(int(r[1], 16), int(r[6], 16)) for r in rows if r[6] != "0x0"}
    assert their_edges <= edges, their_edges - edges
    names = {t["id"]: t["name"] for t in report["tasks"]}
    assert {int(r[1], 16): r[2] for r in rows} == {i: names[i] for i in theirs}


def check_tree_text(out, truth):
    """Every task name appears in the tree or under a cycle; cycles printed by name."""
    names = {t["id"]: t["name"] for t in truth["tasks"]}
    for c in truth["cycles"]:
        assert any(line.startswith("cycle: ") and all(names[i] in line for i in c)
                   for line in out.splitlines()), out
    for t in truth["tasks"]:
        assert ("(T) %s " % t["name"]) in out or ("(T) %s\n" % t["name"]) in out \
            or any(t["id"] in c for c in truth["cycles"]), "task %s not in the tree" % t["name"]


@pytest.mark.parametrize("interp", harness.pick(("pyenv-3.12", "debian-3.11", "debian-3.14", "debian-3.15"), INTERPS),
                         ids=lambda i: i.id)
def test_async_text(scenario, interp):
    """`py-bt-async` text: each task's async stack up to the loop, innermost first."""
    s = start(scenario, interp, "chain3", "c")
    core = s.make_core()
    out, _ = run_gdb(interp, "py-bt-async", core=core)
    cli_out = cli("core", core, "--async")
    # gdb prints its own lines ([New LWP ...]) first.
    out = out[out.index("\nThread ") + 1:]
    assert out.strip() in cli_out, "gdb and the CLI print the same text"
    block = out[out.index('Task "f0"'):]
    block = block[:block.index("\n\n")] if "\n\n" in block else block
    lines = block.splitlines()
    assert lines[0].startswith('Task "f0" (0x') and lines[0].endswith(" pending:")
    assert lines[1].startswith("  awaits ") and lines[1].endswith("(sleep)")
    order = [ln.strip() for ln in lines if ln.startswith("  <- ")]
    assert [o.split('"')[1] for o in order[:3]] == ["f1", "f2", "Task-1"]
    assert order[3].startswith("<- event loop 0x")
    funcs = [ln.split(", in ")[1] for ln in lines if ln.startswith("  File ")]
    assert funcs[:2] == ["sleep", "chain_f"]
    assert funcs[-1] == "<module>"
    assert "recorder" in out  # the thread without a loop prints its plain stack


@pytest.mark.parametrize("interp,impl", [(i, m) for i in INTERPS for m in IMPLS
                                         if (i.id, m) in {("pyenv-3.12", "c"), ("debian-3.11", "c"),
                                                          ("pyenv-3.13", "py")}],
                         ids=lambda x: getattr(x, "id", x))
def test_many_tasks(scenario, interp, impl):
    """10,000 sleeping tasks under one gather: every one is listed, linked and placed. In gdb
    too, with memory read through gdb (whose reads only gdb's thread may make: the tasks are
    decoded on the machine's cores elsewhere, on that thread alone there)."""
    s = start(scenario, interp, "many", impl, env={"PYUNWIND_TASKS": str(MANY_TASKS)})
    core = s.make_core()
    report = json.loads(cli("core", core, "--async", "--json"))
    assert len(report["tasks"]) == MANY_TASKS + 1
    check_async(report, s.truth)
    out, _ = run_gdb(interp, "py-tasks --table", "echo @@DEBUGGER\n", "pyunwind set memory debugger",
                     "py-tasks --table", core=core)
    parts = out.split("@@DEBUGGER\n")
    assert len(parts) == 2, out
    for part in parts:
        assert len([ln for ln in part.splitlines() if " w" in ln and "pending" in ln]) == MANY_TASKS


def test_310_says_unsupported(scenario):
    interp = harness.pick(["pyenv-3.10"])[0]
    s = start(scenario, interp, "idle", "c")
    rc, out, err = harness.run([harness.cli_path(), "pid", s.pid, "--async"], 60)
    assert rc == 1 and err.strip() == \
        "pyunwind: unsupported Python version 3.10.13 for asyncio tasks (3.11 to 3.15 and the " \
        "free-threaded 3.13 are supported)", err

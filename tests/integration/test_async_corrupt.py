"""Corrupt asyncio memory in a real core gives a partial task graph plus errors, in bounded
time, from the CLI and from gdb (which must not crash or hang).

Each test takes a gcore core of the `chain3` case (Task-1 awaits f2 awaits f1 awaits f0, which
sleeps), finds real addresses in the truth and in our report of the untouched core, corrupts a
copy at exactly those addresses (corefile.py), and checks what is still right, exactly:

- a task's coroutine pointer into unmapped memory: that task keeps its name and edges, loses
  its frames, and an error names it; every other task equals the truth;
- a coroutine frame's code pointer into unmapped memory: that frame is unreadable, the task's
  other data and every other task are intact;
- a task's done callback pointer into unmapped memory: an error, and the edge is still found
  through the awaiting task's `fut_waiter`;
- 3.11 to 3.13, where native tasks are in the registry set: its table pointer unmapped, or its
  size 2**40: no tasks, one error, and the threads' stacks still equal the truth;
- 3.14 and 3.15 (Debian sid's, debug info hidden), where native tasks are on the per-thread
  circular lists of their `task_node`s: a task's `next` link into unmapped memory, or back to an
  earlier task (a cycle): the tasks walked before the break, each equal to the truth, one
  "task list" error, and the threads' stacks still equal the truth; a link past one task: the
  others, and an error where the links disagree; a link straight back to the list's head
  (expected to fail until `list_tasks` checks the head's `prev`).
"""

import json

import pytest

import harness

from corefile import CoreFile, u64
from test_asyncio import CASES_SCRIPT, check_async
from test_stacks import check_report, expected, got, json_from, run_gdb

INTERPS = harness.pick(("pyenv-3.11", "pyenv-3.12", "pyenv-3.13"))
# 3.14+: Debian sid's stripped builds, with their debug info hidden.
LIST_INTERPS = harness.pick(("debian-3.14", "debian-3.15"))
TIMEOUT_SECONDS = 30
UNMAPPED = 0x10
# TaskObj offsets (src/asyncio/layout.rs, checked against DWARF by tests/layout_dwarf.rs):
# task_coro, FutureObj fut_callback0, and 3.14+ task_node.
TASK_CORO = {11: 136, 12: 136, 13: 120, 14: 128, 15: 128}
FUT_CALLBACK0 = {11: 24, 12: 24, 13: 24, 14: 24, 15: 24}
TASK_NODE = {14: 152, 15: 152}
# `struct llist_node` (Include/internal/pycore_llist.h): next, prev.
NODE_NEXT, NODE_PREV = 0, 8
# `f_code` (3.11/3.12) / `f_executable` (3.13+; a stack ref from 3.14, whose tag bits are zero
# in the patched value) of `_PyInterpreterFrame`.
FRAME_CODE = {11: 32, 12: 0, 13: 0, 14: 0, 15: 0}
# PySetObject mask and table.
SET_MASK, SET_TABLE = 32, 40


def ids(interps):
    return [i.id for i in interps]


@pytest.fixture(scope="module")
def chain_cores(tmp_path_factory):
    """interp -> (interp, core, truth, report of the untouched core, directory), each core
    made once."""
    made = {}

    def get(interp):
        if interp.id not in made:
            made[interp.id] = chain_core(interp, tmp_path_factory)
        return made[interp.id]
    return get


def chain_core(interp, tmp_path_factory):
    with harness.Scenario(interp, "asyncio-chain3", script=CASES_SCRIPT, args=("chain3", "c")) as s:
        core = s.make_core()
        d = tmp_path_factory.mktemp("async-corrupt-" + interp.id)
        kept = d / "core"
        with open(core, "rb") as src, open(kept, "wb") as dst:
            dst.write(src.read())
        truth = s.truth
    rc, out, err = harness.run([harness.cli_path(), "core", kept, "--async", "--json"], 60)
    assert rc == 0, err
    report = json.loads(out)
    check_async(report, truth)
    return interp, str(kept), truth, report, d


def run_both(interp, core):
    """The CLI's report and gdb's, each within the timeout."""
    rc, out, err = harness.run([harness.cli_path(), "core", core, "--async", "--json"],
                               TIMEOUT_SECONDS)
    assert rc == 0, err
    cli_report = json.loads(out)
    gout, _ = run_gdb(interp, "py-bt-async --json", "py-tasks", "py-bt-async", core=core)
    gdb_report = json_from(gout[:gout.index("\n└──")] if "\n└──" in gout else gout)
    assert gdb_report["tasks"] == cli_report["tasks"]
    return cli_report


def by_name(report):
    return {t["name"]: t for t in report["tasks"]}


def patch(core, d, name, patches):
    dest = d / name
    CoreFile(core).patched_copy(dest, patches)
    return str(dest)


def assert_others_exact(report, truth, damaged):
    got_tasks = by_name(report)
    for t in truth["tasks"]:
        if t["name"] in damaged:
            continue
        g = got_tasks[t["name"]]
        assert got(g["frames"]) == expected(t["frames"]), t["name"]
        assert sorted(g["awaited_by"]) == t["awaited_by"], t["name"]
    check_report({**report, "errors": []}, truth)


# UNMAPPED, and all ones: a pointer whose fields' addresses overflow (a panic once, found by
# corrupting a core by hand).
@pytest.mark.parametrize("value", [UNMAPPED, (1 << 64) - 1], ids=["unmapped", "all-ones"])
@pytest.mark.parametrize("interp", INTERPS + LIST_INTERPS, ids=ids(INTERPS + LIST_INTERPS))
def test_bad_coroutine_pointer(chain_cores, interp, value):
    interp, core, truth, report, d = chain_cores(interp)
    f1 = by_name(report)["f1"]
    bad = patch(core, d, "coro-%x" % value, {f1["id"] + TASK_CORO[interp.minor]: u64(value)})
    r = run_both(interp, bad)
    g = by_name(r)["f1"]
    assert g["frames"] == [] and g["awaiting"] is None
    assert sorted(g["awaited_by"]) == sorted(f1["awaited_by"])
    assert any('"f1"' in e["what"] and "await chain" in e["what"] for e in r["errors"]), r["errors"]
    assert_others_exact(r, truth, {"f1"})


@pytest.mark.parametrize("interp", INTERPS + LIST_INTERPS, ids=ids(INTERPS + LIST_INTERPS))
def test_bad_frame_code(chain_cores, interp):
    interp, core, truth, report, d = chain_cores(interp)
    f2 = by_name(report)["f2"]
    frame = f2["frames"][0]["address"]  # chain_f's coroutine frame (innermost of f2)
    bad = patch(core, d, "code", {frame + FRAME_CODE[interp.minor]: u64(UNMAPPED)})
    r = run_both(interp, bad)
    g = by_name(r)["f2"]
    assert [f["kind"] for f in g["frames"]] == ["unreadable"]
    assert sorted(g["awaited_by"]) == sorted(f2["awaited_by"])
    assert any('"f2"' in e["what"] for e in r["errors"]), r["errors"]
    assert_others_exact(r, truth, {"f2"})


@pytest.mark.parametrize("interp", INTERPS + LIST_INTERPS, ids=ids(INTERPS + LIST_INTERPS))
def test_bad_callback(chain_cores, interp):
    interp, core, truth, report, d = chain_cores(interp)
    f0 = by_name(report)["f0"]
    bad = patch(core, d, "callback", {f0["id"] + FUT_CALLBACK0[interp.minor]: u64(UNMAPPED)})
    r = run_both(interp, bad)
    assert any("done callback" in e["what"] or "callbacks" in e["what"] for e in r["errors"])
    # f1 awaits f0 directly (its fut_waiter), so the edge survives.
    assert_others_exact(r, truth, set())


@pytest.mark.parametrize("interp", INTERPS, ids=ids(INTERPS))
@pytest.mark.parametrize("field,value", [(SET_TABLE, UNMAPPED), (SET_MASK, (1 << 40) - 1)],
                         ids=["table", "mask"])
def test_bad_registry_set(chain_cores, interp, field, value):
    interp, core, truth, report, d = chain_cores(interp)
    bad = patch(core, d, "set-%d" % field, {truth["registry_set"] + field: u64(value)})
    r = run_both(interp, bad)
    assert r["tasks"] == []
    assert len(r["errors"]) == 1 and "asyncio registry" in r["errors"][0]["what"], r["errors"]
    check_report({**r, "errors": []}, truth)


def list_order(interp, core, report):
    """The list's head, and the tasks of the untouched core in the order of their links.
    chain3's four tasks are all made by the loop thread, so they are the whole of its list:
    head, Task-1, f2, f1, f0, head."""
    c = CoreFile(core)
    node = TASK_NODE[interp.minor]
    tasks = {t["id"] + node: t["id"] for t in report["tasks"]}
    nxt = {n: c.read_u64(n + NODE_NEXT) for n in tasks}
    prv = {n: c.read_u64(n + NODE_PREV) for n in tasks}
    first = [n for n in tasks if prv[n] not in tasks]
    assert len(first) == 1, "not one list: %r" % prv
    order = first
    while nxt[order[-1]] in tasks and len(order) <= len(tasks):
        order.append(nxt[order[-1]])
    head = prv[first[0]]
    assert len(order) == len(tasks) and nxt[order[-1]] == head and head not in tasks
    return head, [tasks[n] for n in order]


def assert_kept_exact(report, truth, kept):
    """Exactly the tasks `kept` (ids), each equal to the truth, and the threads' stacks. Edges
    join listed tasks only: an awaiter that is not listed is not shown."""
    want = {t["id"]: t for t in truth["tasks"]}
    assert sorted(t["id"] for t in report["tasks"]) == sorted(kept), \
        [t["name"] for t in report["tasks"]]
    for g in report["tasks"]:
        w = want[g["id"]]
        assert g["name"] == w["name"]
        assert got(g["frames"]) == expected(w["frames"]), w["name"]
        assert sorted(g["awaited_by"]) == [a for a in w["awaited_by"] if a in kept], w["name"]
        assert (g["awaiting"] or {}).get("kind") == w["awaiting"], w["name"]
    check_report({**report, "errors": []}, truth)


# (task whose `next` is patched, where it then points, tasks listed, the one error: where, what),
# tasks by their place in the list (0 = Task-1 ... 3 = f0), "head" the list's own node,
# "unmapped" UNMAPPED.
BAD_LINKS = {
    # Into unmapped memory: the walk keeps what it has.
    "unmapped": (1, "unmapped", [0, 1],
                 ("unmapped", "task list: memory not available at %#x" % (UNMAPPED + NODE_NEXT))),
    # Back to an earlier task: the fourth is lost.
    "cycle": (2, 0, [0, 1, 2], ("head", "task list: broken (a NULL link or a cycle)")),
    # Past the third to the fourth, whose `prev` still names the third: the walk goes on.
    "skip": (1, 3, [0, 1, 3], (3, "task list: links disagree (stopped inside an update?)")),
}


@pytest.mark.parametrize("interp", LIST_INTERPS, ids=ids(LIST_INTERPS))
@pytest.mark.parametrize("bad", list(BAD_LINKS))
def test_bad_task_list_link(chain_cores, interp, bad):
    interp, core, truth, report, d = chain_cores(interp)
    head, order = list_order(interp, core, report)
    node = TASK_NODE[interp.minor]
    at, to, kept, (where, what) = BAD_LINKS[bad]
    named = {"head": head, "unmapped": UNMAPPED}
    place = {**{i: t + node for i, t in enumerate(order)}, **named}
    r = run_both(interp, patch(core, d, "list-" + bad,
                               {place[at] + NODE_NEXT: u64(place[to])}))
    assert r["errors"] == [{"address": place[where], "what": what}]
    assert_kept_exact(r, truth, [order[i] for i in kept])


@pytest.mark.parametrize("interp", LIST_INTERPS, ids=ids(LIST_INTERPS))
def test_task_list_cut_to_head(chain_cores, interp):
    interp, core, truth, report, d = chain_cores(interp)
    head, order = list_order(interp, core, report)
    # The second task links straight back to the list's head: the list looks complete, but the
    # head's `prev` still names the last task, so the walk must say the list is broken.
    node = TASK_NODE[interp.minor]
    r = run_both(interp, patch(core, d, "list-head", {order[1] + node + NODE_NEXT: u64(head)}))
    assert r["errors"] == [{"address": head,
                            "what": "task list: links disagree (stopped inside an update?)"}]
    assert_kept_exact(r, truth, order[:2])

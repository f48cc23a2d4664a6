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
- the registry set's table pointer unmapped, or its size 2**40: no tasks, one error, and the
  threads' stacks still equal the truth.
"""

import json
import struct

import pytest

import harness
from corefile import CoreFile, u64
from test_asyncio import CASES_SCRIPT, check_async
from test_stacks import check_report, expected, got, json_from, run_gdb

INTERPS = [i for i in harness.interpreters() if i.id in ("pyenv-3.11", "pyenv-3.12", "pyenv-3.13")]
TIMEOUT_SECONDS = 30
UNMAPPED = 0x10
# TaskObj offsets (src/asyncio/layout.rs): task_coro, FutureObj fut_callback0.
TASK_CORO = {11: 136, 12: 136, 13: 120}
FUT_CALLBACK0 = {11: 24, 12: 24, 13: 24}
# `f_code` (3.11/3.12) / `f_executable` (3.13) of `_PyInterpreterFrame`.
FRAME_CODE = {11: 32, 12: 0, 13: 0}
# PySetObject mask and table.
SET_MASK, SET_TABLE = 32, 40


@pytest.fixture(scope="module", params=INTERPS, ids=lambda i: i.id)
def chain_core(request, tmp_path_factory):
    interp = request.param
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


def test_bad_coroutine_pointer(chain_core):
    interp, core, truth, report, d = chain_core
    f1 = by_name(report)["f1"]
    bad = patch(core, d, "coro", {f1["id"] + TASK_CORO[interp.minor]: u64(UNMAPPED)})
    r = run_both(interp, bad)
    g = by_name(r)["f1"]
    assert g["frames"] == [] and g["awaiting"] is None
    assert sorted(g["awaited_by"]) == sorted(f1["awaited_by"])
    assert any('"f1"' in e["what"] and "await chain" in e["what"] for e in r["errors"]), r["errors"]
    assert_others_exact(r, truth, {"f1"})


def test_bad_frame_code(chain_core):
    interp, core, truth, report, d = chain_core
    f2 = by_name(report)["f2"]
    frame = f2["frames"][0]["address"]  # chain_f's coroutine frame (innermost of f2)
    bad = patch(core, d, "code", {frame + FRAME_CODE[interp.minor]: u64(UNMAPPED)})
    r = run_both(interp, bad)
    g = by_name(r)["f2"]
    assert [f["kind"] for f in g["frames"]] == ["unreadable"]
    assert sorted(g["awaited_by"]) == sorted(f2["awaited_by"])
    assert any('"f2"' in e["what"] for e in r["errors"]), r["errors"]
    assert_others_exact(r, truth, {"f2"})


def test_bad_callback(chain_core):
    interp, core, truth, report, d = chain_core
    f0 = by_name(report)["f0"]
    bad = patch(core, d, "callback", {f0["id"] + FUT_CALLBACK0[interp.minor]: u64(UNMAPPED)})
    r = run_both(interp, bad)
    assert any("done callback" in e["what"] or "callbacks" in e["what"] for e in r["errors"])
    # f1 awaits f0 directly (its fut_waiter), so the edge survives.
    assert_others_exact(r, truth, set())


@pytest.mark.parametrize("field,value", [(SET_TABLE, UNMAPPED), (SET_MASK, (1 << 40) - 1)],
                         ids=["table", "mask"])
def test_bad_registry_set(chain_core, field, value):
    interp, core, truth, report, d = chain_core
    bad = patch(core, d, "set-%d" % field, {truth["registry_set"] + field: u64(value)})
    r = run_both(interp, bad)
    assert r["tasks"] == []
    assert len(r["errors"]) == 1 and "asyncio registry" in r["errors"][0]["what"], r["errors"]
    check_report({**r, "errors": []}, truth)

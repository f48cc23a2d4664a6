"""--why's `tasks[].timeout` (issue 49 item 2: `asyncio.timeout` deadlines; docs/report.md, "A
deadline around the wait"): the `asyncio.timeouts.Timeout` that fires first around each task's
wait, the frame whose `async with` holds it, and live the seconds left. Checked against
tests/scenarios/why_task_timeouts.py's own record, which finds each task's Timeouts among the
loop's scheduled timers (one in a coroutine, two nested, one in an outer coroutine, wait_for's
on 3.12+ and none on 3.11, `timeout(None)`, none at all). Live and from a gcore core; the C
Task and the pure-Python one; the verdict's one-task lines."""

import re

import pytest

import harness
from test_stacks import json_from
from test_why_task_waits import run_cli, variant_id

VARIANTS = [(i, "c") for i in ["pyenv-3.11", "pyenv-3.12", "pyenv-3.13", "debian-3.14",
                               "debian-3.15", "ft-3.13t"]] + [("pyenv-3.12", "py")]
SOURCES = ["live", "core"]
NAMES = ["timed", "nested", "deeper", "waitfor", "untimed", "plain"]


@pytest.fixture(scope="module", params=VARIANTS, ids=variant_id)
def scenario(request):
    interp_id, impl = request.param
    interp = harness.pick([interp_id])[0]
    with harness.Scenario(interp, "why_task_timeouts", args=(impl,)) as sc:
        assert sc.truth["impl"] == impl
        sc.core = sc.make_core()
        yield sc


def check_remaining(remaining, when, before, after, source):
    if source == "core":
        assert remaining is None
    else:
        assert round(when - after, 3) - 0.001 <= remaining <= round(when - before, 3) + 0.001, \
            (remaining, when, before, after)


def test_the_scenario_recorded_what_the_version_does(scenario):
    """The record itself: every deadline but wait_for's on 3.11, where wait_for uses no
    Timeout; the inner of the two nested ones."""
    t = scenario.truth["tasks"]
    with_one = {n for n in NAMES if t[n]["timeout"] is not None}
    want = {"timed", "nested", "deeper", "waitfor"}
    if scenario.interp.minor < 12:
        want.discard("waitfor")
    assert with_one == want
    assert t["nested"]["timeout"]["when"] < t["deeper"]["timeout"]["when"]


@pytest.mark.parametrize("source", SOURCES)
def test_each_task_has_its_first_deadline(scenario, source):
    sc = scenario
    out, before, after = run_cli(sc, source, "--json")
    r = json_from(out)
    harness.check_report_schema(r)
    tasks = {t["name"]: t for t in r["tasks"]}
    for name in NAMES:
        t, rec = tasks[name], sc.truth["tasks"][name]
        assert t["id"] == rec["id"], name
        want = rec["timeout"]
        if want is None:
            assert "timeout" not in t, (name, t.get("timeout"))
            continue
        got = dict(t["timeout"])
        check_remaining(got.pop("remaining_s"), want["when"], before, after, source)
        frame = got.pop("frame")
        assert t["frames"][frame]["function"] == want["function"], (name, t["frames"])
        assert [f["function"] for f in t["frames"]].count(want["function"]) == 1, name
        assert got == {"object": want["id"]}, name
        # The group of this task (one task: each waits in its own function) has it too.
        (group,) = [g for g in r["task_waits"] if g["tasks"] == [rec["id"]]]
        assert group["timeout"]["object"] == want["id"], name


@pytest.mark.parametrize("source", SOURCES)
def test_the_verdict_line_ends_with_the_deadline(scenario, source):
    """`task 0x.. "timed" waits for asyncio Event 0x.. in timed (why_task_timeouts.py:48); its
    asyncio.timeout expires in 998.9 s`; from a core `; inside an asyncio.timeout`; nothing for
    a task with no deadline."""
    sc = scenario
    out, before, after = run_cli(sc, source)
    lines = out.split("\n\n", 1)[0].splitlines()
    for name in NAMES:
        rec = sc.truth["tasks"][name]
        prefix = 'task %#x "%s" ' % (rec["id"], name)
        (line,) = [x for x in lines if x.startswith(prefix)]
        want = rec["timeout"]
        m = re.search(r"; its asyncio\.timeout expires in ([0-9.]+) s$", line)
        if want is None:
            assert "asyncio.timeout" not in line, line
        elif source == "core":
            assert line.endswith("; inside an asyncio.timeout"), line
        else:
            assert m, line
            when = want["when"]
            assert round(when - after, 1) - 0.1 <= float(m.group(1)) <= round(when - before, 1) \
                + 0.1, line

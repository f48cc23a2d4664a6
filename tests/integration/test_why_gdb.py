"""`py-why` in gdb: the same verdict, waits, holds and deadlocks as the CLI's `--why`, on a core
of the lock-order deadlock scenario (tests/scenarios/why_waits.py; test_why_waits.py checks the
CLI against the scenario's truth). lldb: test_lldb_why.py."""

import json

import pytest

import harness
from test_stacks import json_from, run_gdb

INTERPS = harness.pick(["pyenv-3.12", "debian-3.11", "debian-3.14"])
WHY_FIELDS = ("native_id", "name", "frames", "waiting", "holding")


def cli_why(core, *extra):
    rc, out, err = harness.run([harness.cli_path(), "core", core, "--why", *extra], 60)
    harness.assert_no_panic(err, rc)
    assert rc == 0, err
    return out


def why_fields(report):
    return ([{k: t[k] for k in WHY_FIELDS} for t in report["threads"]], report["deadlocks"])


def verdict(text):
    """The verdict: the lines before the first blank line."""
    return text.split("\n\n", 1)[0]


@pytest.fixture(scope="module", params=INTERPS, ids=lambda i: i.id)
def why_core(request):
    with harness.Scenario(request.param, "why_waits") as sc:
        yield request.param, sc.make_core()


def test_gdb_py_why_is_the_cli_why(why_core):
    interp, core = why_core
    want = json.loads(cli_why(core, "--json"))
    assert [d["kind"] for d in want["deadlocks"]] == ["locks"], want["deadlocks"]
    out, _ = run_gdb(interp, "echo @@TEXT@@\\n", "py-why", "echo @@JSON@@\\n", "py-why --json",
                     core=core)
    text, js = out.split("@@TEXT@@\n", 1)[1].split("@@JSON@@\n")
    assert why_fields(json_from(js)) == why_fields(want)
    assert verdict(text).startswith("Deadlock: "), text
    assert verdict(text) == verdict(cli_why(core)), text

"""`--heap`'s retainers (docs/report.md, "Who holds the memory"), exact against
tests/scenarios/heap_holders.py's own record: for a dict held by a module global, a list held by
a class attribute, one held only by a closure cell and one held only by a thread's frame local,
the address, type, `len`, `sys.getsizeof`, the retained bytes the program computed from the
objects it made, and the path (`held_by`); a garbage cycle no root reaches is retained by
nothing. Live and from a gcore core, on 3.10 to 3.15 and the free-threaded 3.13t; the text's
lines; gdb's `py-heap` on the core (lldb's: test_lldb_heap.py)."""

import json
import re

import pytest

import harness
from test_stacks import json_from, run_gdb

TIMEOUT_SECONDS = 60
INTERPS = harness.pick(["pyenv-3.10", "pyenv-3.11", "pyenv-3.12", "pyenv-3.13", "debian-3.11",
                        "debian-3.14", "debian-3.15", "ft-3.13t"])
GDB_INTERPS = ["pyenv-3.12", "debian-3.14"]
# The scenario's containers retain about 2 MiB each; the interpreter's own largest about 60 KiB.
TOP = 8


@pytest.fixture(scope="module", params=INTERPS, ids=lambda i: i.id)
def scenario(request):
    with harness.Scenario(request.param, "heap_holders") as sc:
        sc.interp = request.param
        sc.core = sc.make_core()
        yield sc


def cli(*args):
    rc, out, err = harness.run([harness.cli_path()] + [str(a) for a in args], TIMEOUT_SECONDS)
    harness.assert_no_panic(out + err, rc)
    assert rc == 0, err
    return out


def target(sc, source):
    return ["pid", sc.pid] if source == "live" else ["core", sc.core]


def check_retainers(report, truth):
    """The scenario's four containers are the first four retainers, each exact; nothing the
    cycle holds is among them."""
    assert not [e for e in report["errors"] if e["what"].startswith("heap")], report["errors"]
    h = report["heap"]
    assert h["complete"] is True
    got = h["retainers"]
    assert len(got) == TOP, got
    expected = sorted(truth["containers"], key=lambda c: (-c["retained"], c["address"]))
    assert got[:4] == expected, (got[:4], expected)
    addresses = {r["address"] for r in got}
    assert not addresses & set(truth["cycle"]), truth["cycle"]
    # What follows is the interpreter's own, each much smaller than the scenario's.
    assert all(r["retained"] < expected[-1]["retained"] // 10 for r in got[4:]), got[4:]
    return got


@pytest.mark.parametrize("source", ["live", "core"])
def test_retainers_are_the_programs_own(scenario, source):
    sc = scenario
    report = harness.check_report_schema(json.loads(
        cli(*target(sc, source), "--heap", "--heap-top", TOP, "--json")))
    check_retainers(report, sc.truth)


def expression(held_by, thread_names):
    """`held_by` as the text shows it (docs/report.md)."""
    out = ""
    for s in held_by:
        if "module" in s:
            out += s["module"]
        elif "attr" in s:
            out += "." + s["attr"]
        elif "closure" in s:
            out += " closure " + s["closure"]
        else:
            out += 'thread %d "%s" %s() local %s' % (s["thread"], thread_names[s["thread"]],
                                                    s["function"], s["local"])
    return out


def test_retainers_text(scenario):
    sc = scenario
    names = {t["native_id"]: t["name"] for t in sc.truth["threads"]}
    text = cli("core", sc.core, "--heap", "--heap-top", TOP)
    lines = text.splitlines()
    at = lines.index("What keeps the most alive (retained: it and what only it reaches):")
    rows = lines[at + 1:at + 5]
    expected = sorted(sc.truth["containers"], key=lambda c: (-c["retained"], c["address"]))
    for row, c in zip(rows, expected):
        m = re.fullmatch(r"\s+([\d.]+) (MiB|KiB)  (0x[0-9a-f]+)  (\w+) len (\d+)  (.+)", row)
        assert m, row
        size = float(m.group(1)) * (1 << 20 if m.group(2) == "MiB" else 1 << 10)
        assert abs(size - c["retained"]) <= 0.05 * (1 << 20), (row, c)
        assert (int(m.group(3), 16), m.group(4), int(m.group(5))) == (
            c["address"], c["type"], c["len"]), row
        assert m.group(6) == expression(c["held_by"], names), row


@pytest.mark.parametrize("interp", harness.pick(GDB_INTERPS), ids=lambda i: i.id)
def test_py_heap_in_gdb(interp):
    with harness.Scenario(interp, "heap_holders") as sc:
        sc.interp = interp
        out, _ = run_gdb(interp, "echo @@JSON@@\\n", "py-heap --top %d --json" % TOP,
                         core=sc.make_core())
        harness.assert_no_panic(out)
        report = json_from(out.split("@@JSON@@\n", 1)[1])
        check_retainers(report, sc.truth)

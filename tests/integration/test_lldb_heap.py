"""`py-heap` in lldb (`--json` and text) on gcore cores of tests/scenarios/heap.py, against the
record it makes (the CLI and gdb side, and what is compared: test_heap.py; free-threaded 3.13t:
test_heap_ft.py). Runs under `make integration-lldb` ($PYUNWIND_LLDB)."""

import pytest

import harness
from test_heap import TOP, check, check_text, process_text
from test_lldb import INTERPS, json_from, mark, run_lldb, split

POOL = tuple(INTERPS) + tuple(i for i in harness.provisioned_interpreters() if not i.debug_dir)


@pytest.mark.parametrize("interp", harness.pick(["pyenv-3.10", "pyenv-3.12", "debian-3.14", "ft-3.13t"], POOL),
                         ids=lambda i: i.id)
def test_lldb_py_heap(interp):
    with harness.Scenario(interp, "heap") as s:
        out = run_lldb(interp, mark("JSON"), "py-heap --top %d --json" % TOP, mark("TEXT"),
                       "py-heap", core=s.make_core())
        got = split(out, ["JSON", "TEXT"])
        report = json_from(got["JSON"])
        check(report, s.truth)
        # The text row by row against the JSON.
        assert check_text(got["TEXT"], report) == process_text(report)
        assert "__main__.Order" in got["TEXT"], got["TEXT"]
        assert harness.panic_in(out) is None, out


@pytest.mark.parametrize("interp", harness.pick(["pyenv-3.12", "ft-3.13t"], POOL),
                         ids=lambda i: i.id)
def test_lldb_py_heap_retainers(interp):
    """`py-heap --json`'s retainers on tests/scenarios/heap_holders.py's core: the program's
    own containers, sizes and paths (what is checked: test_heap_holders.py)."""
    from test_heap_holders import TOP as HOLDERS_TOP, check_retainers
    with harness.Scenario(interp, "heap_holders") as s:
        out = run_lldb(interp, mark("JSON"), "py-heap --top %d --json" % HOLDERS_TOP,
                       core=s.make_core())
        check_retainers(json_from(split(out, ["JSON"])["JSON"]), s.truth)
        assert harness.panic_in(out) is None, out

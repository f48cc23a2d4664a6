"""`py-greenlets` in lldb (`--json` and text) on gcore cores of tests/scenarios/greenlets_raw.py
and greenlets_gevent.py, against the truth they record (the CLI and gdb side, and what is
compared: test_greenlets.py). Runs under `make integration-lldb` ($PYUNWIND_LLDB)."""

import pytest

import harness
from test_greenlets import GEVENT_ABSENT, check_greenlets, check_text, start
from test_lldb import INTERPS, json_from, mark, run_lldb, split

# A few of the matrix: each frame layout family (3.10's frame objects, 3.11's and 3.12+'s
# interpreter frames), a stripped build, sid's 3.14/3.15 (stripped, debug info hidden).
CASES = [("pyenv-3.10", "greenlets_raw"), ("pyenv-3.12", "greenlets_raw"),
         ("debian-3.14", "greenlets_raw"), ("debian-3.11", "greenlets_gevent"),
         ("pyenv-3.13", "greenlets_gevent"), ("debian-3.15", "greenlets_gevent")]
POOL = tuple(INTERPS) + tuple(i for i in harness.provisioned_interpreters() if not i.debug_dir)


@pytest.mark.parametrize("interp,name", [
    pytest.param(i, n, id="%s-%s" % (i.id, n))
    for (iid, n) in CASES for i in harness.pick([iid], POOL)])
def test_lldb_py_greenlets(interp, name):
    assert not (name == "greenlets_gevent" and interp.id in GEVENT_ABSENT)
    with start(interp, name) as sc:
        out = run_lldb(interp, mark("JSON"), "py-greenlets --json", mark("TEXT"), "py-greenlets",
                       core=sc.core)
        got = split(out, ["JSON", "TEXT"])
        check_greenlets(json_from(got["JSON"]), sc.truth)
        check_text(got["TEXT"], sc.truth)
        assert harness.panic_in(out) is None, out



@pytest.mark.parametrize("interp", harness.pick(["ft-3.13t"], POOL), ids=lambda i: i.id)
def test_lldb_py_greenlets_debugger_memory(interp):
    """Memory read through lldb (`pyunwind set memory debugger`), which comes without a memory
    map, on a free-threaded build: its greenlets from its mimalloc GC heaps, each with its state,
    parent, type and frames, the worker's on its thread (test_greenlets.py's
    test_raw_gdb_debugger_memory is gdb's). lldb gives no process id for a core, so the main
    thread's stack (below `__libc_stack_end`) cannot be told as the main thread's: its greenlets
    have no thread, its running one no frames, and one error names its main greenlet."""
    with start(interp, "greenlets_raw") as sc:
        out = run_lldb(interp, "pyunwind set memory debugger", mark("JSON"), "py-greenlets --json",
                       core=sc.core)
        assert harness.panic_in(out) is None, out
        report = json_from(split(out, ["JSON"])["JSON"])
    assert report["python"]["source"] == "debugger"
    main = [g["address"] for g in sc.truth["greenlets"] if g["thread"] == sc.pid and g["main"]]
    unknown = "greenlets: main greenlet %#x: which thread it belongs to is not known"
    assert report.pop("errors") == [{"address": m, "what": unknown % m} for m in main], main
    truth = dict(sc.truth, greenlets=[
        dict(g, thread=None, frames=[] if g["state"] == "running" else g["frames"])
        if g["thread"] == sc.pid else g for g in sc.truth["greenlets"]])
    check_greenlets(dict(report, errors=[]), truth)

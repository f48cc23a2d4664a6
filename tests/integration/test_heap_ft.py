"""`--heap` on a free-threaded build (3.13t): no GC lists there, so the census starts from
the GC-tracked objects in the interpreter's mimalloc heaps (src/cpython/mimalloc.rs), exact
against the program's own record (`gc.get_objects()` and `sys.getsizeof`), live and from a
gcore core, with libpython as built (DWARF) and stripped.

- tests/scenarios/heap.py, checked as test_heap.py checks default builds: the scenario's
  classes exact, its big objects among the largest with type, size and length exact, the plain
  objects at least as many as it made; the CLI's text; gdb's `py-heap` on the core;
- tests/scenarios/heap_threads.py: objects made by a worker thread that is alive (its own
  heaps) and by one that has exited (its pages in the interpreter's abandoned pool), each held
  only by a closure the census does not read, so that only the heap walk finds them: exact.

A missing interpreter fails the run (harness.provisioned_interpreters); it is never skipped.
"""

import pathlib

import pytest

import harness
from test_heap import TOP, check, cli, heap_json
from test_stacks import json_from, run_gdb


def free_threaded():
    """The free-threaded 3.13 as built, and with a `strip --strip-all` copy of its libpython
    (the mimalloc walk needs no symbols)."""
    ft = harness.pick(["ft-3.13t"])[0]
    lib = harness.stripped_libpython(pathlib.Path(ft.libpython), "3.13t")
    stripped = harness.Interp(ft.id + "-stripped", ft.exe, {"LD_LIBRARY_PATH": str(lib.parent)},
                              ft.minor, True, str(lib))
    return [ft, stripped]


INTERPS = free_threaded()


@pytest.fixture(scope="module", params=INTERPS, ids=lambda i: i.id)
def stop(request):
    """(live report, core report, truth, text, scenario) of the heap scenario."""
    with harness.Scenario(request.param, "heap") as s:
        assert s.truth["free_threaded"] is True
        live = heap_json(["pid", str(s.pid)])
        text = cli(["pid", str(s.pid), "--heap"])
        from_core = heap_json(["core", s.make_core()])
        yield live, from_core, s.truth, text, s


def test_heap_ft_live_exact(stop):
    live, _, truth, _, _ = stop
    assert live["python"]["free_threaded"] is True
    check(live, truth)


def test_heap_ft_core_exact(stop):
    live, from_core, truth, _, _ = stop
    check(from_core, truth)
    assert from_core["heap"]["types"] == live["heap"]["types"]
    assert from_core["heap"]["largest"] == live["heap"]["largest"]


def test_heap_ft_text(stop):
    _, _, _, text, _ = stop
    assert "Heap: " in text and "Largest objects:" in text, text
    assert "free-threaded" not in text, text
    assert any(r.startswith("__main__.Order ") for r in text.splitlines()), text
    assert "len 300000" in text, text


def test_heap_ft_gdb(stop):
    """`py-heap --json` and `py-heap` in gdb on the core: the CLI's census."""
    _, from_core, truth, _, s = stop
    out, _ = run_gdb(s.interp, "echo @@JSON@@\\n", "py-heap --top %d --json" % TOP,
                     "echo @@TEXT@@\\n", "py-heap", core=s.make_core())
    harness.assert_no_panic(out)
    js, text = out.split("@@JSON@@\n", 1)[1].split("@@TEXT@@\n", 1)
    report = json_from(js)
    check(report, truth)
    assert report["heap"]["types"] == from_core["heap"]["types"]
    assert report["heap"]["largest"] == from_core["heap"]["largest"]
    assert "Heap: " in text and "__main__.Order" in text and "len 300000" in text, text


@pytest.mark.parametrize("interp", INTERPS, ids=lambda i: i.id)
def test_heap_ft_other_threads_objects(interp):
    """Objects of a live worker thread's heaps and of an exited thread's abandoned pages,
    reachable through nothing the census reads: exact, live and from the core."""
    with harness.Scenario(interp, "heap_threads") as s:
        live = heap_json(["pid", str(s.pid)])
        from_core = heap_json(["core", s.make_core()])
        for r in (live, from_core):
            check(r, s.truth)
            names = {t["type"] for t in r["heap"]["types"]}
            assert {"__main__.Theirs", "__main__.Orphan"} <= names, names
        assert from_core["heap"]["types"] == live["heap"]["types"]


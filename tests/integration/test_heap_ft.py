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
- the same under `PYTHONMALLOC=debug` (the debug allocator's words before each object).

A missing interpreter fails the run (harness.provisioned_interpreters); it is never skipped.
"""

import pathlib

import pytest

import harness
from test_heap import check, cli, heap_json
# test_heap.py's checks of the heap scenario, collected here again with this file's `stop`
# fixture (the free-threaded builds): live and core exact, the text, gdb's `py-heap` on the core.
from test_heap import (test_heap_core_exact, test_heap_gdb, test_heap_live_exact,  # noqa: F401
                       test_heap_text)


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
    """(live report, core report, truth, text, scenario) of the heap scenario, as
    test_heap.py's `stop` gives them."""
    with harness.Scenario(request.param, "heap") as s:
        assert s.truth["free_threaded"] is True
        live = heap_json(["pid", str(s.pid)])
        assert live["python"]["free_threaded"] is True
        text = cli(["pid", str(s.pid), "--heap"])
        from_core = heap_json(["core", s.make_core()])
        yield live, from_core, s.truth, text, s


@pytest.mark.parametrize("interp", INTERPS, ids=lambda i: i.id)
def test_heap_ft_other_threads_objects(interp):
    """Objects of a live worker thread's heaps and of an exited thread's abandoned pages,
    reachable through nothing the census reads: exact, live and from the core."""
    with harness.Scenario(interp, "heap_threads") as s:
        live = heap_json(["pid", str(s.pid)])
        from_core = heap_json(["core", s.make_core()])
        made = s.truth["heap"]["made"]
        assert sorted(made) == ["__main__.Mine", "__main__.Orphan", "__main__.Theirs"], made
        for r in (live, from_core):
            check(r, s.truth)
            # Each class exactly as many times as the program made it (5000), a count that
            # does not come from a walk of the same heaps.
            counts = {t["type"]: t["count"] for t in r["heap"]["types"]}
            assert {name: counts.get(name) for name in made} == made
        assert from_core["heap"]["types"] == live["heap"]["types"]



def test_heap_ft_debug_allocator():
    """`PYTHONMALLOC=debug` puts two words before each block's object
    (`_PyRuntime.allocators.is_debug_enabled`): still exact, live and from the core."""
    with harness.Scenario(INTERPS[0], "heap_threads", env={"PYTHONMALLOC": "debug"}) as s:
        for r in (heap_json(["pid", str(s.pid)]), heap_json(["core", s.make_core()])):
            check(r, s.truth)
            counts = {t["type"]: t["count"] for t in r["heap"]["types"]}
            assert {name: counts.get(name) for name in s.truth["heap"]["made"]} == s.truth["heap"]["made"]

"""--why names the call a thread's innermost frame is making (issue 49 item 9), not a callable
that only sits on its value stack (tests/scenarios/why_calls.py): `time.sleep` inside `with
lock:` is a `sleep` wait and `signal.pause()` inside `with rlock:` a `native` wait in
`_signal.pause` (the lock's `__exit__` below the call is the block's, not the call's), and
libc's `pause` called through a `ctypes` function pointer is a `native` wait named by the
pointer's name and library, `pause (libc.so.6)`. Live and from a gcore core, on 3.10 to 3.15
and the free-threaded 3.13t."""

import pytest

import harness
from test_why_io import INTERPS, SOURCES, by_native_id, cli, line_of, report, verdict


@pytest.fixture(scope="module", params=INTERPS, ids=lambda i: i.id)
def scenario(request):
    with harness.Scenario(request.param, "why_calls") as sc:
        sc.core = sc.make_core()
        yield sc


def native(function):
    return {"kind": "native", "object": None, "type": None, "owner": None, "frame": 0,
            "function": function, "native_function": None}


def expected(sc):
    """{thread name: its `waiting`}."""
    return {
        "sleeper": {"kind": "sleep", "object": None, "type": None, "owner": None, "frame": 0},
        "pauser": native(sc.truth["pause"]),
        "ctyper": native("pause (libc.so.6)"),
    }


@pytest.mark.parametrize("source", SOURCES)
def test_the_call_being_made_is_named(scenario, source):
    sc = scenario
    threads = by_native_id(report(sc, source))
    for name, want in expected(sc).items():
        t = threads[sc.truth[name]]
        assert t["waiting"] == want, (name, t)
        assert t["state"] == "syscall", (name, t)
        truth = next(x for x in sc.truth["threads"] if x["name"] == name)["frames"][0]
        assert (t["frames"][0]["function"], t["frames"][0]["line"]) == (
            truth["function"], truth["line"]), (name, t["frames"][0])


@pytest.mark.parametrize("source", SOURCES)
def test_verdict_lines(scenario, source):
    sc = scenario
    lines = verdict(cli(sc, source))
    words = {"sleeper": "sleeps (time.sleep)",
             "pauser": "is blocked in native code: %s" % sc.truth["pause"],
             "ctyper": "is blocked in native code: pause (libc.so.6)"}
    for name, w in words.items():
        n = sc.truth[name]
        assert lines[line_of(lines, n, name)] == 'thread %d "%s" %s' % (n, name, w), lines
    assert not any("__exit__" in line for line in lines), lines


@pytest.mark.parametrize("source", SOURCES)
def test_native_frames_match_the_call(scenario, source):
    """With native frames the callable is the one whose C function a native frame runs:
    libc's `pause` under the ctypes pointer, `signal_pause` under `_signal.pause`. Their
    `native_function` is null: the wait's own code is libc's, under ctypes' plumbing (libffi,
    `_ctypes`) or the interpreter."""
    sc = scenario
    threads = by_native_id(report(sc, source, "--native"))
    for name, want in expected(sc).items():
        t = threads[sc.truth[name]]
        python = [i for i, f in enumerate(t["frames"]) if f["kind"] == "python"]
        assert t["waiting"] == dict(want, frame=python[0]), (name, t["waiting"], t["frames"])

"""--why on a real ASGI service: FastAPI under uvicorn (tools/asgi.sh pins both), whose `async def`
handler calls `time.sleep`, the most common asyncio bug (tests/scenarios/why_fastapi.py). The
loop's `state`, `blocked_by` (the request's task, the handler's line, `time.sleep`), `ready`,
`tasks_waiting` and, live, `overdue_s` (against this process's CLOCK_MONOTONIC before and after
the read) are checked against the scenario's own record, and the verdict's first line whole;
on asyncio's loop and on uvloop (uvicorn's `--loop uvloop`), live and from a gcore core."""

import pytest

import harness
from test_stacks import json_from
from test_why_io import peer_process_of
from test_why_loops import check_loop_json, expected_line, overdue_bounds, run_cli, verdict_lines

# (interpreter, uvicorn's loop): the ABIs tools/asgi.sh installs for.
VARIANTS = [("pyenv-3.11", "asyncio"), ("pyenv-3.12", "asyncio"), ("pyenv-3.13", "asyncio"),
            ("debian-3.11", "asyncio"), ("pyenv-3.12", "uvloop"), ("pyenv-3.13", "uvloop")]
SOURCES = ["live", "core"]


@pytest.fixture(scope="module", params=VARIANTS, ids=lambda v: "-".join(v))
def scenario(request):
    interp_id, impl = request.param
    interp = harness.pick([interp_id])[0]
    abi = "cp3%d" % interp.minor
    env = {"PYUNWIND_ASGI": str(harness.cache_dir() / "fastapi" / abi / "site-packages")}
    if impl == "uvloop":
        env["PYUNWIND_UVLOOP"] = str(harness.cache_dir() / "uvloop" / abi)
    with harness.Scenario(interp, "why_fastapi", args=(impl,), env=env) as sc:
        assert sc.truth["impl"] == impl
        sc.core = sc.make_core()
        yield sc


@pytest.mark.parametrize("source", SOURCES)
def test_the_request_that_blocks_the_loop_is_named(scenario, source):
    check_loop_json(scenario, source)


@pytest.mark.parametrize("source", SOURCES)
def test_the_verdict_leads_with_the_blocked_loop(scenario, source):
    sc = scenario
    out, before, after = run_cli(sc, source)
    lines = verdict_lines(out)
    bounds = overdue_bounds(sc, source, before, after)
    late = None
    if bounds is not None:
        late = float(lines[0].split(" is blocked for ", 1)[1].split(" s ", 1)[0])
        assert round(bounds[0], 1) - 0.1 <= late <= round(bounds[1], 1) + 0.1, (late, bounds)
    assert lines[0] == expected_line(sc, late), lines


@pytest.mark.parametrize("source", SOURCES)
def test_the_request_waiting_on_its_upstream_names_the_socket(scenario, source):
    """anyio's SocketStream.receive waits on its protocol's read_event: the socket, not the
    Event. uvloop's transports are C objects whose socket is not read: the wait is on a
    socket all the same, through the transport, its fd and addresses null, and an errors
    entry says why."""
    sc = scenario
    out, _, _ = run_cli(sc, source, "--json", "--tasks")
    up = sc.truth["upstream"]
    (t,) = [t for t in json_from(out)["tasks"] if t["id"] == up["task"]]
    w = dict(t["waiting"])
    frame = t["frames"][w.pop("frame")]["function"]
    assert frame == "SocketStream.receive"
    if sc.truth["impl"] == "uvloop":
        assert w == {"kind": "socket", "object": up["transport"], "type": up["transport_type"],
                     "owner": None, "fd": None, "direction": "recv", "local": None,
                     "peer": None, "peer_process": None}
        r = json_from(out)
        assert [e["what"] for e in r["errors"] if e["address"] == up["task"]] == [
            "task %#x waits on a socket through %s %#x, a transport written in C (uvloop keeps "
            "the socket in libuv's handle, whose layout is not read): its fd, local and peer "
            "are null" % (up["task"], up["transport_type"], up["transport"])]
        return
    live = source == "live"
    # The upstream, SILENT, is the scenario's own listening socket: the connection waits in
    # its backlog, so the process at the other end is the scenario.
    assert w == {"kind": "socket", "object": up["id"], "type": up["type"], "owner": None,
                 "fd": up["fd"], "direction": "recv", "local": up["local"] if live else None,
                 "peer": up["peer"] if live else None,
                 "peer_process": peer_process_of(sc.pid) if live else None}


@pytest.mark.parametrize("source", SOURCES)
def test_the_verdict_names_the_upstream_wait_and_counts_the_idle_tasks(scenario, source):
    """After the loop's and the threads' lines: the upstream request's task, at its handler's
    line (FastAPI's, Starlette's and anyio's frames are installed packages), then uvicorn's
    own tasks counted by the idle table: its tick and its lifespan queue."""
    sc = scenario
    out, _, _ = run_cli(sc, source)
    lines = verdict_lines(out)
    up = sc.truth["upstream"]
    task = 'task %#x "%s"' % (up["task"], up["name"])
    at = " in upstream (why_fastapi.py:%d)" % up["line"]
    if sc.truth["impl"] == "uvloop":
        want = "%s waits on socket (recv)%s" % (task, at)
    else:
        pp = peer_process_of(sc.pid)
        words = ("recv from %s (%s, pid %d), local %s" % (up["peer"], pp["command"], pp["pid"],
                                                          up["local"]) if source == "live"
                 else "recv")
        want = "%s waits on socket fd %d (%s)%s" % (task, up["fd"], words, at)
    assert [line for line in lines if line.startswith("task ")] == [want], lines
    assert lines[-1] == "2 idle tasks: 1 server tick, 1 lifespan queue", lines

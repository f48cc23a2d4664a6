"""Subinterpreters (issue 40), on tests/scenarios/subinterpreters.py: a thread that entered a
subinterpreter from the main one, one that entered a second from a first (nested), a thread a
subinterpreter started, and a subinterpreter no thread runs in. Each thread is listed once, its
stack one stack: the frames of the interpreter it runs in now, then those of the ones it
entered that one from, each frame with its interpreter's id (`interpreter_id`); the report
lists every interpreter (`interpreters`: id, address, whence). The text marks each crossing
(`--- interpreter 1 (entered from interpreter 0) ---`) and names a thread's interpreter in its
header. Every value comes from the program: each interpreter recorded its own frames, ids and
whence, live and from a gcore core.

3.12 (`_xxsubinterpreters.run_string`) runs a subinterpreter's code in its first thread state,
bound to the main thread that made it (gh-109860): the stack is still the running thread's."""

import json
import re

import pytest

import harness

INTERPS = harness.pick(["pyenv-3.12", "pyenv-3.12-stripped", "pyenv-3.13", "ft-3.13t",
                        "debian-3.14", "debian-3.15"])
TIMEOUT = 120


@pytest.fixture(scope="module", params=INTERPS, ids=lambda i: i.id)
def stop(request):
    with harness.Scenario(request.param, "subinterpreters") as sc:
        sc.make_core()
        yield sc


def cli(*args):
    rc, out, err = harness.run([harness.cli_path(), *map(str, args)], TIMEOUT)
    harness.assert_no_panic(err, rc)
    assert rc == 0, "pyunwind %s failed:\n%s" % (" ".join(map(str, args)), err)
    return json.loads(out) if "--json" in args else out


def targets(sc):
    return [("pid", sc.pid), ("core", sc.make_core())]


def frames_of(frames):
    return [(f["function"], f["file"], f["line"], f["interpreter_id"]) for f in frames]


def check_report(report, truth):
    want = truth["interpreters"]
    got = report["interpreters"]
    assert [(i["id"], i["whence"]) for i in got] == [(i["id"], i["whence"]) for i in want]
    addresses = [i["address"] for i in got]
    assert all(addresses) and len(set(addresses)) == len(addresses), addresses
    address_of = {i["id"]: i["address"] for i in got}
    by_native = {}
    for t in report["threads"]:
        assert t["native_id"] not in by_native, "thread %s listed twice" % t["native_id"]
        by_native[t["native_id"]] = t
    assert sorted(by_native) == sorted(tt["native_id"] for tt in truth["threads"])
    for tt in truth["threads"]:
        t = by_native[tt["native_id"]]
        assert (t["name"], t["thread_id"]) == (tt["name"], tt["thread_id"])
        assert t["interpreter_id"] == tt["interpreter_id"], tt["name"]
        assert t["interpreter"] == address_of[tt["interpreter_id"]], tt["name"]
        assert frames_of(t["frames"]) == frames_of(tt["frames"]), tt["name"]
        assert t["truncated"] is False
    # The interpreter no thread runs in is in `interpreters` only.
    idle = truth["idle_interpreter"]
    assert all(f["interpreter_id"] != idle for t in report["threads"] for f in t["frames"])
    assert report["errors"] == []


def test_json_live_and_core(stop):
    for source, target in targets(stop):
        check_report(cli(source, target, "--json"), stop.truth)


def expected_text(truth, tt):
    """A thread's header and traceback lines as the text shows them (source lines left out):
    `File` lines, and a crossing line before the first frame of each interpreter entered
    from."""
    header = 'Thread %d "%s"' % (tt["native_id"], tt["name"])
    if tt["interpreter_id"]:
        header += " (interpreter %d)" % tt["interpreter_id"]
    lines = [header + ":", "Traceback (most recent call first):"]
    last = None
    for f in tt["frames"]:
        if last is not None and f["interpreter_id"] != last:
            lines.append("  --- interpreter %d (entered from interpreter %d) ---"
                         % (last, f["interpreter_id"]))
        last = f["interpreter_id"]
        lines.append('  File "%s", line %d, in %s' % (f["file"], f["line"], f["function"]))
    return lines


SHOWN = re.compile(r'^(Thread |Traceback|  File |  --- interpreter )')


def test_text_live_and_core(stop):
    for source, target in targets(stop):
        out = cli(source, target)
        blocks = {}
        for block in out.split("\n\n"):
            lines = [line for line in block.splitlines() if SHOWN.match(line)]
            if lines and lines[0].startswith("Thread "):
                blocks[int(lines[0].split()[1])] = lines
        for tt in stop.truth["threads"]:
            assert blocks.get(tt["native_id"]) == expected_text(stop.truth, tt), out

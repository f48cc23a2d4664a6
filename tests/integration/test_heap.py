"""`--heap`: the objects by type and the largest objects, exact against the program's own
record (tests/scenarios/heap.py: `gc.get_objects()` and `sys.getsizeof`), live and from a
gcore core, on every default build (pyenv 3.10 to 3.13, stripped copies, Debian's 3.11, sid's
3.14 and 3.15).

- the scenario's own classes (`__dict__`, `__slots__`, a bytes subclass, cycles): count and
  bytes exact;
- its big objects (a dict of 300,000 entries, lists, a tuple, a set, a frozenset, a deque, str
  of every kind, bytes, a multi-digit int; a bytearray, a code object, a frame, and from 3.11
  a generator and a coroutine, whose `__sizeof__` is their own): each among the largest, with
  its type, size and length exact;
- every generator and coroutine of the process: count and bytes exact (3.10's are small);
- a str only a code object's constants hold and a bytes only a function's defaults hold:
  found, exact (functions and code objects are walked, so they are not `unwalked`);
- the plain objects it holds (bytes, str, int): at least as many, and as many bytes, as it
  made;
- text output: the table and the largest objects;
- gdb's `py-heap` (`--json` and text) on the core: the same census (lldb's:
  test_lldb_heap.py);
- free-threaded builds: test_heap_ft.py.
"""

import json

import pytest

import harness
from test_stacks import json_from, run_gdb

TIMEOUT_SECONDS = 60
# The big objects are over 85 KB; fewer than 30 of the interpreter's own objects are bigger.
TOP = 60
INTERPS = [i for i in harness.interpreters()] + [
    i for i in harness.provisioned_interpreters()
    if not i.debug_dir and not i.id.startswith("ft-")]


def cli(args):
    rc, out, err = harness.run([harness.cli_path()] + args, TIMEOUT_SECONDS)
    harness.assert_no_panic(err, rc)
    assert rc == 0, err
    return out


def heap_json(source):
    r = harness.check_report_schema(json.loads(
        cli(source + ["--heap", "--heap-top", str(TOP), "--json"])))
    return r


def check(report, truth):
    h = report["heap"]
    record = truth["heap"]
    assert h["complete"] is True, report["errors"]
    assert h["unreached"]["unreadable"] == 0, report["errors"]
    assert h["unreached"]["unreadable_by"] == [], report["errors"]
    assert not [e for e in report["errors"] if e["what"].startswith("heap")], report["errors"]
    types = {t["type"]: (t["count"], t["bytes"]) for t in h["types"]}
    unwalked = {u["type"] for u in h["unreached"]["unwalked"]}
    assert not unwalked & {"function", "code"}, unwalked
    for name, (count, size) in record["types"].items():
        assert types.get(name) == (count, size), name
    largest = {o["address"]: o for o in h["largest"]}
    for addr, (name, size, length) in record["objects"].items():
        o = largest.get(int(addr))
        assert o is not None, (name, size, length, [(x["type"], x["bytes"]) for x in h["largest"]])
        assert (o["type"], o["bytes"], o["len"]) == (name, size, length), o
    for name, (count, size) in record["at_least"].items():
        got = types[name]
        assert got[0] >= count and got[1] >= size, (name, got, count, size)
    assert h["objects"] == sum(c for c, _ in types.values())
    assert h["bytes"] == sum(b for _, b in types.values())
    sizes = [o["bytes"] for o in h["largest"]]
    assert sizes == sorted(sizes, reverse=True) and len(sizes) == TOP
    byte_order = [t["bytes"] for t in h["types"]]
    assert byte_order == sorted(byte_order, reverse=True)


@pytest.fixture(scope="module", params=INTERPS, ids=lambda i: i.id)
def stop(request):
    """(live report, core report, truth, text, scenario) of one interpreter's heap scenario."""
    with harness.Scenario(request.param, "heap") as s:
        live = heap_json(["pid", str(s.pid)])
        text = cli(["pid", str(s.pid), "--heap"])
        core = s.make_core()
        from_core = heap_json(["core", core])
        yield live, from_core, s.truth, text, s


def test_heap_live_exact(stop):
    live, _, truth, _, _ = stop
    check(live, truth)


def test_heap_core_exact(stop):
    live, from_core, truth, _, _ = stop
    check(from_core, truth)
    # A gcore core is the process's memory: the same census.
    assert from_core["heap"]["types"] == live["heap"]["types"]
    assert from_core["heap"]["largest"] == live["heap"]["largest"]


def test_heap_text(stop):
    _, _, truth, text, _ = stop
    assert "Heap: " in text and "Largest objects:" in text, text
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:4] == ["type", "count",
                                                                           "bytes", "share"])
    rows = lines[header + 1:header + 21]
    assert rows[0].split()[0] == "str" or rows[0].split()[0] in ("dict", "int", "bytes"), rows
    assert any(r.startswith("__main__.Order ") for r in lines), text
    assert "len 300000" in text, text


def test_heap_gdb(stop):
    """`py-heap --json` and `py-heap` in gdb on the core: the CLI's census, through the
    debugger's memory."""
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


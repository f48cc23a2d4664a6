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
import re

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


def human(n):
    """Bytes as the text writes them (src/report/bytes_text.rs)."""
    v, unit = float(n), 0
    while v >= 1024 and unit < 3:
        v, unit = v / 1024, unit + 1
    return "%d B" % n if unit == 0 else "%.1f %s" % (v, ["B", "KiB", "MiB", "GiB"][unit])


def held_by_text(steps):
    """A `held_by` path as the text writes it: a Python expression where there is one."""
    out = ""
    for step in steps:
        (kind, value), = [(k, v) for k, v in step.items() if k not in ("function", "thread")]
        if kind == "module":
            out += value
        elif kind == "attr":
            out += "." + value
        elif kind in ("key", "index"):
            out += "[%s]" % value
        elif kind == "closure":
            out += " closure " + value
        elif kind == "via":
            out += " -> <%s>" % value
        else:
            raise AssertionError("a step the text check does not know: %r" % step)
    return out


SIZE = r"\d+(?:\.\d)? (?:B|KiB|MiB|GiB)"
TYPE_ROW = re.compile(r"^(\S+) +(\d+) +(%s) +(\d+\.\d)%%(.*)$" % SIZE)
LARGEST_ROW = re.compile(r"^  (0x[0-9a-f]+)  (\S+) +(%s)(?:  len (\d+))?$" % SIZE)
RETAINER_ROW = re.compile(r"^ +(%s)  (0x[0-9a-f]+)  (\S+)(?: len (\d+))?  (.+)$" % SIZE)


def process_text(report):
    """The headline's process part the JSON's `heap.process` makes: a core's written anonymous
    memory, nothing where there is none (a debugger's live process)."""
    process = report["heap"].get("process") or {}
    if process.get("rss") is None:
        return ""
    assert process["source"] == "core", process
    return " of %s written anonymous memory" % human(process["rss"])


def check_text(text, report):
    """The text of `--heap` (or `py-heap`) row by row against the JSON `report` of the same
    census: the headline's counts, each type row (type, count, bytes, share), the count of the
    types left out, each largest object (address, type, bytes, length), each retainer
    (retained bytes, address, type, length, path). Returns the headline's process part."""
    h = report["heap"]
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("Heap: "))
    head = "Heap: %s objects, %s" % (format(h["objects"], ","), human(h["bytes"]))
    assert lines[at].startswith(head), (lines[at], head)
    assert lines[at + 2].split() == ["type", "count", "bytes", "share"], lines[at + 2]
    rows, i = [], at + 3
    while TYPE_ROW.match(lines[i]):
        rows.append(TYPE_ROW.match(lines[i]).groups())
        i += 1
    want = [(t["type"], str(t["count"]), human(t["bytes"]),
             "%.1f" % (t["bytes"] * 100.0 / h["bytes"]), "") for t in h["types"][:len(rows)]]
    assert rows == want
    left = len(h["types"]) - len(rows)
    if left:
        assert lines[i] == "... %d more types" % left, lines[i]
        i += 1
    assert lines[i:i + 2] == ["", "Largest objects:"], lines[i:i + 2]
    i += 2
    largest = []
    while i < len(lines) and LARGEST_ROW.match(lines[i]):
        largest.append(LARGEST_ROW.match(lines[i]).groups())
        i += 1
    assert largest == [("%#x" % o["address"], o["type"], human(o["bytes"]),
                        None if o["len"] is None else str(o["len"]))
                       for o in h["largest"][:len(largest)]]
    assert len(largest) == min(len(rows), len(h["largest"])), (len(largest), len(rows))
    if h["retainers"]:
        assert lines[i:i + 2] == ["", "What keeps the most alive (retained: it and what only "
                                      "it reaches):"], lines[i:i + 2]
        i += 2
        kept = []
        while i < len(lines) and RETAINER_ROW.match(lines[i]):
            kept.append(RETAINER_ROW.match(lines[i]).groups())
            i += 1
        assert kept == [(human(r["retained"]), "%#x" % r["address"], r["type"],
                         None if r["len"] is None else str(r["len"]), held_by_text(r["held_by"]))
                        for r in h["retainers"][:len(kept)]]
        assert kept, lines[i - 2:i + 3]
    return lines[at][len(head):]


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
    """The text row by row against the JSON of the same census, which `check` holds to the
    program's record; its process part is the RSS the text's own run read."""
    live, _, truth, text, _ = stop
    process = check_text(text, live)
    assert re.fullmatch(r" of %s RSS" % SIZE, process), process
    assert any(line.startswith("__main__.Order ") for line in text.splitlines()), text


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
    assert check_text(text, report) == process_text(report)


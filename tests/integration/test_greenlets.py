"""Greenlets: `pyunwind pid|core --greenlets --json` and gdb's `py-greenlets` (`--json` and text,
on the core) against the truth tests/scenarios/greenlets_raw.py and greenlets_gevent.py record
about themselves: every greenlet the collector tracks, by address, and each one's thread, state,
parent, type, gevent name and function, and frames exactly (function, file, line).

greenlet and gevent come from PyPI (tools/greenlet.sh, run by tools/test-env.sh), one folder
per set and ABI under $PYUNWIND_CACHE/greenlet, which the scenarios put on sys.path
($PYUNWIND_GREENLET). The lldb side is test_lldb_greenlets.py."""

import json
import re

import pytest

import harness
from test_stacks import check_report, expected, got, json_from, run_gdb, traceback_frames
from test_why_io import comm_of

CLI_TIMEOUT = 60
# The interpreters of the matrix: the pyenv builds (and their stripped copies), Debian's
# stripped 3.11, sid's 3.14 and 3.15 (debug info hidden, as for a user without -dbg).
INTERPS = harness.interpreters() + tuple(
    i for i in harness.provisioned_interpreters() if not i.debug_dir and not i.id.startswith("ft-"))
# The free-threaded build keeps no GC lists: its greenlets are found by a heap scan.
FREE_THREADED = harness.pick(["ft-3.13t"])

# tools/greenlet.sh's sets: set -> greenlet version it holds, per ABI where it differs.
LATEST = "3.5.6"
# greenlet 3.3+ ships free-threaded wheels for 3.14t only: 3.2.2 is the newest for cp313t.
LATEST_FT = "3.2.2"
# Before `_self` moved into the C++ Greenlet object (3.1.1): the raw scenario on pyenv 3.12.
OLD_SETS = {"g303": "3.0.3", "g310": "3.1.0"}

# Interpreters with no gevent in the `latest` set, and why; anything else must have it (and one
# of these that gets it fails test_gevent_absent_only_where_expected: update the list then).
GEVENT_ABSENT = {
    # gevent 26.9.0 ships no free-threaded wheel (none for cp313t, nor any older gevent).
    "ft-3.13t": "no gevent wheel for cp313t",
}
GEVENT_INTERPS = [i for i in INTERPS if i.id not in GEVENT_ABSENT]

# Every field of a greenlet entry compared as it is (frames are compared apart).
FIELDS = ("thread", "state", "parent", "main", "type", "name", "function")


def abi(interp):
    return "cp3%d%s" % (interp.minor, "t" if interp.id.startswith("ft-") else "")


def greenlet_dir(interp, set_name="latest"):
    path = harness.cache_dir() / "greenlet" / set_name / abi(interp)
    if not (path / "STAMP").is_file():
        raise harness.HarnessError("%s is missing: run tools/greenlet.sh (tools/test-env.sh)"
                                   % path)
    return path


def want_version(interp, set_name):
    if set_name in OLD_SETS:
        return OLD_SETS[set_name]
    return LATEST_FT if interp.id.startswith("ft-") else LATEST


def start(interp, name, set_name="latest", variant=None, core=True):
    """The scenario, running, with its core (``sc.core``) unless ``core`` is false."""
    args = (variant,) if variant else ()
    sc = harness.Scenario(interp, name, args=args,
                          env={"PYUNWIND_GREENLET": str(greenlet_dir(interp, set_name))})
    try:
        assert sc.truth["greenlet_version"] == want_version(interp, set_name), sc.truth
        sc.core = sc.make_core() if core else None
    except BaseException:
        sc.close()
        raise
    return sc


def cli(sc, source):
    target = ["pid", str(sc.pid)] if source == "live" else ["core", sc.core]
    rc, out, err = harness.run([harness.cli_path()] + target + ["--greenlets", "--json"],
                               CLI_TIMEOUT)
    harness.assert_no_panic(out + err, rc)
    assert rc == 0, "pyunwind %s --greenlets --json failed (%d): %s" % (" ".join(target), rc, err)
    return json.loads(out)


def label(entry):
    return "%s (%#x)" % (entry.get("label") or "greenlet", entry["address"])


def check_greenlets(report, truth, live=False):
    """`greenlets` of a report against the truth: the same addresses, every field, the frames
    exactly (on a free-threaded build too, where they are found by a heap scan), and each
    greenlet's `waiting` exactly as the program recorded it (null where it waits on nothing):
    check_waits (`live`: the report is of the running process)."""
    assert "greenlets" in report, sorted(report)
    shown = {g["address"]: g for g in report["greenlets"]}
    assert len(shown) == len(report["greenlets"]), "an address listed twice"
    want = {g["address"]: g for g in truth["greenlets"]}
    assert set(shown) == set(want), "missing %s; extra %s" % (
        sorted(label(want[a]) for a in set(want) - set(shown)),
        sorted("%#x" % a for a in set(shown) - set(want)))
    for address, w in want.items():
        g = shown[address]
        for field in FIELDS:
            assert g[field] == w[field], "%s: %s is %r, want %r" % (label(w), field, g[field],
                                                                    w[field])
        assert got(g["frames"]) == expected(w["frames"]), label(w)
        assert all(f["kind"] == "python" for f in g["frames"]), label(w)
    check_waits(report, truth, live)
    assert report["errors"] == []


def check_waits(report, truth, live=False):
    """Each greenlet's `waiting` is the one its program recorded (`waits`, by address: kind,
    object, type, owner, and the index of the frame making the wait; a socket's fd, direction
    and, `live` only, its addresses, null from a core), or null for a greenlet the program
    records as waiting on nothing."""
    # Every socket of the scenario has its other end in the scenario itself (its clients and
    # its server): that is the process at the other end, live.
    me = {"pid": truth["pid"], "command": comm_of(truth["pid"])} if live else None
    waits = {int(k): v if not v or v["kind"] != "socket"
             else dict(v, peer_process=me) if live
             else dict(v, local=None, peer=None, peer_process=None)
             for k, v in truth["waits"].items()}
    labels = {e["address"]: label(e) for e in truth["greenlets"]}
    assert set(waits) == set(labels), "the truth's waits are not its greenlets'"
    wrong = {labels[g["address"]]: {"got": g.get("waiting"), "want": waits[g["address"]]}
             for g in report["greenlets"] if g.get("waiting") != waits[g["address"]]}
    assert wrong == {}, wrong


def check_cli_report(report, truth, live=False):
    # check_report holds on a free-threaded build too (`holds_gil` null for every thread).
    check_report(report, truth, live_cli=live)
    check_greenlets(report, truth, live)


GREENLET_LINE = re.compile(r"^  Greenlet (0x[0-9a-f]+) ")


def check_text(text, truth):
    """`py-greenlets`: each suspended greenlet's frames (as py-bt prints them, `File "F",
    line N, in FUNC`) follow the line that names it (`  Greenlet 0x… (type) suspended:`), up to
    the next such line or the next unindented one (a thread's header, a summary)."""
    addresses = {g["address"] for g in truth["greenlets"]}
    blocks, current = {}, None
    for line in text.splitlines():
        m = GREENLET_LINE.match(line)
        if m and int(m.group(1), 16) in addresses:
            current = int(m.group(1), 16)
            blocks.setdefault(current, [])
        elif not line[:1].strip() and current is not None:
            # A greenlet's traceback is indented 4 more than a thread's.
            blocks[current].append(line[4:])
        else:
            current = None
    for g in truth["greenlets"]:
        if g["state"] != "suspended":
            continue
        assert g["address"] in blocks, "%s not shown:\n%s" % (label(g), text)
        assert traceback_frames("\n".join(blocks[g["address"]])) == expected(g["frames"]), (
            label(g), text)


def gdb_greenlets(sc):
    """(the report of `py-greenlets --json`, the text of `py-greenlets`) on the core."""
    out, _ = run_gdb(sc.interp, "echo @@JSON@@\\n", "py-greenlets --json", "echo @@TEXT@@\\n",
                     "py-greenlets", core=sc.core)
    harness.assert_no_panic(out)
    js, text = out.split("@@JSON@@\n", 1)[1].split("@@TEXT@@\n", 1)
    return json_from(js), text


# --- raw greenlets (tests/scenarios/greenlets_raw.py) ---------------------------------------


@pytest.fixture(scope="module", params=INTERPS + tuple(FREE_THREADED), ids=lambda i: i.id)
def raw(request):
    sc = start(request.param, "greenlets_raw")
    yield sc
    sc.close()


@pytest.mark.parametrize("source", ["live", "core"])
def test_raw_cli(raw, source):
    check_cli_report(cli(raw, source), raw.truth, live=source == "live")


def test_raw_native_and_locals(raw):
    """`--greenlets` with `--native` and `--locals` on the core: the same greenlets and
    frames, and each frame of the 30-deep `descend` recursion has its own `n`, 0 innermost."""
    rc, out, err = harness.run([harness.cli_path(), "core", raw.core, "--greenlets", "--native",
                                "--locals", "--json"], CLI_TIMEOUT)
    harness.assert_no_panic(out + err, rc)
    assert rc == 0, err
    report = json.loads(out)
    check_greenlets(report, raw.truth)
    labels = {e["address"]: e["label"] for e in raw.truth["greenlets"]}
    deep = [g for g in report["greenlets"] if labels.get(g["address"]) in ("deep", "wdeep")]
    assert len(deep) == 2, labels
    for g in deep:
        ns = [dict((l["name"], l["repr"]) for l in f["locals"])["n"]
              for f in g["frames"] if f["function"] == "descend"]
        assert ns == [str(i) for i in range(len(ns))] and len(ns) == 31, (labels[g["address"]], ns)


def test_raw_gdb(raw):
    report, text = gdb_greenlets(raw)
    check_greenlets(report, raw.truth)
    check_text(text, raw.truth)


@pytest.mark.parametrize("interp", tuple(FREE_THREADED + harness.pick(["pyenv-3.12"], INTERPS)),
                         ids=lambda i: i.id)
def test_raw_gdb_debugger_memory(interp):
    """Memory read through gdb (`set pyunwind-memory debugger`) comes without a memory map:
    the greenlets all the same (a free-threaded build's from its mimalloc GC heaps), each
    with its thread, told from where its stack lies (below a thread's `pthread_t`, the main
    thread's below glibc's `__libc_stack_end`), its state and its frames."""
    with start(interp, "greenlets_raw") as sc:
        out, _ = run_gdb(interp, "set pyunwind-memory debugger", "echo @@JSON@@\\n",
                         "py-greenlets --json", "echo @@TEXT@@\\n", "py-greenlets", core=sc.core)
        harness.assert_no_panic(out)
        js, text = out.split("@@JSON@@\n", 1)[1].split("@@TEXT@@\n", 1)
        report = json_from(js)
        assert report["python"]["source"] == "debugger"
        check_greenlets(report, sc.truth)
        check_text(text, sc.truth)


# `Greenlet._top_frame` + 8: what is read of every greenlet's C++ `Greenlet` before anything
# else (greenlet 3.1.1+, src/greenlet/layout.rs: 104 + 8 from CPython 3.11, 120 + 8 on 3.10).
GREENLET_PREFIX = {10: 128}
GREENLET_PREFIX_DEFAULT = 112


def pimpl_slot(core, obj):
    """The address of the PyGreenlet ``obj``'s `pimpl`: the word after its header that points
    at a C++ `Greenlet` whose `_self` (its second word) points back at ``obj``."""
    found = [obj + k for k in range(16, 72, 8)
             if core.has(core.read_u64(obj + k) + 8, 8)
             and core.read_u64(core.read_u64(obj + k) + 8) == obj]
    assert len(found) == 1, "pimpl of %#x: %r" % (obj, found)
    return found[0]


def unreadable_tail(core, prefix, near):
    """An address whose ``prefix`` bytes the core holds, all zero (no object uses them), and
    whose next byte no segment or mapped file holds: the end of a segment before a gap, the
    one holding ``near`` first (a malloc heap ends in its free top chunk), then the largest."""
    files = [(start, end) for start, end, _, _ in core.mapped_files()]
    mapped = [(v, v + memsz) for v, _, _, memsz in core.loads] + files
    for vaddr, _, filesz, _ in sorted(core.loads, key=lambda l: (not l[0] <= near < l[0] + l[2],
                                                                 -l[2])):
        end = vaddr + filesz
        if any(a <= end < b for a, b in mapped) or any(a < end and vaddr < b for a, b in files):
            continue
        if core.read(end - prefix, prefix) == bytes(prefix):
            return end - prefix
    raise AssertionError("no segment of %s ends in %d zero bytes before a gap"
                         % (core.path, prefix))


def moved_greenlet_report(raw, label, tmp_path):
    """(the address of the greenlet ``label``, the CLI's report of a copy of the core in which
    that greenlet's C++ `Greenlet` is moved, whole as far as the first read goes, to where a
    segment ends before a gap: the words after it cannot be read)."""
    from corefile import CoreFile, u64

    core = CoreFile(raw.core)
    address = next(g["address"] for g in raw.truth["greenlets"] if g["label"] == label)
    slot = pimpl_slot(core, address)
    prefix = GREENLET_PREFIX.get(raw.interp.minor, GREENLET_PREFIX_DEFAULT)
    moved = unreadable_tail(core, prefix, core.read_u64(slot))
    path = core.patched_copy(tmp_path / "core.greenlet", {
        moved: core.read(core.read_u64(slot), prefix), slot: u64(moved)})
    rc, out, err = harness.run([harness.cli_path(), "core", path, "--greenlets", "--json"],
                               CLI_TIMEOUT)
    harness.assert_no_panic(out + err, rc)
    assert rc == 0, err
    return address, json.loads(out)


def error_heads(report):
    """(address, the first two parts of the message) of each error entry."""
    return [(e["address"], e["what"].split(": ", 2)[:2]) for e in report["errors"]]


def test_raw_one_corrupt_greenlet(raw, tmp_path):
    """One greenlet (``deep``) whose main greenlet and parent cannot be read: it is one error
    entry with its address, and every other greenlet and thread is still listed exactly as the
    truth has them."""
    deep, report = moved_greenlet_report(raw, "deep", tmp_path)
    assert error_heads(report) == [(deep, ["greenlets", "greenlet %#x" % deep])], report["errors"]
    others = dict(raw.truth, greenlets=[g for g in raw.truth["greenlets"] if g["address"] != deep],
                  waits={k: v for k, v in raw.truth["waits"].items() if int(k) != deep})
    check_cli_report(dict(report, errors=[]), others)


def test_raw_one_corrupt_main_greenlet(raw, tmp_path):
    """The worker thread's main greenlet, whose thread state cannot be read: it is one error
    entry; its greenlets (``wdeep``, ``wgen``) are listed with their frames, their thread
    unknown (null) and one error entry each that says why; every other greenlet and thread is
    exactly the truth's."""
    main, report = moved_greenlet_report(raw, "main of greenlet-worker", tmp_path)
    ours = sorted(g["address"] for g in raw.truth["greenlets"]
                  if g["parent"] == main and g["label"] in ("wdeep", "wgen"))
    assert len(ours) == 2, raw.truth["greenlets"]
    heads = error_heads(report)
    assert heads[0] == (main, ["greenlets", "greenlet %#x" % main]), report["errors"]
    assert sorted(heads[1:]) == [(g, ["greenlets", "greenlet %#x" % g]) for g in ours], heads
    lost = "its main greenlet %#x cannot be read" % main
    assert all(e["what"].split(": ", 2)[2].startswith(lost) for e in report["errors"][1:]), (
        report["errors"])
    others = dict(raw.truth, greenlets=[dict(g, thread=None) if g["address"] in ours else g
                                        for g in raw.truth["greenlets"] if g["address"] != main],
                  waits={k: v for k, v in raw.truth["waits"].items() if int(k) != main})
    check_cli_report(dict(report, errors=[]), others)


# The main thread and the worker blocked inside a greenlet of their own ("inside"); and the
# greenlets older than `_self` in their C++ object (3.0.3: the first whose frames are exposed
# on 3.12; 3.1.0: the last without `_self`), on pyenv 3.12: from the core, by the CLI.
VARIANTS = [pytest.param((i, "inside", "latest"), id="%s-inside" % i.id) for i in INTERPS] + [
    pytest.param((i, "main", s), id="%s-greenlet-%s" % (i.id, v))
    for i in harness.pick(["pyenv-3.12"]) for s, v in OLD_SETS.items()]


@pytest.fixture(scope="module", params=VARIANTS)
def raw_variant(request):
    interp, variant, set_name = request.param
    sc = start(interp, "greenlets_raw", set_name, variant)
    yield sc
    sc.close()


def test_raw_variant_cli_core(raw_variant):
    check_cli_report(cli(raw_variant, "core"), raw_variant.truth)


def test_raw_truth_has_every_state():
    """The scenario's own promise, on one interpreter: each state, the exited thread's greenlets,
    a parent chain, a subclass (guards the truth the tests above compare with)."""
    with start(harness.pick(["pyenv-3.12"])[0], "greenlets_raw", variant="inside",
               core=False) as sc:
        by_label = {g["label"]: g for g in sc.truth["greenlets"]}
    assert {g["state"] for g in by_label.values()} == {"running", "suspended", "not_started",
                                                       "dead"}
    assert by_label["inner"]["parent"] == by_label["outer"]["address"]
    assert by_label["orphan"]["thread"] is None and by_label["orphan"]["state"] == "suspended"
    assert by_label["main of greenlet-gone"]["state"] == "dead"
    assert len(by_label["deep"]["frames"]) == 31
    assert by_label["gen"]["type"] == "Gen" and by_label["deep"]["type"] == "greenlet.greenlet"
    assert by_label["runner"]["state"] == by_label["wrunner"]["state"] == "running"
    assert by_label["main of MainThread"]["state"] == "suspended"
    assert [f["function"] for f in by_label["sorter"]["frames"]] == ["by_key.<locals>.key",
                                                                      "by_key"]


def test_unsupported_version():
    """A greenlet that says it is 9.0.0 (a version whose layout nobody has checked): one error
    line that names it, and no greenlet listed, never frames read with a guessed layout."""
    interp = harness.pick(["pyenv-3.12"])[0]
    sc = harness.Scenario(interp, "greenlets_raw",
                          env={"PYUNWIND_GREENLET": str(greenlet_dir(interp, "latest")),
                               "PYUNWIND_GREENLET_VERSION": "9.0.0"})
    try:
        sc.core = sc.make_core()
        for source in ("live", "core"):
            report = cli(sc, source)
            assert report["greenlets"] == [], source
            assert [e["what"] for e in report["errors"]] == [
                "greenlets: greenlet 9.0.0 is not supported (3.0 to 3.5 are)"], source
            # The threads are read as ever.
            check_report(dict(report, errors=[]), sc.truth, live_cli=source == "live")
    finally:
        sc.close()


# --- gevent (tests/scenarios/greenlets_gevent.py) -------------------------------------------


@pytest.fixture(scope="module", params=GEVENT_INTERPS, ids=lambda i: i.id)
def gev(request):
    sc = start(request.param, "greenlets_gevent")
    assert sc.truth["gevent_version"] == "26.9.0"
    yield sc
    sc.close()


@pytest.mark.parametrize("source", ["live", "core"])
def test_gevent_cli(gev, source):
    report = cli(gev, source)
    check_cli_report(report, gev.truth, live=source == "live")
    waits = [w for w in gev.truth["waits"].values() if w]
    # 7 clients, 7 handlers (5 in `app`, 2 of partial requests), sem-0, sem-1, sleeper, waiter
    # and the main greenlet in serve_forever.
    assert len(waits) == 19, waits
    for broken in broken_wait_reports(report, gev.truth):
        with pytest.raises(AssertionError):
            check_waits(broken, gev.truth, source == "live")


def test_gevent_gdb(gev):
    report, text = gdb_greenlets(gev)
    check_greenlets(report, gev.truth)
    check_text(text, gev.truth)


def test_gevent_why_text(gev):
    """`--why --greenlets`: one line per thread counts what its greenlets wait on, each
    waitable once (sockets and sleeps by kind; sockets first, a single socket named as a
    thread's socket wait is, by its fd and direction: a core has no addresses)."""
    rc, out, err = harness.run([harness.cli_path(), "core", gev.core, "--greenlets", "--why"],
                               CLI_TIMEOUT)
    harness.assert_no_panic(out + err, rc)
    assert rc == 0, err
    counts = {}
    for w in filter(None, gev.truth["waits"].values()):
        if w["kind"] == "socket":
            key = "on a socket"
        elif w["kind"] == "sleep":
            key = "in gevent.sleep"
        else:
            key = "on %s %#x (%s)" % (w["kind"], w["object"], w["type"])
        counts[key] = counts.get(key, 0) + 1
    sockets = counts.pop("on a socket", 0)
    expected = sorted("%d %s" % (n, k) for k, n in counts.items())
    if sockets == 1:
        r = json_from(harness.run([harness.cli_path(), "core", gev.core, "--greenlets", "--why",
                                   "--json"], CLI_TIMEOUT)[1])
        (w,) = [g["waiting"] for g in r["greenlets"]
                if g["waiting"] and g["waiting"]["kind"] == "socket"]
        first = ["1 on socket fd %d (%s)" % (w["fd"], w["direction"])]
    else:
        first = ["%d on sockets" % sockets] if sockets else []
    lines = [l for l in out.splitlines() if l.startswith("Greenlets of thread ")]
    assert len(lines) == 1, out
    parts = lines[0].split(" wait: ", 1)[1].split(", ")
    assert parts[:len(first)] == first, lines[0]
    assert sorted(parts[len(first):]) == expected, lines[0]


def broken_wait_reports(report, truth):
    """Copies of a real report each wrong in one way check_waits must catch: a wait's frame
    off by one, a socket wait on another socket, a wait dropped, a wait given to a greenlet
    that waits on nothing."""
    by_label = {e["label"]: e["address"] for e in truth["greenlets"]}

    def mutated(label, change):
        copy = dict(report, greenlets=[dict(g) for g in report["greenlets"]])
        g = next(g for g in copy["greenlets"] if g["address"] == by_label[label])
        g["waiting"] = change(dict(g["waiting"]) if g.get("waiting") else None)
        return copy

    other = truth["waits"][str(by_label["client-1"])]["object"]
    return [mutated("handler /req-0", lambda w: dict(w, frame=w["frame"] + 1)),
            mutated("sleeper", lambda w: dict(w, frame=w["frame"] + 1)),
            mutated("client-0", lambda w: dict(w, object=other)),
            mutated("handler of partial-0", lambda w: dict(w, object=other)),
            mutated("client-2", lambda w: dict(w, fd=w["fd"] + 1)),
            mutated("client-3", lambda w: dict(w, direction="send")),
            mutated("sem-0", lambda w: None),
            mutated("finished", lambda w: {"kind": "event", "object": 1, "type": "x",
                                           "owner": None, "frame": 0}),
            mutated("hub", lambda w: {"kind": "sleep", "object": None, "type": None,
                                      "owner": None, "frame": 0})]


def test_gevent_absent_only_where_expected():
    """GEVENT_ABSENT is not a skip list gone stale: each interpreter it names really has no
    gevent in its `latest` set, and every other one does."""
    for interp in INTERPS + tuple(FREE_THREADED):
        has = (greenlet_dir(interp) / "gevent" / "__init__.py").is_file()
        assert has is (interp.id not in GEVENT_ABSENT), (interp.id, GEVENT_ABSENT.get(interp.id))

"""The memory of numpy arrays (docs/report.md, "The memory of arrays"), exact against
tests/scenarios/heap_arrays.py's own record: `numpy.ndarray` counts what `sys.getsizeof` gives
(its data when it owns it, none for a view), so the retained bytes of the list of owning arrays
and of the list of views (each keeping its base alive) are the program's; numpy scalars and
arrays in a frame's locals read as numpy's own repr and as a summary. numpy 1.26.4 and 2.2.6 on
3.10, 2.3.5 on 3.11, 2.5.5 on 3.12, 3.13 and sid's 3.14 and 3.15, 2.4.6 on the free-threaded
3.13t (tools/numpy.sh: RUNS), live and from a gcore core; gdb's `py-locals` and `py-print` on a core (lldb's:
test_lldb_arrays.py)."""

import json

import pytest

import harness
from test_heap_holders import cli, target
from test_stacks import run_gdb

INSTALL_TIMEOUT_SECONDS = 600
NUMPY_SH = harness.repo_root() / "tools" / "numpy.sh"
# Each interpreter and a numpy set (tools/numpy.sh) it runs with: every numpy minor whose
# scalars' text differs (1.26; 2.2: no NaT unit, 1e16 for every float; 2.3: 1e3 for float16
# and 1e6 for float32; 2.4 on: a NaT's unit), numpy 2 on every interpreter.
RUNS = [("pyenv-3.10", "np1/cp310"), ("pyenv-3.10", "np2/cp310"), ("pyenv-3.11", "np2/cp311"),
        ("pyenv-3.12", "np2/cp312"), ("pyenv-3.13", "np2/cp313"), ("debian-3.14", "np2/cp314"),
        ("debian-3.15", "np2/cp315"), ("ft-3.13t", "np2/cp313t")]
# The set gdb and lldb read an interpreter's core with (test_lldb_arrays.py).
SETS = {"pyenv-3.10": "np1/cp310", "pyenv-3.12": "np2/cp312", "ft-3.13t": "np2/cp313t"}
# Enough retainers that the list of views (120 KiB retained) is among them.
TOP = 60


@pytest.fixture(scope="module")
def numpy_root():
    pip = harness.cache_dir() / "venv" / "bin" / "pip"
    rc, out, err = harness.run(["bash", NUMPY_SH, pip], INSTALL_TIMEOUT_SECONDS)
    if rc != 0:
        pytest.fail("tools/numpy.sh failed (%d):\n%s" % (rc, err[-3000:]), pytrace=False)
    return harness.cache_dir() / "numpy"


@pytest.fixture(scope="module", params=RUNS, ids=lambda r: "%s-%s" % (r[0], r[1].split("/")[0]))
def scenario(request, numpy_root):
    interp_id, numpy_set = request.param
    (interp,) = harness.pick([interp_id])
    env = {"PYUNWIND_NUMPY": str(numpy_root / numpy_set)}
    with harness.Scenario(interp, "heap_arrays", env=env) as sc:
        sc.interp = interp
        sc.core = sc.make_core()
        yield sc


@pytest.mark.parametrize("source", ["live", "core"])
def test_arrays_count_what_getsizeof_gives(scenario, source):
    sc = scenario
    report = harness.check_report_schema(json.loads(
        cli(*target(sc, source), "--heap", "--heap-top", TOP, "--json")))
    assert not [e for e in report["errors"] if "numpy" in e["what"]], report["errors"]
    h = report["heap"]
    assert h["complete"] is True
    arrays = sc.truth["arrays"]
    # numpy 2.4 on keeps no array of its own: every array of the process is one the scenario
    # made; older ones keep more (their import makes them: 75 in 1.26, 36 in 2.2 and 2.3).
    (nd,) = [t for t in h["types"] if t["type"] == "numpy.ndarray"]
    made = (len(arrays), sum(a[0] for a in arrays.values()))
    if tuple(int(p) for p in sc.truth["numpy"].split(".")[:2]) >= (2, 4):
        assert (nd["count"], nd["bytes"]) == made, nd
    else:
        assert nd["count"] > made[0] and nd["bytes"] > made[1], nd
    # The local `grid` (8 MB of its own data) is the largest object, exact.
    grid = max(arrays.items(), key=lambda kv: kv[1][0])
    assert h["largest"][0] == {"address": int(grid[0]), "type": "numpy.ndarray",
                               "bytes": grid[1][0], "len": None}, h["largest"][0]
    check_lists(h, sc.truth["lists"])


def check_lists(h, lists):
    """Each of the program's lists is among the retainers, its size and retained bytes its
    own record's."""
    got = {r["address"]: r for r in h["retainers"]}
    for lst in lists:
        r = got.get(lst["address"])
        assert r is not None, (lst, h["retainers"])
        assert (r["type"], r["len"], r["bytes"], r["retained"]) == (
            "list", lst["len"], lst["bytes"], lst["retained"]), (r, lst)


def main_frame_locals(report, truth):
    main = truth["threads"][0]
    (t,) = [t for t in report["threads"] if t["thread_id"] == main["thread_id"]]
    frame = next(f for f in t["frames"] if f.get("function") == "stop")
    return {lc["name"]: lc["repr"] for lc in frame["locals"]}


def expected_locals(truth):
    """{local: text} of the frame's numpy scalars (their repr in the program) and arrays (the
    summaries it wrote)."""
    frame = truth["threads"][0]["frames"][0]
    want = {n: frame["locals"][n] for n, o in frame["local_objects"].items()
            if o["type"].startswith("numpy.") and o["type"] != "numpy.ndarray"}
    assert len(want) >= 60, want
    # The one it leaves as any other object.
    structured = frame["local_objects"]["structured"]
    want["structured"] = "<numpy.void object at %#x>" % structured["id"]
    want.update(truth["summaries"])
    return want


@pytest.mark.parametrize("source", ["live", "core"])
def test_locals_read_as_numpy_prints_them(scenario, source):
    sc = scenario
    report = harness.check_report_schema(json.loads(
        cli(*target(sc, source), "--locals", "--json")))
    got = main_frame_locals(report, sc.truth)
    want = expected_locals(sc.truth)
    assert {n: got.get(n) for n in want} == want


# The locals printed again by `py-print` in gdb and lldb (test_lldb_arrays.py).
PRINTED = ["grid", "part", "h_max", "c128_neg", "ld_third", "text_uni", "nat_s"]


@pytest.mark.parametrize("interp", harness.pick(["pyenv-3.10", "pyenv-3.12"]), ids=lambda i: i.id)
def test_py_locals_in_gdb(interp, numpy_root):
    env = {"PYUNWIND_NUMPY": str(numpy_root / SETS[interp.id])}
    with harness.Scenario(interp, "heap_arrays", env=env) as sc:
        out, _ = run_gdb(interp, "thread 1", "py-locals", "echo @@PRINT@@\\n",
                         *("py-print %s" % n for n in PRINTED), core=sc.make_core())
        harness.assert_no_panic(out)
        locals_part, print_part = out.split("@@PRINT@@")
        want = expected_locals(sc.truth)
        for name, text in want.items():
            assert "%s = %s\n" % (name, text) in locals_part, (name, text, out)
        for name in PRINTED:
            assert "local '%s' = %s\n" % (name, want[name]) in print_part, (name, out)


# --- heap.process -----------------------------------------------------------------------------


def smaps_rss(pid):
    with open("/proc/%d/smaps_rollup" % pid, encoding="ascii") as f:
        fields = dict(line.split(":", 1) for line in f if line[:1].isupper())
    return int(fields["Rss"].split()[0]) * 1024


def core_anonymous_bytes(path):
    """The written anonymous bytes of an ELF core, read here with struct: the p_filesz of each
    writable PT_LOAD (PF_W) that no NT_FILE entry overlaps."""
    import struct
    with open(path, "rb") as f:
        data = f.read(1 << 20)
        (phoff,) = struct.unpack_from("<Q", data, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
        loads, files = [], []
        for i in range(phnum):
            p_type, p_flags, p_offset, p_vaddr, _, p_filesz, p_memsz, _ = struct.unpack_from(
                "<IIQQQQQQ", data, phoff + i * phentsize)
            if p_type == 1:
                loads.append((p_vaddr, p_memsz, p_filesz, p_flags))
            elif p_type == 4:
                f.seek(p_offset)
                note = f.read(p_filesz)
                at = 0
                while at + 12 <= len(note):
                    namesz, descsz, ntype = struct.unpack_from("<III", note, at)
                    desc = at + 12 + (namesz + 3) // 4 * 4
                    if ntype == 0x46494C45:  # NT_FILE
                        count, _page = struct.unpack_from("<QQ", note, desc)
                        for k in range(count):
                            files.append(struct.unpack_from("<QQ", note, desc + 16 + 24 * k))
                    at = desc + (descsz + 3) // 4 * 4
    assert files, "no NT_FILE in %s" % path
    return sum(filesz for vaddr, memsz, filesz, flags in loads
               if flags & 2 and filesz and not any(s < vaddr + memsz and e > vaddr
                                                    for s, e in files))


@pytest.mark.parametrize("source", ["live", "core"])
def test_process_beside_the_census(scenario, source):
    sc = scenario
    before = smaps_rss(sc.pid)
    out = cli(*target(sc, source), "--heap", "--json")
    after = smaps_rss(sc.pid)
    h = harness.check_report_schema(json.loads(out))["heap"]
    p = h["process"]
    if source == "live":
        assert p["source"] == "smaps_rollup" and p["pss"] is not None and p["pss"] > 0, p
        assert min(before, after) <= p["rss"] <= max(before, after), (p, before, after)
    else:
        assert p == {"rss": core_anonymous_bytes(sc.core), "pss": None, "source": "core"}, p
    # Its 8 MB array and the rest are in it.
    assert h["bytes"] < p["rss"], (h["bytes"], p)
    text = cli(*target(sc, source), "--heap")
    first = next(line for line in text.splitlines() if line.startswith("Heap: "))
    assert first.startswith("Heap: %s objects, " % format(h["objects"], ",")), first
    assert first.endswith(" RSS" if source == "live" else " written anonymous memory"), first

"""The memory of torch tensors (docs/report.md, "The memory of tensors"), exact against
tests/scenarios/heap_torch.py's own record: `torch.Tensor`'s `data_bytes` is the bytes of every
distinct storage its tensors keep (`untyped_storage().nbytes()`, once per storage by its
`data_ptr()`, views included), and the lists' retained bytes include the storages only they
keep (a storage two lists share is retained by neither). torch 2.15.0 from PyPI on pyenv
3.12.1 (tools/torch.sh), live and from a gcore core; the tensors' summaries in `--locals` and in
gdb's `py-locals` and `py-print` (lldb's: test_lldb_arrays.py)."""

import json

import pytest

import harness
from test_heap_arrays import check_lists
from test_heap import human
from test_heap_diff import grow
from test_heap_holders import cli, target
from test_stacks import run_gdb
from test_why_torch import torch_interp  # noqa: F401 (the fixture)

# The lists of views retain about 80 KB each: among the 60 that keep most (the 60th of the
# process keeps about 24 KB).
TOP = 60


@pytest.fixture(scope="module")
def scenario(torch_interp):  # noqa: F811
    with harness.Scenario(torch_interp, "heap_torch", timeout=120) as sc:
        sc.core = sc.make_core()
        yield sc


@pytest.mark.parametrize("source", ["live", "core"])
def test_tensor_storages_once_each(scenario, source):
    sc = scenario
    where = target(sc, source)
    report = harness.check_report_schema(json.loads(
        cli(*where, "--heap", "--heap-top", TOP, "--json")))
    assert not [e for e in report["errors"] if "torch" in e["what"]], report["errors"]
    h = report["heap"]
    assert h["complete"] is True
    tensors = sc.truth["tensors"]
    storages = {(ptr, n) for n, ptr, _ in tensors.values()}
    (t,) = [t for t in h["types"] if t["type"] == "torch.Tensor"]
    assert (t["count"], t["bytes"], t["data_bytes"], t["device_bytes"]) == (
        len(tensors), sum(s for _, _, s in tensors.values()),
        sum(n for _, n in storages), 0), t
    check_lists(h, sc.truth["lists"])
    text = cli(*where, "--heap", "--heap-top", TOP)
    row = next(line for line in text.splitlines() if line.startswith("torch.Tensor "))
    assert row.endswith(" data"), row


@pytest.mark.parametrize("source", ["live", "core"])
def test_tensor_locals_summaries(scenario, source):
    sc = scenario
    where = target(sc, source)
    report = harness.check_report_schema(json.loads(cli(*where, "--locals", "--json")))
    main = sc.truth["threads"][0]
    (t,) = [t for t in report["threads"] if t["thread_id"] == main["thread_id"]]
    frame = next(f for f in t["frames"] if f.get("function") == "stop")
    got = {lc["name"]: lc["repr"] for lc in frame["locals"]}
    want = sc.truth["summaries"]
    assert {n: got.get(n) for n in want} == want


def test_tensor_locals_in_gdb(scenario, torch_interp):  # noqa: F811
    """gdb's `py-locals` and `py-print` on the core show each tensor as `--locals` does."""
    sc = scenario
    want = sc.truth["summaries"]
    out, _ = run_gdb(torch_interp, "thread 1", "py-locals", "echo @@PRINT@@\\n",
                     *("py-print %s" % n for n in want), core=sc.core)
    harness.assert_no_panic(out)
    locals_part, print_part = out.split("@@PRINT@@")
    for name, text in want.items():
        assert "%s = %s\n" % (name, text) in locals_part, (name, text, out)
        assert "local '%s' = %s\n" % (name, text) in print_part, (name, text, out)


# This one grows the scenario: it runs last, after every test of the process as it started.
def test_diff_counts_the_storages_that_grew(scenario, tmp_path):
    """`pyunwind diff` of live reports before and after the program made ten more tensors: the
    tensor type first, with the program's count, getsizeof and storage bytes of them."""
    sc = scenario
    paths = []
    for name in ("before", "after"):
        if name == "after":
            added = grow(sc, 1)
        paths.append(tmp_path / ("%s.json" % name))
        paths[-1].write_text(cli("pid", sc.pid, "--heap", "--heap-top", TOP, "--json"))
    d = harness.check_report_schema(json.loads(cli("diff", *paths, "--json")))["heap_diff"]
    t = d["types"][0]
    assert (t["type"], t["count_delta"], t["bytes_delta"], t["data_bytes_delta"],
            t["device_bytes_delta"]) == ("torch.Tensor", added["added"], added["bytes"],
                                         added["data_bytes"], 0), t
    after = json.loads(paths[1].read_text())["heap"]
    (now,) = [x for x in after["types"] if x["type"] == "torch.Tensor"]
    assert (t["count"], t["bytes"], t["data_bytes"]) == (now["count"], now["bytes"],
                                                         now["data_bytes"])
    lead = cli("diff", *paths).splitlines()[0]
    assert lead.split(";")[0] == "+%d torch.Tensor objects (+%s, +%s data)" % (
        added["added"], human(added["bytes"]), human(added["data_bytes"])), lead

"""`pyunwind diff OLD.json NEW.json` (docs/report.md, "What grows") against
tests/scenarios/heap_grow.py's own record: a module-level cache grows by 2,000 entries on
SIGUSR1; the diff of `--heap --json` reports made before and after says that the cache grew
(address, path, length, bytes and retained bytes before and after, exact) and that 2,000 bytes
objects of its values' size came. Live (`pid` twice) and from two gcore cores; the text's first
line; bad input: a missing file, a report without a heap, a file that is not JSON."""

import json
import os
import re
import signal
import time

import pytest

import harness

TIMEOUT_SECONDS = 60
INTERPS = harness.pick(["pyenv-3.12", "debian-3.14", "ft-3.13t"])


def cli(*args, rc_ok=(0,)):
    rc, out, err = harness.run([harness.cli_path()] + [str(a) for a in args], TIMEOUT_SECONDS)
    harness.assert_no_panic(out + err, rc)
    assert rc in rc_ok, err
    return rc, out, err


def grow(sc, n):
    """Signal the scenario to grow, and return what it recorded once it is blocked again."""
    os.kill(sc.pid, signal.SIGUSR1)
    path = sc.tmpdir / ("grown-%d.json" % n)
    deadline = time.monotonic() + 10
    while not path.exists():
        assert time.monotonic() < deadline, "the scenario did not grow"
        time.sleep(0.02)
    harness.wait_off_the_fifo(sc.pid, sc.pid)
    return json.loads(path.read_text())


def saved(sc, source, name):
    target = ["pid", sc.pid] if source == "live" else ["core", sc.make_core_named(name)]
    _, out, _ = cli(*target, "--heap", "--json")
    path = sc.tmpdir / name
    path.write_text(out)
    return path


def check_diff(d, before, after):
    grown = d["grown"][0]
    assert grown == {
        "address": after["address"], "type": "dict",
        "len_before": before["len"], "len": after["len"],
        "bytes_before": before["bytes"], "bytes": after["bytes"],
        "retained_before": before["retained"], "retained": after["retained"],
        "held_by": after["held_by"]}, grown
    assert before["address"] == after["address"]
    types = {t["type"]: t for t in d["types"]}
    b = types["bytes"]
    assert b["count_delta"] == after["added"], b
    assert b["bytes_delta"] == after["added"] * after["value_bytes"], b
    assert d["types"][0]["type"] == "bytes", d["types"][:3]


@pytest.mark.parametrize("source", ["live", "core"])
@pytest.mark.parametrize("interp", INTERPS, ids=lambda i: i.id)
def test_diff_says_what_grew(interp, source):
    with harness.Scenario(interp, "heap_grow") as sc:
        before = sc.truth["cache"]
        old = saved(sc, source, "old.json")
        after = grow(sc, 1)
        new = saved(sc, source, "new.json")
        _, out, _ = cli("diff", old, new, "--json")
        check_diff(json.loads(out)["heap_diff"], before, after)
        _, text, _ = cli("diff", old, new)
        first = text.splitlines()[0]
        m = re.fullmatch(r"\+2,000 bytes objects \(\+([\d.]+) MiB\); __main__\._cache grew "
                         r"3,000 → 5,000 \(\+([\d.]+) MiB retained\)", first)
        assert m, first
        assert float(m.group(1)) == round(after["added"] * after["value_bytes"] / (1 << 20), 1)
        assert float(m.group(2)) == round((after["retained"] - before["retained"]) / (1 << 20), 1)


def test_bad_input_is_one_line(tmp_path):
    heapless = tmp_path / "heapless.json"
    heapless.write_text('{"threads": []}')
    junk = tmp_path / "junk.json"
    junk.write_text("not json")
    for old, why in [(tmp_path / "missing.json", "No such file"),
                     (heapless, "has no heap (save it with --heap --json)"),
                     (junk, "not a --json report")]:
        rc, out, err = cli("diff", old, heapless, rc_ok=(1,))
        assert out == "" and len(err.strip().splitlines()) == 1 and why in err, err

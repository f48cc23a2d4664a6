"""`pid PID --why --for SECONDS` (issue 52, docs/report.md "Progress over a window"), checked
against tests/scenarios/spin.py's own record: a thread spinning on a flag is `spinning` (its
stack never moved, one stack, at the place the program saw it spin), a thread making progress
is `busy`, a blocked one keeps its wait. The process runs throughout: nothing stops it.

CPU shares are the machine's to give: they are checked against the rule's bars only, never
for a value. Bad input: `--for` on a core and out-of-range plans are one-line errors; a process
that exits during the window gives its last sample's report with an error entry.

`record` (collapsed, speedscope and pprof) on tests/scenarios/shares.py, whose worker spends 3
of every 4 units of its CPU time in `three` and 1 in `one`: the stacks exact against its record,
the shares within what 300 samples allow, the blocked main thread only with `--idle`. pprof's
file is parsed by protobuf with pprof's own message definitions (pprof_proto.py)."""

import json
import re
import subprocess
import time

import pytest

import harness
import pprof_proto
from test_stacks import expected, got, json_from

CLI_TIMEOUT = 60
WINDOW_SECONDS = 2
INTERPS = harness.pick(["pyenv-3.12", "pyenv-3.11", "debian-3.11"])


def cli(*args):
    rc, out, err = harness.run([str(harness.cli_path())] + [str(a) for a in args],
                               timeout=CLI_TIMEOUT)
    harness.assert_no_panic(out + err, rc)
    return rc, out, err


def watched(sc, *extra):
    rc, out, err = cli("pid", sc.pid, "--why", "--for", WINDOW_SECONDS, *extra)
    assert rc == 0, err
    return out


def check_window(p):
    """The window is the one asked for (the last sample is the report made at its end), and
    every sample read each thread whole or was counted torn."""
    assert WINDOW_SECONDS - 0.1 <= p["window_s"] <= WINDOW_SECONDS + 1.0, p
    # 100 Hz over the window, less what a loaded machine let the sampler take.
    assert 20 <= p["samples"] + p["torn"] <= 100 * WINDOW_SECONDS + 1, p


def settled(sc, truth, names, timeout=10):
    """Wait until threads `names` stand at their recorded frames: the main thread signals ready
    and then needs the GIL, which the spinner holds, to return to its blocking line, so the
    first samples could catch it on its way there."""
    deadline = time.monotonic() + timeout
    while True:
        rc, out, err = cli("pid", sc.pid, "--json")
        assert rc == 0, err
        by_name = {t["name"]: t for t in json_from(out)["threads"]}
        if all(got(by_name[n]["frames"]) == expected(truth[n]["frames"]) for n in names):
            return
        assert time.monotonic() < deadline, "%s never stood at their recorded frames" % (names,)
        time.sleep(0.05)


@pytest.mark.parametrize("interp", INTERPS, ids=lambda i: i.id)
def test_spinning_busy_and_blocked(interp):
    with harness.Scenario(interp, "spin") as sc:
        truth = {t["name"]: t for t in sc.truth["threads"]}
        settled(sc, truth, ("blocked", "MainThread"))
        report = json_from(watched(sc, "--json"))
        by_name = {t["name"]: t for t in report["threads"]}
        assert sorted(by_name) == sorted(truth)
        for name, t in by_name.items():
            assert t["native_id"] == truth[name]["native_id"], name
            check_window(t["progress"])

        spinner = by_name["spinner"]
        p = spinner["progress"]
        assert spinner["state"] == "spinning", p
        assert (p["moved"], p["stacks"]) == (False, 1), p
        assert p["cpu_share"] >= 0.6, p
        assert spinner["waiting"] is None
        assert got(spinner["frames"]) == expected(truth["spinner"]["frames"])

        worker = by_name["worker"]
        p = worker["progress"]
        assert worker["state"] == "busy", p
        assert p["moved"] is True and p["stacks"] >= 2, p
        assert p["cpu_share"] >= 0.1, p
        places = {tuple(x) for x in sc.truth["worker_places"]}
        innermost = worker["frames"][0]
        assert (innermost["function"], innermost["line"]) in places, innermost

        # Blocked: the state and wait of the last sample, its stack never moved.
        for name in ("blocked", "MainThread"):
            t = by_name[name]
            assert t["state"] == "syscall" and t["syscall"] == "futex", (name, t["state"])
            assert t["waiting"]["kind"] == "lock", name
            assert (t["progress"]["moved"], t["progress"]["stacks"]) == (False, 1), name
            assert got(t["frames"]) == expected(truth[name]["frames"]), name
        assert report["errors"] == []

        text = watched(sc)
        lines = text.splitlines()
        spin = truth["spinner"]["frames"][0]
        line = next(l for l in lines if l.startswith('thread %d "spinner"' % truth["spinner"]["native_id"]))
        m = re.fullmatch(
            r'thread %d "spinner" spins in spinner \(spin\.py:%d\) for (\d+\.\d) s: (\d+)%% CPU, '
            r"every sample at the same place" % (truth["spinner"]["native_id"], spin["line"]), line)
        assert m, line
        assert WINDOW_SECONDS - 0.1 <= float(m.group(1)) <= WINDOW_SECONDS + 1.0, line
        assert 60 <= int(m.group(2)) <= 100, line
        line = next(l for l in lines if l.startswith('thread %d "worker"' % truth["worker"]["native_id"]))
        m = re.fullmatch(
            r'thread %d "worker" is busy in (\w+) \(spin\.py:(\d+)\): (\d+)%% CPU, (\d+) distinct '
            r"stacks over (\d+\.\d) s" % truth["worker"]["native_id"], line)
        assert m, line
        assert (m.group(1), int(m.group(2))) in places, line
        assert 10 <= int(m.group(3)) <= 100 and int(m.group(4)) >= 2, line
        # The verdict's order: the spin first, the waits, the busy thread last.
        first = [l.split('"')[1] for l in lines[:4]]
        assert first == ["spinner", "MainThread", "blocked", "worker"], lines[:4]
        assert '"spinner" (holds the GIL) [spinning]:' in text or '"spinner" [spinning' in text


def test_for_on_a_core_and_bad_plans_are_one_line_errors():
    with harness.Scenario(INTERPS[0], "spin") as sc:
        for args, words in [
            (["core", "/nonexistent.core", "--why", "--for", "1"], "a core is one stop"),
            (["pid", sc.pid, "--why", "--for", "0"], "--for 0"),
            (["pid", sc.pid, "--why", "--for", "1", "--rate", "5000"], "--rate 5000"),
            (["pid", sc.pid, "--why", "--for", "10000"], "over 100000 samples"),
            (["pid", sc.pid, sc.pid, "--why", "--for", "1"], "one process"),
        ]:
            rc, out, err = cli(*args)
            assert rc == 1 and out == "", (args, out, err)
            assert err.count("\n") == 1 and words in err, (args, err)


@pytest.mark.parametrize("interp", INTERPS[:1], ids=lambda i: i.id)
def test_a_process_that_exits_mid_window(interp):
    """The last sample's report, with the exit in `errors`; never a crash. A thread that is
    gone by the end is named there too."""
    sc = harness.Scenario(interp, "spin")
    try:
        proc = subprocess.Popen([str(harness.cli_path()), "pid", str(sc.pid), "--why", "--for",
                                 "3", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        time.sleep(1.0)
        sc.close()
        out, err = proc.communicate(timeout=CLI_TIMEOUT)
    finally:
        sc.close()
    harness.assert_no_panic(out + err, proc.returncode)
    assert proc.returncode == 0, err
    report = json_from(out)
    whats = [e["what"] for e in report["errors"]]
    assert any(re.fullmatch(r"process %d exited \d+\.\d s into the window, after \d+ samples: "
                            r"this is its last sample" % sc.pid, w) for w in whats), whats
    assert {t["name"] for t in report["threads"]} == {"MainThread", "spinner", "worker", "blocked"}
    spinner = next(t for t in report["threads"] if t["name"] == "spinner")
    assert spinner["progress"]["moved"] is False and spinner["progress"]["stacks"] == 1
    json.dumps(report)


# --- record -----------------------------------------------------------------------------------

RECORD_SECONDS = 3


def frame_name(f):
    return "%s (%s:%d)" % (f["function"], f["file"], f["line"])


def record(sc, fmt, *extra):
    path = sc.tmpdir / ("profile." + fmt)
    rc, out, err = cli("record", sc.pid, "--duration", RECORD_SECONDS, "--format", fmt,
                       "-o", path, *extra)
    assert rc == 0, err
    m = re.fullmatch(r"pyunwind: (\d+) samples in (\d+\.\d) s \((\d+\.\d) Hz\), (\d+) stack "
                     r"samples written, (\d+) torn, 0 dropped at a cap, 0 unreadable: %s\n"
                     % re.escape(str(path)), out)
    assert m, out
    return path, int(m.group(4))


def shares_stacks(sc):
    """The worker's two stacks (root first), in `three` and in `one`, from the program's
    record."""
    here = str(harness.scenarios_dir() / "shares.py")
    places = sc.truth["places"]
    outer = [frame_name(f) for f in reversed(sc.truth["threads"][1]["frames"])]
    return {
        fn: ";".join(outer + ["worker (%s:%d)" % (here, places["call-" + fn]),
                              "%s (%s:%d)" % (fn, here, places["spin-" + fn])])
        for fn in ("three", "one")
    }


def check_shares(counts, stacks):
    """`counts`: {stack: samples}. The worker's two stacks hold nearly every sample (a sample
    between two calls, or at a function's entry, is rare), 3 to 1 within what 300 samples
    allow (0.75 +- 0.12: about 4.5 standard deviations of a binomial share of 300)."""
    total = sum(counts.values())
    three, one = counts.get(stacks["three"], 0), counts.get(stacks["one"], 0)
    assert three + one >= 0.9 * total, counts
    assert 0.63 <= three / (three + one) <= 0.87, (three, one, counts)


@pytest.mark.parametrize("interp", INTERPS[:2], ids=lambda i: i.id)
def test_record_collapsed_speedscope_and_pprof(interp):
    with harness.Scenario(interp, "shares") as sc:
        stacks = shares_stacks(sc)
        path, written = record(sc, "collapsed")
        counts = {}
        for line in path.read_text().splitlines():
            stack, n = line.rsplit(" ", 1)
            counts[stack] = int(n)
        assert sum(counts.values()) == written
        # Without --idle the main thread (blocked) is not there.
        assert not any(s.endswith("HELD.acquire()") or "main (" in s for s in counts), counts
        check_shares(counts, stacks)

        path, written = record(sc, "speedscope", "--idle")
        doc = json.loads(path.read_text())
        assert doc["$schema"] == "https://www.speedscope.app/file-format-schema.json"
        frames = [frame_name(dict(f, function=f["name"])) for f in doc["shared"]["frames"]]
        by_name = {p["name"]: p for p in doc["profiles"]}
        main, worker = sc.truth["threads"]
        assert sorted(by_name) == sorted('thread %d "%s"' % (t["native_id"], t["name"])
                                         for t in (main, worker))
        assert all(p["type"] == "sampled" for p in doc["profiles"])
        assert sum(sum(p["weights"]) for p in doc["profiles"]) == written

        def counts_of(p):
            return {";".join(frames[i] for i in s): w for s, w in zip(p["samples"], p["weights"])}
        # --idle: the blocked main thread is in every sample, at its one place.
        main_profile = counts_of(by_name['thread %d "MainThread"' % main["native_id"]])
        want = ";".join(frame_name(f) for f in reversed(main["frames"]))
        assert list(main_profile) == [want]
        check_shares(counts_of(by_name['thread %d "worker"' % worker["native_id"]]), stacks)

        before = time.time_ns()
        path, written = record(sc, "pprof")
        p = pprof_proto.parse(path)
        s = p.string_table
        assert s[0] == ""
        assert [(s[t.type], s[t.unit]) for t in p.sample_type] == [("samples", "count"),
                                                                   ("cpu", "nanoseconds")]
        assert (s[p.period_type.type], s[p.period_type.unit], p.period) == (
            "cpu", "nanoseconds", 10_000_000)
        assert before <= p.time_nanos <= before + 5 * 10**9, (before, p.time_nanos)
        assert (RECORD_SECONDS - 0.1) * 1e9 <= p.duration_nanos <= (RECORD_SECONDS + 1) * 1e9
        assert all(x.value[1] == x.value[0] * p.period for x in p.sample)
        by_labels = {}
        for (labels, stack), n in pprof_proto.stacks(p).items():
            by_labels.setdefault(labels, {})[stack] = n
        # Without --idle: the worker alone, named by its labels.
        assert list(by_labels) == [(("thread_id", worker["native_id"]),
                                    ("thread_name", "worker"))], list(by_labels)
        counts = next(iter(by_labels.values()))
        assert sum(counts.values()) == written
        check_shares(counts, stacks)


@pytest.mark.parametrize("interp", INTERPS[:1], ids=lambda i: i.id)
def test_record_json_summary(interp):
    """`record --json`: the closing line as a document (its own kind in the schema, which
    harness.run checks), its counts those of the file written: each thread's samples are its
    stacks' counts in the collapsed file (the worker alone without --idle; the main thread in
    every sample with it)."""
    with harness.Scenario(interp, "shares") as sc:
        main, worker = sc.truth["threads"]
        stacks = shares_stacks(sc)
        path = sc.tmpdir / "profile.collapsed"
        for idle in (False, True):
            rc, out, err = cli("record", sc.pid, "--duration", RECORD_SECONDS, "--format",
                               "collapsed", "-o", path, "--json", *(["--idle"] if idle else []))
            assert rc == 0 and err == "", err
            doc = json.loads(out)["record"]
            assert (doc["pid"], doc["file"], doc["format"]) == (sc.pid, str(path), "collapsed")
            assert (doc["dropped"], doc["unreadable"], doc["exited_s"]) == (0, 0, None), doc
            assert RECORD_SECONDS - 0.1 <= doc["seconds"] <= RECORD_SECONDS + 1.0, doc
            # 100 Hz asked, less what a loaded machine let the sampler take.
            assert 20 <= doc["samples"] <= 100 * RECORD_SECONDS + 1, doc
            assert abs(doc["rate_hz"] - doc["samples"] / doc["seconds"]) <= 0.2, doc
            counts = {}
            for line in path.read_text().splitlines():
                stack, n = line.rsplit(" ", 1)
                counts[stack] = int(n)
            assert doc["written"] == sum(counts.values()), (doc, counts)
            by_id = {t["native_id"]: t for t in doc["threads"]}
            assert by_id[worker["native_id"]]["name"] == "worker"
            want_main = ";".join(frame_name(f) for f in reversed(main["frames"]))
            if idle:
                assert sorted(by_id) == sorted([main["native_id"], worker["native_id"]]), doc
                assert by_id[main["native_id"]] == {"native_id": main["native_id"],
                                                    "name": "MainThread",
                                                    "samples": counts[want_main]}, doc
                # Read whole at every sample: blocked, it never tears.
                assert counts[want_main] == doc["samples"], doc
            else:
                assert list(by_id) == [worker["native_id"]], doc
                assert want_main not in counts
            of_worker = {s: n for s, n in counts.items() if s != want_main}
            assert by_id[worker["native_id"]]["samples"] == sum(of_worker.values()), doc
            check_shares(of_worker, stacks)

"""`pyunwind watch` (issue 52 item 3, docs/report.md "Stalls: `watch`"), checked against
tests/scenarios/watch_deadlock.py's own record: the program makes progress for a few seconds
(two threads taking two locks in one order and sleeping, a poller that sleeps 50 ms between
looks, a thread that computes) and then deadlocks (the two threads take the locks in opposite
orders). The watchdog writes nothing before the deadlock began, exactly one report after (the
two threads stall together), whose `--why` verdict names the deadlock's threads, functions and
lines; the poller never triggers.

Bad input: a pid that does not exist and bad options are one-line errors (exit status 1); a
process that exits mid-watch ends the watch with one line, exit status 0."""

import json
import pathlib
import re
import signal
import subprocess
import time

import pytest

import harness

STALL_SECONDS = 2
PROGRESS_SECONDS = 4
CLI_TIMEOUT = 60
# Each interpreter with how its stall is printed: text, or one JSON line.
CASES = [(i, False) for i in harness.pick(["pyenv-3.12"])] + \
        [(i, True) for i in harness.pick(["debian-3.11", "ft-3.13t"])]


def start_watch(sc, out_dir, *extra):
    return subprocess.Popen([str(harness.cli_path()), "watch", str(sc.pid), "--stall",
                             str(STALL_SECONDS), "--out", str(out_dir), *map(str, extra)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def stop_watch(proc):
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=CLI_TIMEOUT)
    harness.assert_no_panic(out + err, proc.returncode)
    return proc.returncode, out, err


def wait_for(path, seconds):
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, "%s never appeared" % path
        time.sleep(0.1)


@pytest.mark.parametrize("interp,as_json", CASES, ids=lambda c: getattr(c, "id", "json" if c else "text"))
def test_one_report_after_the_deadlock_none_before(interp, as_json, tmp_path):
    out_dir = tmp_path / "stalls"
    with harness.Scenario(interp, "watch_deadlock", args=[PROGRESS_SECONDS]) as sc:
        watch = start_watch(sc, out_dir, *(["--json"] if as_json else []))
        try:
            record_path = sc.tmpdir / "deadlock.json"
            wait_for(record_path, PROGRESS_SECONDS + 20)
            record = json.loads(record_path.read_text())
            # The stall is reported within a few intervals of reaching --stall; then two more
            # stall lengths in which nothing else may be written.
            deadline = time.monotonic() + STALL_SECONDS + 15
            while not list(out_dir.glob("*.json")) and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(2 * STALL_SECONDS + 1)
        finally:
            rc, out, err = stop_watch(watch)
        assert rc == 3, (rc, out, err)
        truth = sc.truth
        nid = {t["name"]: t["native_id"] for t in truth["threads"]}
        reports = sorted(out_dir.glob("*.json"))
        assert [p.name for p in reports] == [p.name for p in reports
                                             if re.fullmatch(r"%d-\d+\.json" % sc.pid, p.name)]
        assert len(reports) == 1, [p.name for p in reports]
        path = reports[0]
        # Nothing before the deadlock began: the one report was written after the two threads
        # had stood blocked for --stall seconds (a tick may come a tenth of a second early).
        assert path.stat().st_mtime >= record["began"] + STALL_SECONDS - 0.1, \
            (path.stat().st_mtime, record["began"])
        assert int(path.name.split("-")[1].split(".")[0]) >= int(record["began"])
        report = harness.check_report_schema(json.loads(path.read_text()))

        # The report is `pid --why --json`'s: its deadlock is the program's.
        left, right = nid["left"], nid["right"]
        objects = truth["objects"]
        ours = [d for d in report["deadlocks"] if set(d["threads"]) & {left, right}]
        assert ours == [{"kind": "locks", "threads": [left, right],
                         "objects": [objects["B"], objects["A"]], "tasks": []}], report["deadlocks"]
        by_id = {t["native_id"]: t for t in report["threads"]}
        for name in ("left", "right"):
            block = record["blocks"][name]
            innermost = by_id[nid[name]]["frames"][0]
            assert (innermost["function"], innermost["line"]) == (block["function"], block["line"])
        # The poller keeps sleeping on its line, and was never taken for stalled.
        poller = by_id[nid["poller"]]
        assert poller["frames"][0]["line"] == truth["lines"]["poller"]

        # One line per stall, naming the process, both threads, their places and the file.
        lines = out.splitlines()
        assert len(lines) == 1, out
        if as_json:
            event = json.loads(lines[0])["stall"]
            harness.check_report_schema(json.loads(lines[0]))
            assert (event["pid"], event["report"]) == (sc.pid, str(path)), event
            assert event["job"] is None and event["core"] is None
            got = [(t["native_id"], t["name"], t["stall"], t["function"], t["line"],
                    pathlib.Path(t["file"]).name) for t in event["threads"]]
            assert got == [(nid[n], n, "blocked", n, record["blocks"][n]["line"],
                            "watch_deadlock.py") for n in ("left", "right")], event
            assert all(t["stalled_s"] >= STALL_SECONDS - 0.1 for t in event["threads"]), event
        else:
            m = re.fullmatch(
                r'pyunwind: process %d stalled: thread %d "left" blocked for (\d+\.\d) s in left '
                r'\(watch_deadlock\.py:%d\); thread %d "right" blocked for (\d+\.\d) s in right '
                r'\(watch_deadlock\.py:%d\): %s'
                % (sc.pid, left, record["blocks"]["left"]["line"], right,
                   record["blocks"]["right"]["line"], re.escape(str(path))), lines[0])
            assert m, lines[0]
            assert all(float(g) >= STALL_SECONDS - 0.1 for g in m.groups()), lines[0]
        # The closing line: the computer ended when the deadlock began; nothing exited.
        assert re.search(r"pyunwind: watched for \d+\.\d s: 1 stall\(s\) written, 0 process\(es\) "
                         r"exited, 0 thread\(s\) began and 1 ended, 0 sample\(s\) unreadable\n$",
                         err), err


def test_bad_input_is_one_line():
    with harness.Scenario(harness.pick(["pyenv-3.12"])[0], "watch_deadlock", args=[60]) as sc:
        for args, words in [
            (["watch", "999999999", "--stall", "2", "--out", sc.tmpdir / "x"], "999999999"),
            (["watch", sc.pid, "--stall", "0", "--out", sc.tmpdir / "x"], "--stall 0"),
            (["watch", sc.pid, "--stall", "2", "--interval", "0", "--out", sc.tmpdir / "x"],
             "--interval 0"),
            (["watch", sc.pid, "--stall", "2", "--out", "/proc/none"], "/proc/none"),
        ]:
            rc, out, err = harness.run([harness.cli_path(), *map(str, args)], timeout=CLI_TIMEOUT)
            harness.assert_no_panic(out + err, rc)
            assert rc == 1 and out == "", (args, rc, out, err)
            assert err.count("\n") == 1 and words in err, (args, err)


def test_a_process_that_exits_mid_watch(tmp_path):
    """Killed after a couple of samples: the watch says so in one line and ends by itself,
    exit status 0 (no stall: the program was still making progress)."""
    sc = harness.Scenario(harness.pick(["pyenv-3.12"])[0], "watch_deadlock", args=[60])
    try:
        watch = start_watch(sc, tmp_path / "stalls", "--interval", "0.2")
        time.sleep(1.5)
        sc.close()
        out, err = watch.communicate(timeout=CLI_TIMEOUT)
    finally:
        sc.close()
    harness.assert_no_panic(out + err, watch.returncode)
    assert watch.returncode == 0, err
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 2, err
    assert re.fullmatch(r"pyunwind: process %d exited \(\d+\.\d s into the watch\)" % sc.pid,
                        lines[0]), lines
    assert re.fullmatch(r"pyunwind: watched for \d+\.\d s: 0 stall\(s\) written, 1 process\(es\) "
                        r"exited, 0 thread\(s\) began and 0 ended, 0 sample\(s\) unreadable",
                        lines[1]), lines
    assert list((tmp_path / "stalls").iterdir()) == []


def test_several_processes_give_the_straggler_verdict(tmp_path):
    """Two runs of the program, one that deadlocks after a few seconds and one that keeps
    making progress: one stall, of the first; beside its report, the straggler verdict over
    both (`--group --why --json`'s document), naming both as ranks."""
    interp = harness.pick(["pyenv-3.12"])[0]
    out_dir = tmp_path / "stalls"
    with harness.Scenario(interp, "watch_deadlock", args=[PROGRESS_SECONDS]) as stuck, \
            harness.Scenario(interp, "watch_deadlock", args=[600]) as going:
        watch = subprocess.Popen([str(harness.cli_path()), "watch", str(stuck.pid),
                                  str(going.pid), "--stall", str(STALL_SECONDS), "--out",
                                  str(out_dir), "--json"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_for(stuck.tmpdir / "deadlock.json", PROGRESS_SECONDS + 20)
            deadline = time.monotonic() + STALL_SECONDS + 15
            while len(list(out_dir.glob("*.json"))) < 2 and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(STALL_SECONDS + 1)
        finally:
            rc, out, err = stop_watch(watch)
    assert rc == 3, (rc, out, err)
    lines = out.splitlines()
    assert len(lines) == 1, out
    event = harness.check_report_schema(json.loads(lines[0]))["stall"]
    assert event["pid"] == stuck.pid
    assert [t["name"] for t in event["threads"]] == ["left", "right"], event
    stem = pathlib.Path(event["report"]).name[:-len(".json")]
    assert re.fullmatch(r"%d-\d+" % stuck.pid, stem), stem
    assert event["job"] == str(out_dir / (stem + "-job.json")), event
    assert sorted(p.name for p in out_dir.iterdir()) == sorted([stem + ".json", stem + "-job.json"])
    job = harness.check_report_schema(json.loads((out_dir / (stem + "-job.json")).read_text()))
    assert (job["reports"], job["failed"], job["verdict"]["ranks"]) == (2, [], 2), job
    assert {t["pid"] for g in job["groups"] for t in g["threads"]} == {stuck.pid, going.pid}
    # The deadlocked pair is the stuck process's alone: an outlier group each.
    for name in ("left", "right"):
        group = next(g for g in job["groups"] if any(t["name"] == name and t["pid"] == stuck.pid
                                                     for t in g["threads"]))
        assert group["outlier"] and group["processes"] == 1, group


def test_core_beside_the_report(tmp_path):
    """`--core`: gdb's gcore writes DIR/PID-UNIXTIME.PID beside the report, and the core shows
    the same deadlock as the report written live."""
    interp = harness.pick(["pyenv-3.12"])[0]
    out_dir = tmp_path / "stalls"
    with harness.Scenario(interp, "watch_deadlock", args=[PROGRESS_SECONDS]) as sc:
        watch = start_watch(sc, out_dir, "--core")
        try:
            wait_for(sc.tmpdir / "deadlock.json", PROGRESS_SECONDS + 20)
            deadline = time.monotonic() + STALL_SECONDS + harness.GCORE_TIMEOUT_SECONDS
            while len(list(out_dir.iterdir()) if out_dir.exists() else []) < 2:
                assert time.monotonic() < deadline, "no core written"
                time.sleep(0.2)
        finally:
            rc, out, err = stop_watch(watch)
        assert rc == 3, (rc, out, err)
        report_path = next(out_dir.glob("*.json"))
        stem = report_path.name[:-len(".json")]
        core = out_dir / ("%s.%d" % (stem, sc.pid))
        assert sorted(out_dir.iterdir()) == sorted([report_path, core])
        assert out.splitlines()[0].endswith(": %s, %s" % (report_path, core)), out
        live = json.loads(report_path.read_text())
        from_core = harness.cli_checked("core", core, "--why", "--json")
        assert from_core["deadlocks"] == live["deadlocks"] and len(live["deadlocks"]) == 1

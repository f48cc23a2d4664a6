"""`pyunwind watch` (issue 52 item 3, docs/report.md "Stalls: `watch`"), checked against
tests/scenarios/watch_deadlock.py's own record: the program makes progress for a few seconds
(two threads taking two locks in one order and sleeping, a poller that sleeps 50 ms between
looks, a thread that computes) and then deadlocks (the two threads take the locks in opposite
orders). The watchdog writes nothing before the deadlock began, exactly one report after (the
two threads stall together), whose `--why` verdict names the deadlock's threads, functions and
lines; the poller, and a thread in one long time.sleep, never trigger.

`--children` on a torchrun gloo job (tests/scenarios/watch_torch.py) under a shell that runs no
Python: one rank stalls, the others wait for it; one report, the stalled rank's, and the
straggler verdict beside it, exact against the ranks' own records. `--native`: the report's
native frames show the wait below the lock.

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
from test_tree import check_verdict, verdict_of, why_of
from test_why_torch import kill, torch_interp  # noqa: F401 (a fixture)

# The torchrun job's test takes most of this file's time (three ranks importing torch).
pytestmark = pytest.mark.long_file

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
        # The sleeper has not run since it began its hour's sleep, on one line: a sleep the
        # program asked for, never counted (the report shows it as such, named nowhere else).
        sleeper = by_id[nid["sleeper"]]
        assert (sleeper["frames"][0]["line"], sleeper["waiting"]["kind"], sleeper["idle"]) == \
            (truth["lines"]["sleeper"], "sleep", None), sleeper

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


def test_children_of_a_launcher_that_never_runs_python(tmp_path):
    """`--children` on a shell whose tree runs no Python (a sleep): not an error (it was exit
    status 1); the watch waits for as long as the shell lives, then ends by itself, exit status
    0, nothing written."""
    shell = subprocess.Popen(["/bin/sh", "-c", "sleep 2; exit 0"])
    try:
        rc, out, err = harness.run([harness.cli_path(), "watch", "--children", shell.pid,
                                    "--stall", "1", "--interval", "0.2", "--out",
                                    tmp_path / "stalls"], timeout=CLI_TIMEOUT)
    finally:
        shell.kill()
        shell.wait()
    harness.assert_no_panic(out + err, rc)
    assert (rc, out) == (0, ""), (rc, out, err)
    # The sleep, looked at 5 times (a child may be exec'ing Python), is left out in one line.
    m = re.fullmatch(r"pyunwind: process (\d+) left out: no Python interpreter found: [^\n]*\n"
                     r"pyunwind: watched for (\d+\.\d) s: 0 stall\(s\) written, 0 process\(es\) "
                     r"exited, 0 thread\(s\) began and 0 ended, 0 sample\(s\) unreadable\n", err)
    assert m and int(m.group(1)) != shell.pid and float(m.group(2)) >= 1.0, err
    assert list((tmp_path / "stalls").iterdir()) == []


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


# How CPython 3.12 waits in `with lock:`, from the C function the Python frame calls down to
# libc, outermost last: Modules/_threadmodule.c's lock_PyThread_acquire_lock calls
# acquire_timed, which calls PyThread_acquire_lock_timed (Python/thread_pthread.h, with
# USE_SEMAPHORES), which waits in glibc's semaphore wait (libc.so.6) on a futex.
LOCK_WAIT_312 = ["PyThread_acquire_lock_timed", "acquire_timed", "lock_PyThread_acquire_lock"]


def test_native_frames_in_the_report(tmp_path):
    """`--native`: the report written is `pid --native --why --json`'s: below each deadlocked
    thread's blocking frame (exact against the program's record), libc's wait, then CPython's
    lock acquisition (LOCK_WAIT_312), as `pid --native` shows the same threads after."""
    out_dir = tmp_path / "stalls"
    with harness.Scenario(harness.pick(["pyenv-3.12"])[0], "watch_deadlock",
                          args=[PROGRESS_SECONDS]) as sc:
        watch = start_watch(sc, out_dir, "--native")
        try:
            wait_for(sc.tmpdir / "deadlock.json", PROGRESS_SECONDS + 20)
            record = json.loads((sc.tmpdir / "deadlock.json").read_text())
            deadline = time.monotonic() + STALL_SECONDS + 15
            while not list(out_dir.glob("*.json")) and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            rc, out, err = stop_watch(watch)
        now = harness.cli_checked("pid", sc.pid, "--native", "--why", "--json")
        assert rc == 3, (rc, out, err)
        (path,) = out_dir.glob("*.json")
        report = harness.check_report_schema(json.loads(path.read_text()))
        nid = {t["name"]: t["native_id"] for t in sc.truth["threads"]}
        by_id = {t["native_id"]: t for t in report["threads"]}
        now_by_id = {t["native_id"]: t for t in now["threads"]}
        for name in ("left", "right"):
            frames = by_id[nid[name]]["frames"]
            python = next(i for i, f in enumerate(frames) if f["kind"] == "python")
            block = record["blocks"][name]
            assert (frames[python]["function"], frames[python]["line"]) == (
                block["function"], block["line"]), frames[python]
            natives = frames[:python]
            assert all(f["kind"] == "native" for f in natives), natives
            libc = next(i for i, f in enumerate(natives) if f["module"] != "libc.so.6")
            assert libc >= 1, natives
            got = natives[libc:libc + len(LOCK_WAIT_312)]
            assert [f["function"] for f in got] == LOCK_WAIT_312, natives
            assert all(f["module"].startswith("libpython3.12.so") for f in got), got
            # `pid --native` after: the same frames (the thread has stayed where it blocked).
            key = [(f["kind"], f.get("function"), f.get("module"), f.get("line")) for f in frames]
            assert key == [(f["kind"], f.get("function"), f.get("module"), f.get("line"))
                           for f in now_by_id[nid[name]]["frames"]]


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


# --- a torchrun job (issue 52 item 5) -----------------------------------------------------

# The ranks' steps before rank 1 stalls; the stall's length is longer than one step's wait
# for the others (a few ms) by far, and than a rank's start after the others' (they begin
# together, after a barrier).
TORCH_PROGRESS_SECONDS = 6
TORCH_STALL_SECONDS = 3
# Three ranks importing torch at once on a small machine, then their progress.
TORCH_RECORDS_SECONDS = 300 + TORCH_PROGRESS_SECONDS


def rank_records(sc, seconds):
    """Every rank's own record (tests/scenarios/watch_torch.py), once all are written."""
    paths = [sc.tmpdir / ("truth.json.rank%d.json" % i) for i in range(sc.truth["ranks"])]
    deadline = time.monotonic() + seconds
    while not all(p.exists() for p in paths):
        assert time.monotonic() < deadline, "ranks' records missing: %s" % [
            p.name for p in paths if not p.exists()]
        assert not sc._exited(), "the job's launcher exited:\n" + sc.stderr_text()
        time.sleep(0.2)
    return [json.loads(p.read_text()) for p in paths]


def test_children_of_a_torchrun_job_one_stalled_rank(torch_interp, tmp_path):
    """`watch --children SHELL` on tests/scenarios/watch_torch.py's job: a shell that sleeps,
    then runs torchrun with three ranks (gloo, on the CPU) that train in steps for a few
    seconds, until rank 1 blocks in its data step on a lock and the other two wait for it in
    the all-reduce of their backward pass. When the watch begins the shell has no Python child
    (it is waited for, not an error). One stall is written, after the rank blocked: the
    stalled rank's report, its blocking frame exactly the rank's record, and beside it the
    straggler verdict over torchrun's agent and the ranks, naming the stalled rank, exactly
    as the ranks' records make it. The waiting ranks, stalled too, are part of the same stall;
    each one's "truth" thread slept in one time.sleep longer than --stall, and never counts."""
    out_dir = tmp_path / "stalls"
    sc = harness.Scenario(torch_interp, "watch_torch", args=[TORCH_PROGRESS_SECONDS])
    records = []
    try:
        shell = sc.truth["shell_pid"]
        watch = subprocess.Popen([str(harness.cli_path()), "watch", "--children", str(shell),
                                  "--stall", str(TORCH_STALL_SECONDS), "--out", str(out_dir),
                                  "--json"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            records = rank_records(sc, TORCH_RECORDS_SECONDS)
            deadline = time.monotonic() + TORCH_STALL_SECONDS + 20
            while not list(out_dir.glob("*.json")) and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(2 * TORCH_STALL_SECONDS + 1)
            # Each rank's main thread as `--why` sees it now (the job stays where it stalled).
            whys = {}
            for r in records:
                main = harness.cli_checked("pid", r["pid"], "--why", "--json")["threads"][0]
                assert main["native_id"] == r["pid"], main
                whys[r["pid"]] = why_of(main)
        finally:
            rc, out, err = stop_watch(watch)
    finally:
        for r in records:
            kill(r["pid"])
        sc.close()
    assert rc == 3, (rc, out, err)
    (stalled,) = [r for r in records if "began" in r]
    assert stalled["rank"] == sc.truth["stalled"]
    (torchrun,) = {r["torchrun_pid"] for r in records}
    # One stall: the stalled rank's report and the job's verdict, written after it blocked.
    stem = pathlib.Path(json.loads(out.splitlines()[0])["stall"]["report"]).name[:-len(".json")]
    assert re.fullmatch(r"%d-\d+" % stalled["pid"], stem), stem
    assert sorted(p.name for p in out_dir.iterdir()) == [stem + "-job.json", stem + ".json"]
    path = out_dir / (stem + ".json")
    assert path.stat().st_mtime >= stalled["began"] + TORCH_STALL_SECONDS - 0.1, \
        (path.stat().st_mtime, stalled["began"])
    report = harness.check_report_schema(json.loads(path.read_text()))
    main = report["threads"][0]
    assert main["native_id"] == stalled["pid"]
    assert [(f["function"], f["file"], f["line"]) for f in main["frames"]
            if f["kind"] == "python"] == [
        (f["function"], f["file"], f["line"]) for f in stalled["threads"][0]["frames"]]
    assert main["waiting"]["kind"] == "lock", main["waiting"]

    # The line: the stalled rank's main thread, blocked on its blocking line.
    lines = out.splitlines()
    assert len(lines) == 1, out
    event = harness.check_report_schema(json.loads(lines[0]))["stall"]
    inner = stalled["threads"][0]["frames"][0]
    assert (event["pid"], event["report"], event["job"], event["core"]) == (
        stalled["pid"], str(path), str(out_dir / (stem + "-job.json")), None), event
    assert [(t["native_id"], t["name"], t["stall"], t["function"], t["file"], t["line"])
            for t in event["threads"]] == [
        (stalled["pid"], "MainThread", "blocked", inner["function"], inner["file"],
         inner["line"])], event

    # The verdict: the waiting ranks meet in the backward pass, the stalled rank is elsewhere,
    # torchrun's agent is no rank (the shell and its sleep run no Python: not in it at all).
    job = harness.check_report_schema(json.loads((out_dir / (stem + "-job.json")).read_text()))
    assert (job["reports"], job["failed"]) == (1 + len(records), []), job
    mains = {r["pid"]: r["threads"][0] for r in records}
    want = verdict_of(mains, stalled["pid"], whys, (torchrun,))
    assert want["majority"]["frames"][0]["function"] == "_engine_run_backward"
    assert want["outliers"][0]["frames"][0]["function"] == "load_batch"
    check_verdict(job["verdict"], want)
    assert re.search(r"pyunwind: watched for \d+\.\d s: 1 stall\(s\) written, 0 process\(es\) "
                     r"exited, \d+ thread\(s\) began and \d+ ended, 0 sample\(s\) unreadable\n$",
                     err), err

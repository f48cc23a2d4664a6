"""lldb attached to qemu-user's gdb stub: Debian's arm64 bookworm python3.11 and sid python3.14
(arm64_harness) run under `qemu-aarch64 -g PORT`, and the lldb in $PYUNWIND_LLDB on this x86-64
machine connects (`gdb-remote PORT`) with pyunwind's script, as gdb-multiarch does in
test_arm64.test_gdb_multiarch_live_stub.

qemu's stub shows no mappings and no auxiliary vector, and calls every process 1: the script
reads memory through lldb, lets the core find the modules from the dynamic linker's list in the
process (the executable placed where lldb loaded it), adds to lldb those it lacks (`pyunwind
sysroot DIR` after connecting; lldb finds them itself when the platform's sysroot comes first),
and gives lldb the 48-bit address mask to unwind sid's signed return addresses (qemu's stub
sends none). `py-why` tells each thread's system call from lldb's registers (pc, x8).

The program (tests/scenarios/stub_stop.py) stops itself with SIGUSR1 after writing its truth;
checked exactly against it: `py-bt`, `py-bt -a --json`, `py-locals`, `py-why --json` (each
thread's state, system call and wait), lldb's own `bt` of each thread reaching the program's
start, and on lldb 22 the frame provider's Python frames in `bt`. One qemu run per case.
"""

import json
import re
import subprocess

import pytest

import arm64_harness
import harness
from test_arm64 import _free_port
from test_lldb import basenames, bt_python, lldb_major, lldb_path, mark, split
from test_lldb_arm64 import LIBS, SCRIPT, echoed, lldb_threads, modules
from test_stacks import check_report, expected, expected_locals, json_from, traceback_frames

LLDB_TIMEOUT = 180
STUB_SCRIPT = harness.repo_root() / "tests" / "scenarios" / "stub_stop.py"
# (interpreter, whether lldb's platform sysroot is given before connecting).
CASES = [("arm64-bookworm-3.11", True), ("arm64-sid-3.14", False)]
NOT_FOUND = re.compile(
    r"^pyunwind: (\d+) of the process's loaded files not found without a sysroot "
    r"\(/lib/aarch64-linux-gnu/libm\.so\.6: file not found .*, \.\.\.\); give their directory "
    r"with `pyunwind sysroot DIR` \(or `platform select remote-linux --sysroot DIR` before "
    r"connecting\)$")


def run_lldb(interp, port, commands, sysroot_first, tmp_path):
    """lldb on `interp`'s executable, connected to qemu's stub on `port`, continued to the
    program's SIGUSR1, then `commands`. Its stdout and stderr. The commands are one file
    (`-s`): in batch mode lldb runs no `-o` command after one that stopped on a signal."""
    cmd = [lldb_path(), "-b", "--no-lldbinit", "-O", "settings set symbols.enable-external-lookup false"]
    if sysroot_first:
        cmd += ["-O", "platform select remote-linux --sysroot %s" % interp.root]
    script = tmp_path / "commands.lldb"
    # lldb's event-handler thread prints the stop (test_lldb.run_lldb).
    script.write_text("\n".join(["gdb-remote %d" % port, "continue", "script import time; time.sleep(0.3)",
                                  *commands]) + "\n")
    cmd += ["-O", "command script import %s" % SCRIPT, interp.guest_exe, "-s", str(script)]
    rc, out, err = harness.run(cmd, LLDB_TIMEOUT, env=harness.child_env())
    assert rc == 0, "lldb failed (%d):\n%s\n%s" % (rc, out, err)
    assert "Traceback (most recent call last)" not in out + err, out + err
    harness.assert_no_panic(out + err)
    return out, err


@pytest.mark.parametrize("interp_id,sysroot_first", CASES,
                         ids=["%s-sysroot-%s" % (i, "first" if s else "after") for i, s in CASES])
def test_lldb_live_stub(interp_id, sysroot_first, tmp_path):
    interp = arm64_harness.pick(interp_id)
    provider = lldb_major() >= 22
    port = _free_port()
    truth_path = tmp_path / "truth.json"
    guest = subprocess.Popen([arm64_harness.qemu(), "-g", str(port), "-L", interp.root,
                              interp.guest_exe, str(STUB_SCRIPT), str(truth_path), "-"],
                             cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        commands = []
        if not sysroot_first:
            commands += [mark("BEFORE"), "image list", "py-bt", "pyunwind sysroot %s" % interp.root]
        commands += [mark("IMAGES"), "image list", mark("TEXT"), "py-bt", mark("JSON"), "py-bt -a --json",
                     mark("LOCALS"), "py-locals", mark("WHY"), "py-why --json"]
        names = ["IMAGES", "TEXT", "JSON", "LOCALS", "WHY", "RAW"]
        if provider:
            commands += [mark("BT"), "thread backtrace all", "pyunwind set frame-provider off"]
            names.append("BT")
        commands += [mark("RAW"), "thread backtrace all", "kill"]
        out, err = run_lldb(interp, port, commands, sysroot_first, tmp_path)
        got = split(out, names)
        truth = json.loads(truth_path.read_text())
        main = truth["threads"][0]

        said = [line for line in (out + err).splitlines() if line.startswith("pyunwind: ")]
        if sysroot_first:
            assert said == [], out + err
        else:
            # lldb had the executable and what the program loaded by its path on this
            # machine (a lib-dynload module under the root), none of the libraries; one line
            # said what was missing, once, and py-bt each file.
            before = modules(got["BEFORE"])
            assert interp.guest_exe in before and not any(p.endswith(lib) for p in before for lib in LIBS), before
            missing = re.findall(r"^error: loaded modules: (\S+): file not found ", got["BEFORE"], re.M)
            assert {"/" + lib for lib in LIBS} <= set(missing), got["BEFORE"]
            assert len(said) == 1, said
            m = NOT_FOUND.match(said[0])
            assert m and int(m.group(1)) == len(missing), (said, missing)
        images = modules(got["IMAGES"])
        for lib in LIBS:
            assert "%s/%s" % (interp.root, lib) in images, (lib, got["IMAGES"])

        assert traceback_frames(got["TEXT"]) == expected(main["frames"]), got["TEXT"]
        report = json_from(got["JSON"])
        check_report(report, truth)
        # Memory through lldb; the stub's process 1 is no process of this machine.
        assert report["python"]["source"] == "debugger" and report["python"]["pid"] is None, report["python"]

        locals_text = got["LOCALS"].split("Locals for inner\n", 1)[1].split("Locals for ", 1)[0]
        shown = [line.split(" = ", 1) for line in locals_text.splitlines()]
        assert [(n, r) for n, r in shown] == [(n, r) for n, r, _ in expected_locals(main["frames"][0])], \
            got["LOCALS"]

        # The system calls from lldb's registers: the code at the pc (`svc #0`) and x8. The
        # main thread stopped on the signal its own kill(2) raised, as the call returned.
        why = json_from(got["WHY"])
        check_report(why, truth)
        assert [(t["name"], t["state"], t["syscall"]) for t in why["threads"]] == [
            ("MainThread", "syscall", "kill"), ("stub-worker", "syscall", "futex")], why
        assert why["threads"][1]["waiting"]["kind"] == "lock", why

        # lldb's own frames, through sid's signed return addresses: each thread from libc
        # through the eval loop to its start (the main thread's `_start`; libc's thread start,
        # stripped, for the worker).
        threads = lldb_threads(echoed(got["RAW"], "thread backtrace all"))
        assert sorted(threads) == [1, 2], got["RAW"]
        for n, frames in threads.items():
            assert re.search(r"^0x[0-9a-f]+ libc\.so\.6`", frames[0]), frames
            assert any("python3.%d`" % interp.minor in f for f in frames), frames
            assert re.search(r"python3\.\d+`_start \+" if n == 1 else r"^0x[0-9a-f]+ libc\.so\.6`",
                             frames[-1]), frames
        if provider:
            text = echoed(got["BT"], "thread backtrace all")
            shown = [basenames(bt_python(t)) for t in text.split("thread #")[1:]]
            assert shown == [basenames(expected(t["frames"])) for t in truth["threads"]], text
    finally:
        guest.kill()
        guest.wait(timeout=30)

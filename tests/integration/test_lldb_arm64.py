"""lldb on arm64 cores: qemu-user's cores of Debian's arm64 bookworm python3.11 and sid python3.14
(arm64_harness), read by the lldb in $PYUNWIND_LLDB on this x86-64 machine with pyunwind's script.

Such a core has no NT_FILE note and no bytes for the executable ELF-headed mappings (text,
read-only data, CFI); lldb finds the shared libraries through the dynamic linker's list only
under its platform sysroot (`platform select remote-linux --sysroot ROOT`, before the core is
loaded), and never the dynamic linker itself. The script adds what lldb lacks from the core's
own list (`Session.modules`; `pyunwind sysroot ROOT` after the core is loaded) and, since the
core has no NT_ARM_PAC_MASK, the 48-bit address mask lldb needs to unwind sid's signed return
addresses.

Checked exactly against each scenario's truth: `py-bt -a --json` (memory read directly, and
through lldb: the text bytes the core lacks then come from the modules lldb loaded), `py-bt`,
`py-locals`, `py-list`, `py-bt-async --json`, `py-tasks`; lldb's own `bt` reaching `_start`
through the signed return addresses; on lldb 22 the frame provider's Python frames in `bt`.
One core per (interpreter, scenario), made once for the module.
"""

import re

import pytest

import harness
from test_arm64 import stop  # noqa: F401 (the module's cores)
from test_asyncio import check_async, check_tree_text
from test_lldb import basenames, bt_python, failing, lldb_major, lldb_path, mark, split
from test_stacks import check_report, expected, expected_locals, json_from, traceback_frames

LLDB_TIMEOUT = 180
SCRIPT = harness.repo_root() / "lldb-scripts" / "pyunwind_lldb.py"
BOOKWORM, SID = "arm64-bookworm-3.11", "arm64-sid-3.14"
STOPS = ["%s:threads" % BOOKWORM, "%s:threads" % SID, "%s:locals" % SID, "%s:asyncio" % SID]


def run_lldb(stop, *commands, sysroot=True, lldb=None, script=SCRIPT):
    """lldb on the core of `stop` (test_arm64's fixture: a core made once for the module).
    `sysroot`: the platform's sysroot given first, as lldb wants it, and pyunwind's script
    imported before the core is loaded (as from ~/.lldbinit); else the script is imported after
    the core is loaded, and no sysroot given. `lldb`: the command that runs lldb (by default
    $PYUNWIND_LLDB), `script`: pyunwind's lldb script. Its stdout and stderr."""
    cmd = [*(lldb or [lldb_path()]), "-b", "--no-lldbinit",
           "-O", "settings set symbols.enable-external-lookup false"]
    if sysroot:
        cmd += ["-O", "platform select remote-linux --sysroot %s" % stop.root,
                "-O", "command script import %s" % script]
    cmd += [stop.interp.guest_exe, "-c", stop.core]
    if not sysroot:
        cmd += ["-o", "command script import %s" % script]
    # lldb's event-handler thread prints the stop (and asks for frames) while batch commands
    # run: let it finish (test_lldb.run_lldb).
    cmd += ["-o", "script import time; time.sleep(0.3)"]
    for c in commands:
        cmd += ["-o", c]
    rc, out, err = harness.run(cmd, LLDB_TIMEOUT, env=harness.child_env())
    assert rc == 0, "lldb failed (%d):\n%s\n%s" % (rc, out, err)
    assert "Traceback (most recent call last)" not in out + err, out + err
    harness.assert_no_panic(out + err)
    return out, err


def on(*ids):
    return pytest.mark.parametrize("stop", ids, indirect=True)


MODULE_ROW = re.compile(r"^\[\s*\d+\] \S+ (0x[0-9a-f]+) (\S+)", re.M)


def modules(text):
    """{path: load address} of `image list`."""
    return {m.group(2): int(m.group(1), 16) for m in MODULE_ROW.finditer(text)}


LIBS = ["lib/aarch64-linux-gnu/libc.so.6", "lib/ld-linux-aarch64.so.1"]


# lldb's printout of a stopped thread: its header, its frame 0, then the code there.
STOP_HEADER = re.compile(r"^\s*\*?\s*thread #\d+\b")
STOP_FRAME0 = re.compile(r"^\s*\*?\s*frame #0: ")
DISASSEMBLY = re.compile(r"^(\S+`\S+:$|\s*->\s+0x[0-9a-f]+ <|\s+0x[0-9a-f]+ <\+\d+>:)")


def without_stop_printouts(text):
    """`text` without lldb's printouts of stopped threads (a header, frame 0 and the code
    there), which its event thread prints whenever it gets to them: in the middle of a
    command's output too (seen in `thread backtrace all` on a loaded machine). A backtrace
    shows no code, so a block followed by code is such a printout."""
    out = []
    for line in text.splitlines():
        if DISASSEMBLY.match(line):
            if out and STOP_FRAME0.match(out[-1]):
                out.pop()
                if out and STOP_HEADER.match(out[-1]):
                    out.pop()
            continue
        out.append(line)
    return "\n".join(out) + "\n"


def echoed(text, command):
    """What `command` printed: the text after lldb's echo of it (lldb prints a stop, with its
    threads, whenever its event thread gets to it: maybe before that, maybe inside it)."""
    echo = "(lldb) %s\n" % command
    assert echo in text, (command, text)
    return without_stop_printouts(text[text.index(echo) + len(echo):])


def lldb_threads(text):
    """{thread number: [what follows `frame #N: `, in order]} of a backtrace; where a thread
    is printed twice (the stop lldb prints shows frame 0), the longer."""
    printed, cur = [], None
    for line in text.splitlines():
        m = re.match(r"^\s*\*?\s*thread #(\d+)\b", line)
        if m:
            cur = []
            printed.append((int(m.group(1)), cur))
            continue
        m = re.match(r"^\s*\*?\s*frame #(\d+): (.*)$", line)
        if m and cur is not None and int(m.group(1)) == len(cur):
            cur.append(m.group(2))
    threads = {}
    for n, frames in printed:
        if len(frames) > len(threads.get(n, [])):
            threads[n] = frames
    return threads


@on("%s:threads" % BOOKWORM, "%s:threads" % SID)
def test_lldb_arm64_core(stop):
    """The sysroot given first, as lldb wants it: lldb loads the libraries, the script adds the
    dynamic linker and the PAC mask. `py-bt -a --json` (memory read directly and through lldb)
    and `py-bt` are the truth; lldb's own `bt` of each thread goes through libc and the eval
    loop to `_start`; on lldb 22 the frame provider puts every thread's Python frames in `bt`."""
    check_lldb_arm64_core(stop, lldb_major())


def check_lldb_arm64_core(stop, major, extra=(), **how):
    """test_lldb_arm64_core's checks, with lldb `major` run as `how` says (run_lldb's `lldb`
    and `script`), `extra` commands run last. lldb's stdout and stderr."""
    provider = major >= 22
    # (lldb 19 runs no stop hook when a core is loaded: the first py-* command prepares it.)
    commands = [mark("JSON"), "py-bt -a --json", mark("IMAGES"), "image list", mark("TEXT"), "py-bt",
                "pyunwind set memory debugger", mark("DBG"), "py-bt -a --json", "pyunwind set memory auto"]
    names = ["IMAGES", "JSON", "TEXT", "DBG", "RAW"]
    if provider:
        commands += [mark("BT"), "thread backtrace all", "pyunwind set frame-provider off"]
        names += ["BT"]
    commands += [mark("RAW"), "thread backtrace all", mark("END"), *extra]
    out, err = run_lldb(stop, *commands, **how)
    got = split(out, names)
    assert "pyunwind:" not in out + err, out + err
    images = modules(got["IMAGES"])
    for lib in LIBS:
        assert "%s/%s" % (stop.root, lib) in images, (lib, got["IMAGES"])
    check_report(json_from(got["JSON"]), stop.truth)
    dbg = json_from(got["DBG"])
    check_report(dbg, stop.truth)
    assert dbg["python"]["source"] == "debugger"
    main = stop.truth["threads"][0]
    assert traceback_frames(got["TEXT"]) == expected(main["frames"]), got["TEXT"]
    # lldb's own frames: each thread from libc through the eval loop to its start, the main
    # thread's `_start` or libc's thread start (stripped: no name).
    threads = lldb_threads(echoed(got["RAW"], "thread backtrace all"))
    assert sorted(threads) == list(range(1, len(stop.truth["threads"]) + 1)), got["RAW"]
    for n, frames in threads.items():
        assert re.search(r"^0x[0-9a-f]+ libc\.so\.6`", frames[0]), frames
        assert any("python3.%d`_PyEval_EvalFrameDefault " % stop.interp.minor in f for f in frames), frames
        assert re.search(r"python3\.\d+`_start \+" if n == 1 else r"^0x[0-9a-f]+ libc\.so\.6`",
                         frames[-1]), frames
    if provider:
        want = [f for t in stop.truth["threads"] for f in basenames(expected(t["frames"]))]
        got["BT"] = echoed(got["BT"], "thread backtrace all")
        assert sorted(basenames(bt_python(got["BT"]))) == sorted(want), got["BT"]
        shown = [basenames(bt_python(text)) for text in got["BT"].split("thread #")[1:]]
        for t in stop.truth["threads"]:
            assert basenames(expected(t["frames"])) in shown, (t["name"], got["BT"])
        assert "_PyEval_EvalFrameDefault" not in got["BT"]
        assert "[from thread state]" not in got["BT"]
    return out, err


# What lldb reads at the dynamic linker's load address: from the core (the process), and
# from the target (the core, else the module's file).
READ_LD_HEADER = (
    "script t = lldb.target; e = lldb.SBError(); "
    "ld = [m for m in t.module_iter() if m.GetFileSpec().basename.startswith('ld-linux')][0]; "
    "a = ld.GetObjectFileHeaderAddress(); "
    "print('LD process:', t.GetProcess().ReadMemory(a.GetLoadAddress(t), 4, e), "
    "'target:', t.ReadMemory(a, 4, lldb.SBError()))")


@on("%s:threads" % SID)
def test_lldb_arm64_sysroot_after_the_core(stop):
    """Without a sysroot lldb has only the executable: `py-bt` is still the truth (libpython is
    in the executable), and one line says which files were not found and how to give them;
    `pyunwind sysroot DIR` then loads the modules (the dynamic linker's list from the core),
    whose bytes lldb reads from their files, after which lldb's `bt` reaches `_start`. A directory that does not exist is one error."""
    out, err = run_lldb(stop, mark("BEFORE"), "image list", mark("TEXT"), "py-bt",
                         mark("BAD"), failing("pyunwind sysroot /nonexistent/root"),
                         mark("SET"), "pyunwind sysroot %s" % stop.root, "pyunwind sysroot",
                         mark("AFTER"), "image list", READ_LD_HEADER, "pyunwind set frame-provider off",
                         mark("RAW"), "bt", sysroot=False)
    got = split(out, ["BEFORE", "TEXT", "BAD", "SET", "AFTER", "RAW"])
    # The dynamic linker's first bytes: not in the core, read by lldb from the file it added.
    assert "\nLD process: None target: b'\\x7fELF'\n" in got["AFTER"], got["AFTER"]
    assert list(modules(got["BEFORE"])) == [stop.interp.guest_exe], got["BEFORE"]
    main = stop.truth["threads"][0]
    assert traceback_frames(got["TEXT"]) == expected(main["frames"]), got["TEXT"]
    # One line (on lldb's error stream) for the files not found, once.
    said = [line for line in (out + err).splitlines() if line.startswith("pyunwind: ")]
    assert len(said) == 1, out + err
    assert re.match(r"^pyunwind: 5 of the core's loaded files not found without a sysroot "
                    r"\(/lib/aarch64-linux-gnu/libm\.so\.6: file not found .*, \.\.\.\); give their "
                    r"directory with `pyunwind sysroot DIR` \(or `platform select remote-linux "
                    r"--sysroot DIR` before loading the core\)$", said[0]), said
    assert "\nerror: pyunwind: no directory /nonexistent/root\n" in got["BAD"], got["BAD"]
    assert "sysroot: %s" % stop.root in got["SET"]
    images = modules(got["AFTER"])
    for lib in LIBS:
        assert "%s/%s" % (stop.root, lib) in images, (lib, got["AFTER"])
    frames = lldb_threads(echoed(got["RAW"], "bt"))[1]
    assert any("python3.14`_PyEval_EvalFrameDefault " in f for f in frames), frames
    assert re.search(r"python3\.14`_start \+", frames[-1]), frames


@on("%s:locals" % SID)
def test_lldb_arm64_locals_list(stop):
    """`py-locals` shows the stopped frame's locals as the program recorded them, `py-list`
    its source around the line, `py-up` its caller."""
    check_lldb_arm64_locals_list(stop)


def check_lldb_arm64_locals_list(stop, extra=(), **how):
    """test_lldb_arm64_locals_list's checks, lldb run as `how` says (run_lldb's `lldb` and
    `script`), `extra` commands run last. lldb's stdout and stderr."""
    out, err = run_lldb(stop, mark("LOCALS"), "py-locals", mark("LIST"), "py-list", mark("UP"), "py-up",
                        mark("END"), *extra, **how)
    got = split(out, ["LOCALS", "LIST", "UP", "END"])
    frame = stop.truth["threads"][0]["frames"][0]
    shown = [line.split(" = ", 1) for line in got["LOCALS"].strip().splitlines() if " = " in line]
    assert [(n, r) for n, r in shown] == [(n, r) for n, r, _ in expected_locals(frame)], got["LOCALS"]
    # Lines 40 to 50 of the scenario's source, the stopped line marked.
    with open(stop.sc.script, encoding="utf-8") as f:
        source = f.read().splitlines()
    listed = [m.groups() for m in map(re.compile(r"^\s*(>?)(\d+)(?: {4}(.*))?$").match,
                                      got["LIST"].splitlines()) if m]
    line = frame["line"]
    assert [(int(n), text or "") for _, n, text in listed] == [
        (n, source[n - 1]) for n in range(line - 5, line + 6)], got["LIST"]
    assert [int(n) for mark_, n, _ in listed if mark_] == [line], got["LIST"]
    caller = stop.truth["threads"][0]["frames"][1]
    assert "line %d, in %s" % (caller["line"], caller["function"]) in got["UP"], got["UP"]
    return out, err


@on("%s:asyncio" % SID)
def test_lldb_arm64_asyncio(stop):
    """`py-bt-async --json` is the truth's task graph; `py-tasks` prints its tree."""
    check_lldb_arm64_asyncio(stop)


def check_lldb_arm64_asyncio(stop, extra=(), **how):
    """test_lldb_arm64_asyncio's checks, lldb run as `how` says (run_lldb's `lldb` and
    `script`), `extra` commands run last. lldb's stdout and stderr."""
    out, err = run_lldb(stop, mark("JSON"), "py-bt-async --json", mark("TREE"), "py-tasks --tree", mark("END"),
                        *extra, **how)
    got = split(out, ["JSON", "TREE", "END"])
    check_async(json_from(got["JSON"]), stop.truth)
    check_tree_text(got["TREE"], stop.truth)
    return out, err

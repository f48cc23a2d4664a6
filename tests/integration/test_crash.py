"""The crash of a core written for a fatal signal (docs/report.md, `crash`): real kernel cores
(this machine's core_pattern is the plain `core`) of a program that crashes in its main thread
or in a worker thread named "parser", checked against what the program recorded just before
(its pid, the crashing thread's native id, the fault address):

- SIGSEGV: `ctypes.string_at(0x10)`: SEGV_MAPERR at 0x10;
- SIGBUS: a byte of a shared file mapping past the end of the file, cut after mapping:
  BUS_ADRERR at that byte;
- SIGFPE: glibc's `div(1, 0)` through ctypes, a real `idiv` by zero: FPE_INTDIV at the `idiv`
  instruction (found in the bytes of `div` the program saved);
- SIGABRT: `os.abort()`: SI_TKILL from the process itself;
- SIGSEGV sent with kill() by this test: SI_USER from the test's pid.

Also: systemd-coredump's zstd copy of a kernel core, gdb's `py-bt -a` on a kernel core, a core
gdb writes of a process stopped at its crash, and a gcore snapshot (no `crash`)."""

import json
import os
import pathlib
import re
import signal
import subprocess

import pytest

import harness
from test_stacks import gdb_cmd, json_from

CLI_TIMEOUT = 60
CRASH_TIMEOUT = 60
GDB_TIMEOUT = 120
SEGV_INTERPS = ["debian-3.11", "pyenv-3.10", "pyenv-3.13", "debian-3.14"]
OTHER_INTERPS = ["pyenv-3.12", "debian-3.11"]

CRASHER = '''\
import ctypes, json, mmap, os, sys, threading, time

KIND, WHERE, TRUTH = sys.argv[1:4]


def write_truth(**extra):
    truth = {"pid": os.getpid(), "native_id": threading.get_native_id(),
             "name": threading.current_thread().name}
    truth.update(extra)
    with open(TRUTH + ".tmp", "w") as f:
        json.dump(truth, f)
    os.rename(TRUTH + ".tmp", TRUTH)


def crash():
    if KIND == "segv":
        write_truth(address=0x10)
        ctypes.string_at(0x10)  # crash: segv
    elif KIND == "bus":
        path = TRUTH + ".mapped"
        with open(path, "wb") as f:
            f.write(b"x" * mmap.PAGESIZE * 2)
        fd = os.open(path, os.O_RDWR)
        m = mmap.mmap(fd, mmap.PAGESIZE * 2)
        base = ctypes.addressof(ctypes.c_char.from_buffer(m))
        os.ftruncate(fd, mmap.PAGESIZE)
        write_truth(address=base + mmap.PAGESIZE + 8)
        m[mmap.PAGESIZE + 8]  # crash: bus
    elif KIND == "fpe":
        libc = ctypes.CDLL(None)
        div = ctypes.cast(libc.div, ctypes.c_void_p).value
        write_truth(function=div, code=ctypes.string_at(div, 64).hex())
        libc.div(1, 0)  # crash: fpe
    elif KIND == "abort":
        write_truth()
        os.abort()  # crash: abort
    elif KIND == "kill":
        write_truth()
        print("ready", flush=True)
        time.sleep(120)  # crash: kill


if WHERE == "main":
    crash()  # called: main
else:
    t = threading.Thread(target=crash, name="parser")
    t.start()
    t.join()
'''

WRAPPER = 'ulimit -c unlimited; exec "$0" "$@"'


def interp(interp_id):
    return harness.pick([interp_id])[0]


def line_of(marker):
    """The line of the crasher that ends with `# marker`."""
    for n, text in enumerate(CRASHER.splitlines(), 1):
        if text.endswith("# " + marker):
            return n
    raise AssertionError(marker)


def cli(*args):
    return harness.run([harness.cli_path(), *map(str, args)], CLI_TIMEOUT)


def cli_json(*args):
    rc, out, err = cli(*args, "--json")
    assert rc == 0, err
    return json.loads(out)


def cli_text(*args):
    rc, out, err = cli(*args)
    assert rc == 0, err
    return out


class Crashed:
    """A kernel core of the crasher, with the truth it wrote."""

    def __init__(self, work, script, core, truth, kind, where):
        self.work, self.script, self.core, self.truth = work, script, core, truth
        self.kind, self.where = kind, where


def _one_core(work):
    cores = sorted(work.glob("core*"))
    assert len(cores) == 1, cores
    return cores[0]


@pytest.fixture(scope="module")
def kernel_core(tmp_path_factory):
    """``kernel_core(interp, kind, where)`` -> Crashed, made once per module."""
    with open("/proc/sys/kernel/core_pattern", encoding="ascii") as f:
        assert f.read().strip() == "core", "the test needs the kernel's plain `core` pattern"
    made = {}

    def make(it, kind, where):
        key = (it.id, kind, where)
        if key not in made:
            work = tmp_path_factory.mktemp("crash-%s-%s-%s" % key)
            script = work / "crasher.py"
            script.write_text(CRASHER)
            truth_path = work / "truth.json"
            rc, out, err = harness.run(["sh", "-c", WRAPPER, it.exe, script, kind, where, truth_path],
                                       CRASH_TIMEOUT, cwd=str(work), env=harness.child_env(it.env))
            assert rc != 0, "the crasher did not crash:\n%s%s" % (out, err)
            truth = json.loads(truth_path.read_text())
            made[key] = Crashed(work, script, _one_core(work), truth, kind, where)
        return made[key]

    return make


def expected_crash(c):
    """The `crash` object the truth gives."""
    t = c.truth
    want = {"thread": t["native_id"], "address": None}
    if c.kind == "segv":
        want.update(signal="SIGSEGV", signo=11, code="SEGV_MAPERR", address=t["address"])
    elif c.kind == "bus":
        want.update(signal="SIGBUS", signo=7, code="BUS_ADRERR", address=t["address"])
    elif c.kind == "fpe":
        want.update(signal="SIGFPE", signo=8, code="FPE_INTDIV")
    elif c.kind == "abort":
        # abort() raises with tgkill(getpid(), gettid(), SIGABRT).
        want.update(signal="SIGABRT", signo=6, code="SI_TKILL", sender_pid=t["pid"])
    return want


def is_idiv(code, at):
    """Whether the x86-64 instruction at `at` of `code` is `idiv`: opcode F7 with /7 in its
    ModRM byte, after at most one REX prefix."""
    if at < len(code) and 0x40 <= code[at] <= 0x4F:
        at += 1
    return at + 1 < len(code) and code[at] == 0xF7 and (code[at + 1] >> 3) & 7 == 7


def check_crash(c, report, text):
    """The report's `crash`, its thread order and the text's first line, against the truth."""
    t = c.truth
    crash = report["crash"]
    want = expected_crash(c)
    if c.kind == "fpe":
        # The fault address of a division by zero is the `idiv` in glibc's div().
        at = crash["address"] - t["function"]
        assert 0 <= at < 64 and is_idiv(bytes.fromhex(t["code"]), at), (crash, t["code"])
        want["address"] = crash["address"]
    assert crash == want
    name = "parser" if c.where == "worker" else "MainThread"
    assert t["name"] == name
    threads = [(th["native_id"], th["name"]) for th in report["threads"]]
    others = [] if c.where == "main" else [(t["pid"], "MainThread")]
    assert threads == [(t["native_id"], name)] + others
    assert report["python"]["pid"] == t["pid"]
    assert report["errors"] == []
    # The crashing thread's stack holds the crashing line (and, in the main thread, the call).
    ours = [(f["function"], f["line"]) for f in report["threads"][0]["frames"]
            if f["kind"] == "python" and f["file"] == str(c.script)]
    want_frames = [("crash", line_of("crash: " + c.kind))]
    if c.where == "main":
        want_frames.append(("<module>", line_of("called: main")))
    assert ours == want_frames
    assert text.splitlines()[0] == crash_line(crash, name), text


def crash_line(crash, name):
    what = crash["code"]
    if "sender_pid" in crash:
        what += ", sent by pid %d" % crash["sender_pid"]
    at = "" if crash["address"] is None else " at %#x" % crash["address"]
    return 'Crashed: %s (%s)%s in thread %d "%s"' % (crash["signal"], what, at, crash["thread"], name)


def check_kernel_core(c):
    report = cli_json("core", c.core)
    check_crash(c, report, cli_text("core", c.core))
    return report


@pytest.mark.parametrize("where", ["main", "worker"])
@pytest.mark.parametrize("interp_id", SEGV_INTERPS)
def test_segv(kernel_core, interp_id, where):
    check_kernel_core(kernel_core(interp(interp_id), "segv", where))


@pytest.mark.parametrize("where", ["main", "worker"])
@pytest.mark.parametrize("kind", ["bus", "fpe", "abort"])
@pytest.mark.parametrize("interp_id", OTHER_INTERPS)
def test_bus_fpe_abort(kernel_core, interp_id, kind, where):
    check_kernel_core(kernel_core(interp(interp_id), kind, where))


def test_signal_sent_by_another_process(tmp_path):
    """`kill -SEGV` from elsewhere is no memory fault: SI_USER, sent by that process."""
    it = interp("pyenv-3.12")
    script = tmp_path / "crasher.py"
    script.write_text(CRASHER)
    truth_path = tmp_path / "truth.json"
    proc = subprocess.Popen(["sh", "-c", WRAPPER, it.exe, str(script), "kill", "main", str(truth_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=str(tmp_path),
                            env=harness.child_env(it.env), start_new_session=True)
    try:
        assert proc.stdout.readline() == b"ready\n", proc.stderr.read()
        os.kill(proc.pid, signal.SIGSEGV)
        proc.communicate(timeout=CRASH_TIMEOUT)
    finally:
        if proc.returncode is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == -signal.SIGSEGV
    truth = json.loads(truth_path.read_text())
    c = Crashed(tmp_path, script, _one_core(tmp_path), truth, "kill", "main")
    report = cli_json("core", c.core)
    want = {"signal": "SIGSEGV", "signo": 11, "code": "SI_USER", "address": None,
            "thread": truth["pid"], "sender_pid": os.getpid()}
    assert report["crash"] == want
    assert [t["native_id"] for t in report["threads"]] == [truth["pid"]]
    assert cli_text("core", c.core).splitlines()[0] == (
        'Crashed: SIGSEGV (SI_USER, sent by pid %d) in thread %d "MainThread"'
        % (os.getpid(), truth["pid"]))


def test_systemd_coredump_zstd_copy(kernel_core):
    """systemd-coredump stores the kernel's core zstd-compressed: the same report."""
    c = kernel_core(interp("debian-3.11"), "segv", "worker")
    plain = check_kernel_core(c)
    name = "core.python3\\x2e11.0.%s.%d.1732370000000000.zst" % ("0" * 32, c.truth["pid"])
    packed = c.work / name
    with open(c.core, "rb") as i, open(packed, "wb") as o:
        subprocess.run(["zstd", "-q", "-3", "--content-size", "-c"], stdin=i, stdout=o, check=True)
    assert cli_json("core", packed) == plain
    assert cli_text("core", packed) == cli_text("core", c.core)


def test_gdb_py_bt_all_on_a_kernel_core(kernel_core):
    """gdb's `py-bt -a` goes through the same rendering: the same first line, and the same
    crash and thread order in its JSON."""
    it = interp("pyenv-3.12")
    c = kernel_core(it, "segv", "worker")
    report = check_kernel_core(c)
    cmd = gdb_cmd(it, "echo @@TEXT@@\\n", "py-bt -a", "echo @@JSON@@\\n", "py-bt -a --json",
                  core=str(c.core))
    rc, out, err = harness.run(cmd, GDB_TIMEOUT, env=harness.child_env(it.env))
    assert rc == 0, out + err
    text = out.split("@@TEXT@@\n", 1)[1].split("@@JSON@@\n", 1)[0]
    assert text.splitlines()[0] == crash_line(report["crash"], "parser"), out
    assert text.splitlines()[1] == ""
    assert text.splitlines()[2].startswith('Thread %d "parser"' % c.truth["native_id"]), out
    ours = json_from(out.split("@@JSON@@\n", 1)[1])
    assert ours["crash"] == report["crash"]
    assert [t["native_id"] for t in ours["threads"]] == [t["native_id"] for t in report["threads"]]


def test_gdb_core_of_a_process_stopped_at_its_crash(tmp_path):
    """A core gdb writes while the process is stopped at the fatal signal is a crash too: gdb
    puts the signalled thread first and writes its siginfo after it."""
    it = interp("pyenv-3.12")
    script = tmp_path / "crasher.py"
    script.write_text(CRASHER)
    truth_path = tmp_path / "truth.json"
    core = tmp_path / "gdb.core"
    env = {k: v for k, v in harness.child_env(it.env).items() if k != "DEBUGINFOD_URLS"}
    rc, out, err = harness.run([*harness.gdb_argv(), "-q", "-batch", "-nx", "-iex", "set auto-load off",
                                "-iex", "set debuginfod enabled off",
                                "-ex", "run", "-ex", "gcore %s" % core,
                                "--args", it.exe, script, "segv", "worker", truth_path],
                               GDB_TIMEOUT, cwd=str(tmp_path), env=env)
    assert core.is_file(), out + err
    truth = json.loads(truth_path.read_text())
    c = Crashed(tmp_path, script, core, truth, "segv", "worker")
    report = cli_json("core", core)
    check_crash(c, report, cli_text("core", core))


def test_gcore_snapshot_is_no_crash():
    """gcore of a running process: its notes say SIGSTOP (ptrace's stop) with no current
    signal, and gdb wrote them: no `crash`, and the text starts as before."""
    it = interp("pyenv-3.12")
    with harness.Scenario(it, "threads") as sc:
        core = sc.make_core()
        report = cli_json("core", core)
        assert "crash" not in report
        assert report["errors"] == []
        assert re.match(r"Python 3\.12\.\d+ \(core pid %d\)$" % sc.pid,
                        cli_text("core", core).splitlines()[0])
        # A live process is no crash either.
        assert "crash" not in cli_json("pid", sc.pid)

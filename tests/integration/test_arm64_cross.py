"""pyunwind built for arm64 (aarch64) and run here, on x86-64, under qemu-user: the aarch64 wheel
(target/wheels/pyunwind-*_aarch64.whl), which `make wheel` builds next to the x86-64 one
(tools/cross-aarch64.sh), run in the arm64 roots that tools/arm64.sh makes (`make arm64`).

- The wheel: abi3, aarch64, with a manylinux tag that is the newest glibc symbol version its
  module needs. Unpacked, its `_pyunwind` is imported by sid's arm64 python3.14 under qemu and
  reads a core: the same report as the x86-64 module gives.
- The CLI arm64 users get: the wheel's `pyunwind` console entry point (entry_points.txt), run
  by the root's arm64 python under `qemu-aarch64 -L ROOT` (the Rust command line of
  `_pyunwind.cli_main`, the standalone binary's code). It reads qemu's arm64 cores of
  bookworm's python3.11 and sid's python3.14 (arm64_harness), and a gcore core of an x86-64
  pyenv 3.12 (run by bookworm's python3.11). Its output (`--json`, the text, `--locals`,
  `--native-all`) is exactly the x86-64 CLI's, and that output is the scenario's truth. Cores
  are data: the reader's own architecture does not change what it reads.
- `pyunwind pid` on an arm64 interpreter running under qemu-user, read by the aarch64 CLI
  under qemu (qemu-user 7.2 has no process_vm_readv: ENOSYS, and the CLI reads the process's
  /proc/PID/mem instead) and by the x86-64 CLI on the host. qemu maps a 64-bit guest's
  addresses one to one, and /proc/PID/maps lists the guest's files, so both give the truth,
  and the same report.

No standalone aarch64 binary is built: it would compile the crate once more for aarch64 (about
100 CPU-seconds on every run whose sources changed), and what arm64 users install is the wheel.
The cores are made once for the module. A missing build, root or qemu fails the tests: nothing
is skipped.
"""

import glob
import json
import os
import pathlib
import re
import struct
import zipfile

import pytest

import arm64_harness
import harness
from test_arm64 import expected_crash, text_threads
from test_stacks import check_report, expected

# The aarch64 wheel: `make integration` builds it at the lowest priority and runs this file after
# the lldb tests (tools/wheel-aarch64.sh).
pytestmark = pytest.mark.aarch64_wheel

# Under qemu the CLI runs several times slower than natively.
QEMU_TIMEOUT = 300
# One stop per arm64 root, and the x86-64 core: "<interpreter id>:<scenario>".
ARM64_STOPS = ["arm64-bookworm-3.11:threads", "arm64-sid-3.14:locals"]
X86_STOP = "pyenv-3.12:threads"
# The arm64 interpreter whose python runs the CLI on the x86-64 core.
X86_STOP_CLI = "arm64-bookworm-3.11"
WHEEL_STOP = "arm64-sid-3.14:locals"


def aarch64_wheel():
    """The aarch64 wheel `make wheel` built, else HarnessError."""
    harness.wait_for_wheels("aarch64")
    found = glob.glob(str(harness.repo_root() / "target" / "wheels" / "pyunwind-*_aarch64.whl"))
    if not found:
        raise harness.HarnessError("no aarch64 wheel in target/wheels: run `make wheel-aarch64`")
    return pathlib.Path(max(found, key=os.path.getmtime))


def guest(root, exe, *args):
    """`qemu-aarch64 -L ROOT EXE ARGS...`: (exit status, stdout, stderr)."""
    return harness.run([arm64_harness.qemu(), "-L", root, exe, *args], QEMU_TIMEOUT,
                       env=harness.child_env())


def ok(result, what):
    rc, out, err = result
    assert rc == 0, "%s failed (%d):\n%s" % (what, rc, err)
    harness.assert_no_panic(err, rc)
    return out


def elf_machine(path):
    with open(path, "rb") as f:
        head = f.read(20)
    assert head[:4] == b"\x7fELF", path
    return struct.unpack_from("<H", head, 18)[0]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """The aarch64 wheel, unpacked: (its path, the directory)."""
    path = aarch64_wheel()
    where = tmp_path_factory.mktemp("wheel-aarch64")
    with zipfile.ZipFile(path) as z:
        z.extractall(where)
    return path, where


# Puts the unpacked wheel (argv[2]) first on sys.path and drops it and the "-" before it from
# argv, so that the code sees the arguments after them.
PRELUDE = "import sys; sys.path.insert(0, sys.argv[2]); del sys.argv[1:3]\n"


def wheel_python(wheel, interp, code, *args):
    """arm64 interpreter ``interp``'s python under qemu (in its root) with the unpacked wheel
    first on sys.path, running ``code`` with ``args``."""
    return guest(interp.root, interp.guest_exe, "-c", PRELUDE + code, "-", str(wheel[1]), *args)


def aarch64_cli(wheel, interp, *args):
    """The wheel's `pyunwind` console entry point (entry_points.txt) run by ``interp``'s arm64
    python: (exit status, stdout, stderr)."""
    entry = (next(wheel[1].glob("pyunwind-*.dist-info")) / "entry_points.txt").read_text()
    m = re.search(r"^pyunwind\s*=\s*([\w.]+):(\w+)\s*$", entry, re.M)
    assert m, entry
    code = ("sys.argv[0] = 'pyunwind'\n"
            "from %s import %s as main\n"
            "sys.exit(main())\n" % m.groups())
    return wheel_python(wheel, interp, code, *args)


class CrossStop:
    """A core read by both CLIs: ``root`` is its sysroot (None for an x86-64 core of this
    machine), ``cli`` the arm64 interpreter whose python runs the aarch64 CLI."""

    def __init__(self, interp, sc, core, root, cli, wheel, live):
        self.interp, self.sc, self.core, self.truth = interp, sc, core, sc.truth
        self.root, self.cli, self.wheel, self.live = root, cli, wheel, live

    def x86(self, *args):
        cmd = [harness.cli_path(), "core", self.core, *self._sysroot(), *args]
        return ok(harness.run(cmd, QEMU_TIMEOUT), " ".join(map(str, cmd)))

    def aarch64(self, *args):
        out = ok(aarch64_cli(self.wheel, self.cli, "core", self.core, *self._sysroot(), *args),
                 "the aarch64 CLI on %s" % self.core)
        if "--json" in args:
            harness.check_report_schema(json.loads(out))
        return out

    def _sysroot(self):
        return ["--sysroot", self.root] if self.root else []


@pytest.fixture(scope="module")
def stop(request, wheel):
    """The stop's core, made once. The bookworm scenario is first read live (``stop.live``),
    while it still runs: making qemu's core ends it."""
    interp_id, kind = request.param.split(":")
    if interp_id.startswith("arm64-"):
        interp = cli = arm64_harness.pick(interp_id)
        sc = arm64_harness.Scenario(interp, kind)
        root = interp.root
    else:
        interp, cli = harness.pick([interp_id])[0], arm64_harness.pick(X86_STOP_CLI)
        sc = harness.Scenario(interp, kind)
        root = None
    try:
        live = {}
        if interp_id == "arm64-bookworm-3.11":
            live["aarch64"] = aarch64_cli(wheel, cli, "pid", str(sc.pid), "--json")
            live["x86"] = harness.run([harness.cli_path(), "pid", sc.pid, "--json"], QEMU_TIMEOUT)
        yield CrossStop(interp, sc, sc.make_core(), root, cli, wheel, live)
    finally:
        sc.close()


def on(ids):
    return pytest.mark.parametrize("stop", ids, indirect=True)


# --- the aarch64 CLI -------------------------------------------------------------------------


def test_cli_prints_the_x86_cli_help(wheel):
    """Under qemu the aarch64 CLI prints the x86-64 CLI's help and version."""
    cli = arm64_harness.pick(X86_STOP_CLI)
    for args in (["--help"], ["--version"], ["core", "--help"]):
        x86 = ok(harness.run([harness.cli_path(), *args], 30), "pyunwind %s" % args)
        assert ok(aarch64_cli(wheel, cli, *args), "aarch64 pyunwind %s" % args) == x86


@on(ARM64_STOPS + [X86_STOP])
def test_json_is_the_x86_cli_json(stop):
    """`--json`: the aarch64 CLI's report is the x86-64 CLI's, byte for byte, and it is the
    truth (threads, Python frames, the crash of a qemu core)."""
    out = stop.aarch64("--json")
    assert out == stop.x86("--json")
    report = json.loads(out)
    check_report(report, stop.truth)
    if stop.interp.id.startswith("arm64-"):
        assert report["crash"] == expected_crash(stop)
    assert report["python"]["source"] == "core"
    assert report["python"]["pid"] == stop.sc.pid


@on(ARM64_STOPS + [X86_STOP])
def test_text_is_the_x86_cli_text(stop):
    """The text report: the x86-64 CLI's, and every thread with the truth's frames."""
    out = stop.aarch64()
    assert out == stop.x86()
    want = {t["native_id"]: (t["name"], expected(t["frames"])) for t in stop.truth["threads"]}
    assert text_threads(out) == want, out


@on(ARM64_STOPS + [X86_STOP])
def test_native_is_the_x86_cli_native(stop):
    """`--native-all --json`: the same native frames (modules, symbols, CFI and DWARF read by
    the aarch64 build) with the truth's Python frames in them."""
    out = stop.aarch64("--native-all", "--json")
    assert out == stop.x86("--native-all", "--json")
    report = json.loads(out)
    assert report["errors"] == []
    want = {t["native_id"]: expected(t["frames"]) for t in stop.truth["threads"]}
    for t in report["threads"]:
        python = [(f["function"], f["file"], f["line"]) for f in t["frames"]
                  if f["kind"] == "python"]
        assert python == want[t["native_id"]], t["frames"]
        assert any(f["kind"] == "native" for f in t["frames"]), t["frames"]


@on(["arm64-sid-3.14:locals"])
def test_locals_are_the_x86_cli_locals(stop):
    out = stop.aarch64("--locals", "--json")
    assert out == stop.x86("--locals", "--json")
    check_report(json.loads(out), stop.truth)


# --- live: `pyunwind pid` on a process under qemu-user ------------------------------------------


@on(["arm64-bookworm-3.11:threads"])
def test_live_pid_under_qemu(stop):
    """`pid --json` of an arm64 Python under qemu-user: the aarch64 CLI under qemu (through
    /proc/PID/mem: qemu-user has no process_vm_readv) and the x86-64 CLI on the host both give
    its Python threads and frames exactly, the same report but for the host name."""
    reports = {}
    for cli in ("aarch64", "x86"):
        rc, out, err = stop.live[cli]
        harness.assert_no_panic(err, rc)
        assert rc == 0, (cli, err)
        report = json.loads(out)
        check_report(report, stop.truth, live_cli=True)
        assert report["python"]["source"] == "live", cli
        reports[cli] = report
    assert reports["aarch64"]["threads"] == reports["x86"]["threads"]


# --- the aarch64 wheel -----------------------------------------------------------------------


def glibc_versions(so):
    """The GLIBC_2.x symbol versions ``so`` needs (readelf -V: .gnu.version_r), as (2, x)."""
    rc, out, err = harness.run(["readelf", "-V", "-W", so], 30)
    assert rc == 0, err
    return {tuple(map(int, v.split("."))) for v in re.findall(r"Name: GLIBC_([0-9.]+)", out)}


def test_wheel_is_abi3_manylinux_aarch64(wheel):
    """The name and the WHEEL file say abi3 (CPython 3.8+), manylinux, aarch64. The manylinux
    glibc is the newest GLIBC_ symbol version the module needs (maturin's audit), and the
    module is arm64 code."""
    path, where = wheel
    m = re.match(r"pyunwind-[0-9.]+-cp38-abi3-manylinux_2_(\d+)_aarch64\.whl$", path.name)
    assert m, path.name
    info = (next(where.glob("pyunwind-*.dist-info")) / "WHEEL").read_text()
    assert "Tag: cp38-abi3-manylinux_2_%s_aarch64\n" % m.group(1) in info, info
    assert "Root-Is-Purelib: false" in info, info
    so, = where.glob("pyunwind/_pyunwind*.so")
    assert elf_machine(so) == arm64_harness.EM_AARCH64
    assert max(glibc_versions(so)) == (2, int(m.group(1))), sorted(glibc_versions(so))


@on([WHEEL_STOP])
def test_wheel_module_reads_a_core(stop, wheel):
    """sid's arm64 python3.14 imports the wheel's `_pyunwind` (from the wheel, not elsewhere)
    and reads the core with it: the x86-64 module's report, which is the truth."""
    code = ("from pyunwind import _pyunwind\n"
            "print(_pyunwind.__file__)\n"
            "s = _pyunwind.Session.core(sys.argv[1], sysroot=sys.argv[2])\n"
            "print(s.report(all_threads=True))\n")
    out = ok(wheel_python(wheel, stop.interp, code, stop.core, stop.root), "the wheel's module")
    module, report = out.splitlines()
    assert module.startswith(str(wheel[1] / "pyunwind" / "_pyunwind")), module
    x86 = harness.core_module().Session.core(stop.core, sysroot=stop.root)
    assert json.loads(report) == json.loads(x86.report(all_threads=True))
    check_report(json.loads(report), stop.truth)

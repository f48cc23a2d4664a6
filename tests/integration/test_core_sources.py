"""Cores as users get them and processes as they run in containers: compressed cores (zstd,
lz4, xz, gzip, made with the command-line tools from real gcore cores), a process in a chroot
in its own mount namespace (`unshare --mount`) read live and from its core with --sysroot,
--lib-search-path, gdb's `set sysroot` and lldb's platform sysroot, build-id checks, and a
process whose executable was deleted or replaced on disk."""

import json
import os
import pathlib
import shutil
import subprocess
import tempfile

import pytest

import harness

from test_stacks import check_report, gdb_cmd, json_from

# Tools and their options: compress to stdout; none of the outputs has a telling name.
COMPRESSORS = {
    "zstd": ["zstd", "-q", "-1", "-T0", "-c"],
    "lz4": ["lz4", "-q", "-1", "-c"],
    "xz": ["xz", "-0", "-T0", "-c"],
    "gzip": ["gzip", "-1", "-c"],
}
MAGIC = {"zstd": b"\x28\xb5\x2f\xfd", "lz4": b"\x04\x22\x4d\x18", "xz": b"\xfd7zXZ\x00", "gzip": b"\x1f\x8b"}
CLI_TIMEOUT = 120
# The CLI must not hold an unpacked core in memory: its peak RSS on a core of this many random
# (incompressible) bytes stays far below it.
BIG_CORE_PAYLOAD_BYTES = 192 << 20
MAX_RSS_FRACTION = 0.25
DEBIAN_LIBDIR = "/lib/x86_64-linux-gnu"
# A compressed core that unpacks to fewer bytes than an ELF header is refused as damaged.
ELF_HEADER_BYTES = 64
CHROOT_PYTHON = "/opt/py/bin/python3"


def pyenv(minor):
    return harness.pick(["pyenv-3.%d" % minor])[0]


def debian():
    return harness.pick(["debian-3.11"])[0]


def cli(*args, timeout=CLI_TIMEOUT):
    return harness.run([harness.cli_path(), *map(str, args)], timeout)


def cli_json(*args):
    rc, out, err = cli(*args, "--json")
    assert rc == 0, err
    return json.loads(out)


def one_line_error(rc, err):
    assert rc == 1 and err.startswith("pyunwind: ") and err.count("\n") == 1, (rc, err)
    return err


def compress(tool, src, dest):
    with open(src, "rb") as i, open(dest, "wb") as o:
        subprocess.run(COMPRESSORS[tool], stdin=i, stdout=o, check=True, timeout=300)
    with open(dest, "rb") as f:
        assert f.read(6).startswith(MAGIC[tool])
    return dest


# --- compressed cores -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def shapes_core(tmp_path_factory):
    """A gcore core of the `shapes` scenario (pyenv 3.12), its truth and the plain report."""
    with harness.Scenario(pyenv(12), "shapes") as sc:
        core = tmp_path_factory.mktemp("compressed") / "core"
        shutil.copy(sc.make_core(), core)
        truth = sc.truth
    return core, truth, cli_json("core", core)


@pytest.mark.parametrize("tool", sorted(COMPRESSORS))
def test_compressed_core_reads_as_the_plain_one(shapes_core, tool):
    core, truth, plain = shapes_core
    # Named without a suffix: recognised by its magic bytes.
    packed = compress(tool, core, core.parent / ("packed-" + tool))
    report = cli_json("core", packed)
    check_report(report, truth)
    assert report == plain
    rc, text, err = cli("core", packed)
    assert rc == 0, err
    rc, plain_text, err = cli("core", core)
    assert text == plain_text


def test_systemd_coredump_style_zstd_core(shapes_core):
    """systemd-coredump stores `core.COMM.UID.BOOTID.PID.TIME.zst` (zstd, content size in the
    frame header); the extension plays no part."""
    core, truth, plain = shapes_core
    name = "core.python3\\x2e12.0.%s.%d.1732370000000000.zst" % ("0" * 32, truth["pid"])
    packed = core.parent / name
    with open(core, "rb") as i, open(packed, "wb") as o:
        subprocess.run(["zstd", "-q", "-3", "--content-size", "-c"], stdin=i, stdout=o, check=True)
    assert cli_json("core", packed) == plain


def outcome(path):
    """What the CLI makes of the core at ``path``: ("report", the JSON report) or ("error", its
    one error line with ``path`` written CORE)."""
    rc, out, err = cli("core", path, "--json")
    harness.assert_no_panic(err, rc)
    if rc == 0:
        return "report", json.loads(out)
    assert not out, out[:3000]
    return "error", one_line_error(rc, err).replace(str(path), "CORE")


def zstd_window(frame):
    """The window size of the zstd frame starting ``frame`` (RFC 8878, 3.1.1.1.2)."""
    descriptor = frame[4]
    if descriptor & 0x20:  # Single_Segment_Flag: the window is the content size
        return 1 << 62
    w = frame[5]
    base = 1 << (10 + (w >> 3))
    return base + (base // 8) * (w & 7)


@pytest.mark.parametrize("layout", ["gcore", "kernel"])
@pytest.mark.parametrize("tool", sorted(COMPRESSORS))
def test_cut_compressed_core_is_a_cut_core(shapes_core, tool, layout, tmp_path):
    """A compressed core cut short reads like the plain core cut where the tool's own
    decompressor stops: the same error line (but for the file's name), or the same report.
    gcore writes the notes last, so every cut of its core loses them (an error); the kernel
    writes them first, so a cut loses memory and leaves a partial report. A cut that unpacks to
    less than an ELF header is refused as a damaged compressed core (src/memory/unpack.rs),
    not as the empty file it unpacks to."""
    from corefile import CoreFile

    core = shapes_core[0]
    if layout == "kernel":
        core = pathlib.Path(CoreFile(str(core)).notes_first_copy(str(tmp_path / "kernel")).path)
    packed = compress(tool, core, tmp_path / ("cut-src-" + tool))
    data = packed.read_bytes()
    reports = 0
    for fraction in (0.02, 0.5, 0.8, 0.9, 0.97):
        cut = tmp_path / ("cut-%s-%d" % (tool, fraction * 100))
        cut.write_bytes(data[:int(len(data) * fraction)])
        with open(cut, "rb") as f:
            unpacked = subprocess.run([COMPRESSORS[tool][0], "-d", "-c"], stdin=f,
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                      timeout=300)
        assert unpacked.returncode != 0, "%s unpacked a cut file without an error" % tool
        what = "%s cut to %d%%, %d bytes unpacked" % (tool, fraction * 100, len(unpacked.stdout))
        got = outcome(cut)
        if len(unpacked.stdout) < ELF_HEADER_BYTES:
            assert got[0] == "error" and got[1].startswith(
                "pyunwind: CORE: not a readable %s core: " % tool), (what, got)
            continue
        kept = unpacked.stdout
        if tool == "zstd":
            # src/memory/unpack.rs: ruzstd keeps a cut frame's last window back (a known loss,
            # to be fixed with another decoder); the rest must read as the plain cut does.
            kept = kept[:max(0, len(kept) - zstd_window(data))]
        plain_cut = tmp_path / ("plain-cut-%s-%d" % (tool, fraction * 100))
        plain_cut.write_bytes(kept)
        want = outcome(plain_cut)
        if layout == "gcore":
            assert want == ("error", "pyunwind: CORE: core file has no NT_FILE note "
                            "(mapped files unknown)\n"), (what, want)
        reports += want[0] == "report"
        assert got == want, what
    if layout == "kernel":
        # The 50% and 97% cuts keep the notes: what they compare is a report.
        assert reports >= 2, reports


def test_compressed_core_is_not_held_in_memory(tmp_path):
    """The CLI's peak RSS on a zstd core of ~200 MiB of incompressible memory stays a fraction
    of the core: it is unpacked to a temporary file, not into memory."""
    payload = tmp_path / "payload.py"
    payload.write_text(
        "import os, sys, time\n"
        "blob = os.urandom(%d)\n"
        "def hold():\n"
        "    print('ready', flush=True); time.sleep(600)\n"
        "hold()\n" % BIG_CORE_PAYLOAD_BYTES)
    core = harness.payload_core(pyenv(12).exe, payload, tmp_path / "big")
    size = core.stat().st_size
    assert size > BIG_CORE_PAYLOAD_BYTES
    packed = compress("zstd", core, tmp_path / "big-core")
    core.unlink()
    maxrss, out = harness.cli_peak_rss(["core", packed], tmp_path)
    assert b'line 4, in hold' in out
    assert maxrss < size * MAX_RSS_FRACTION, (maxrss, size)


# --- a process in a chroot in its own mount namespace -----------------------------------------


@pytest.fixture(scope="module")
def chroot_tree(tmp_path_factory):
    """(stage, root, interp): `stage` holds a root file system with Debian's python3.11 at
    /opt/py/bin/python3 and its libraries; `interp` runs a program chrooted into `root`, an
    empty directory on which, in a private mount namespace (`unshare --mount`), a tmpfs is
    mounted and the stage copied (the standard library and the scenario files bind-mounted).
    Like a container's, the process's files exist only in its namespace: this machine's path
    `root`/opt/py/bin/python3 is missing."""
    base = tmp_path_factory.mktemp("chroot")
    stage, root = base / "stage", base / "root"
    root.mkdir()
    exe = stage / CHROOT_PYTHON.lstrip("/")
    exe.parent.mkdir(parents=True)
    shutil.copy2(debian().exe, exe)
    (stage / "opt/py/lib/python3.11").mkdir(parents=True)
    libdir = stage / DEBIAN_LIBDIR.lstrip("/")
    libdir.mkdir(parents=True)
    (stage / "lib64").mkdir()
    out = subprocess.run(["ldd", debian().exe], stdout=subprocess.PIPE, text=True, check=True).stdout
    for line in out.splitlines():
        path = line.split("=>")[-1].split("(")[0].strip()
        if path.startswith("/"):
            dest = stage / "lib64" if "ld-linux" in path else libdir
            shutil.copy2(os.path.realpath(path), dest / os.path.basename(path))
    (stage / "tmp").mkdir()
    scenarios = harness.scenarios_dir()
    (stage / str(scenarios).lstrip("/")).mkdir(parents=True)
    launcher = base / "in-chroot"
    launcher.write_text(
        "#!/bin/sh\n"
        "# Runs %(py)s chrooted into %(root)s, a tmpfs of its own mount namespace.\n"
        "exec unshare --mount --propagation private sh -c '\n"
        "  mount -t tmpfs pyunwind-test %(root)s && cp -a %(stage)s/. %(root)s/ &&\n"
        "  mount --bind /tmp %(root)s/tmp &&\n"
        "  mount --bind /usr/lib/python3.11 %(root)s/opt/py/lib/python3.11 &&\n"
        "  mount --bind %(scen)s %(root)s%(scen)s &&\n"
        "  exec chroot %(root)s %(py)s \"$@\"' in-chroot \"$@\"\n"
        % {"root": root, "stage": stage, "py": CHROOT_PYTHON, "scen": scenarios})
    launcher.chmod(0o755)
    interp = harness.Interp("chroot-debian-3.11", str(launcher), {}, 11, True, None)
    return stage, root, interp


@pytest.fixture(scope="module")
def chrooted(chroot_tree, tmp_path_factory):
    """The `shapes` scenario running in the chroot: (scenario, stage, root, core). The core
    names the executable by its path in the process's mount namespace."""
    stage, root, interp = chroot_tree
    with harness.Scenario(interp, "shapes") as sc:
        maps = harness.mapped_files(sc.pid)
        named = str(root) + CHROOT_PYTHON
        assert named in maps, sorted(maps)
        assert not os.path.exists(named)
        core = tmp_path_factory.mktemp("chroot-core") / "core"
        shutil.copy(sc.make_core(), core)
        yield sc, stage, root, core


def sysroot_of(stage, root, where):
    """A sysroot as a user would make from the container's image: the stage at the paths the
    core names."""
    tree = where / str(root).lstrip("/")
    shutil.copytree(stage, tree, symlinks=True)
    return where


def test_live_process_in_another_mount_namespace(chrooted):
    sc, stage, root, core = chrooted
    check_report(cli_json("pid", sc.pid), sc.truth, live_cli=True)


def test_chroot_core_needs_the_sysroot(chrooted, tmp_path):
    sc, stage, root, core = chrooted
    err = one_line_error(*cli("core", core)[::2])
    assert str(root) + CHROOT_PYTHON + ": file not found" in err
    check_report(cli_json("core", core, "--sysroot", sysroot_of(stage, root, tmp_path / "s")),
                 sc.truth)
    check_report(cli_json("core", core, "--lib-search-path", "/nonexistent",
                          "--lib-search-path", stage / "opt/py/bin"), sc.truth)


def test_chroot_core_with_another_build_is_refused(chrooted, tmp_path):
    """A sysroot whose python3 is another build: refused with both build-ids."""
    sc, stage, root, core = chrooted
    other = tmp_path / "other"
    dest = other / (str(root) + CHROOT_PYTHON).lstrip("/")
    dest.parent.mkdir(parents=True)
    shutil.copy2(pyenv(11).exe, dest)
    want, got = harness.build_id(debian().exe), harness.build_id(str(dest))
    assert want and got and want != got
    err = one_line_error(*cli("core", core, "--sysroot", other)[::2])
    assert CHROOT_PYTHON in err and want in err and got in err and "refused" in err
    # Given both, the matching one wins.
    check_report(cli_json("core", core, "--sysroot", other, "--lib-search-path",
                          stage / "opt/py/bin"), sc.truth)


def test_gdb_set_sysroot_reaches_the_direct_memory_source(chrooted, tmp_path):
    sc, stage, root, core = chrooted
    interp = debian()
    sysroot = sysroot_of(stage, root, tmp_path / "s")
    # No executable given: the core's own paths, under the sysroot, are all there is.
    cmd = gdb_cmd(interp, "py-bt -a --json", core=str(core), extra_iex=["set sysroot %s" % sysroot])
    cmd[cmd.index(interp.exe)] = "-c"
    rc, out, err = harness.run(cmd, 120, env=harness.child_env())
    assert rc == 0, err
    report = json_from(out)
    assert report["python"]["source"] == "core"
    check_report(report, sc.truth)


# `chroot` starts it in the new root (a private tmpfs): the core is to land in the shared /tmp.
CRASHER = """\
import os, signal
os.chdir(os.path.dirname(os.path.abspath(__file__)))
def crash():
    os.kill(os.getpid(), signal.SIGSEGV)
crash()
"""


def test_kernel_core_of_a_chrooted_process(chroot_tree):
    """A core the kernel writes for a crashing process in the chroot (core_pattern `core`, as
    set up on this machine) names files by their paths inside the chroot, as a container's core
    does: with the image as --sysroot it reads exactly; without, the missing file is named."""
    stage, root, interp = chroot_tree
    with open("/proc/sys/kernel/core_pattern", encoding="ascii") as f:
        assert f.read().strip() == "core", "the test needs the kernel's plain `core` pattern"
    work = pathlib.Path(tempfile.mkdtemp(dir="/tmp", prefix="pyunwind-crash-"))
    try:
        script = work / "crasher.py"
        script.write_text(CRASHER)
        # /tmp is bind-mounted at the same path inside the chroot.
        rc, out, err = harness.run(["sh", "-c", 'ulimit -c unlimited; exec "$0" "$1"',
                                    interp.exe, str(script)], 60, cwd=str(work),
                                   env=harness.child_env())
        assert rc != 0, "the crasher did not crash"
        cores = sorted(work.glob("core*"))
        assert len(cores) == 1, (cores, err)
        core = cores[0]
        err = one_line_error(*cli("core", core)[::2])
        assert CHROOT_PYTHON + ": file not found" in err, err
        report = cli_json("core", core, "--sysroot", stage)
        frames = [(f["function"], f["file"], f["line"]) for t in report["threads"]
                  for f in t["frames"]]
        assert frames == [("crash", str(script), 4), ("<module>", str(script), 5)], frames
    finally:
        shutil.rmtree(work, ignore_errors=True)


# --- an executable deleted or replaced on disk ----------------------------------------------


@pytest.mark.parametrize("change", ["deleted", "replaced"])
def test_live_process_whose_executable_changed_on_disk(tmp_path, change):
    exe = tmp_path / "python3.11"
    shutil.copy2(debian().exe, exe)
    interp = harness.Interp("debian-3.11-copy", str(exe), {}, 11, True, None)
    with harness.Scenario(interp, "shapes") as sc:
        exe.unlink()
        if change == "replaced":
            # An upgrade puts another build at the same path.
            shutil.copy2(pyenv(11).exe, exe)
        check_report(cli_json("pid", sc.pid), sc.truth, live_cli=True)

"""lldb with files from elsewhere and from a pip install (run by `make integration-lldb` with
each lldb, $PYUNWIND_LLDB): the platform sysroot reaches the direct memory source on a core of a
chrooted process; `pyunwind lldb-script` of both test venvs loads the installed module into
lldb's own Python, on a core and live; `install-lldb` / `uninstall-lldb`."""

import os
import re

import pytest

import harness
from test_core_sources import chroot_tree, chrooted, sysroot_of  # noqa: F401
from packaging_venvs import VENVS, pyunwind, script, shapes, venvs  # noqa: F401
from test_stacks import check_report, json_from


LLDB_TIMEOUT = 180


def lldb_path():
    path = os.environ.get("PYUNWIND_LLDB")
    if not path:
        raise harness.HarnessError("PYUNWIND_LLDB is not set (make integration-lldb sets it)")
    return path


def run_lldb(*commands, env=None, init=False):
    cmd = [lldb_path(), "-b"] + ([] if init else ["-x"])
    for c in commands:
        cmd += ["-o", c]
    cmd += ["-o", "script import sys; print('MODULE=' + sys.modules['_pyunwind'].__file__)"]
    rc, out, err = harness.run(cmd, LLDB_TIMEOUT, env=env or harness.child_env())
    assert rc == 0, "lldb failed (%d):\n%s\n%s" % (rc, out, err)
    assert "Traceback (most recent call last)" not in out + err, out + err
    return out


def report_after(out, command):
    part = out[out.index("(lldb) " + command):out.index("MODULE=")]
    return json_from(part)


def test_platform_sysroot_reaches_the_direct_memory_source(chrooted, tmp_path):  # noqa: F811
    sc, stage, root, core = chrooted
    sysroot = sysroot_of(stage, root, tmp_path / "s")
    script_path = harness.repo_root() / "lldb-scripts" / "pyunwind_lldb.py"
    # No executable: the core's own paths, under the sysroot, are all there is.
    out = run_lldb("platform select host --sysroot %s" % sysroot,
                   "command script import %s" % script_path,
                   "target create --core %s" % core,
                   "py-bt -a --json")
    report = report_after(out, "py-bt -a --json")
    assert report["python"]["source"] == "core"
    check_report(report, sc.truth)


@pytest.mark.parametrize("name", VENVS)
def test_lldb_script_loads_the_installed_module(venvs, shapes, name):  # noqa: F811
    venv = venvs[name]
    path = script(venv, "lldb-script")
    for target in ("target create %s --core %s" % (shapes.exe, shapes.make_core()),
                   "process attach --pid %d" % shapes.pid):
        out = run_lldb("command script import %s" % path, target, "py-bt -a --json")
        check_report(report_after(out, "py-bt -a --json"), shapes.truth)
        module = re.search(r"^MODULE=(.*)$", out, re.M).group(1)
        assert module.startswith(str(venv)), module


@pytest.mark.parametrize("name", VENVS)
def test_install_lldb_is_idempotent_and_reversible(venvs, shapes, name, tmp_path):  # noqa: F811
    venv = venvs[name]
    env = harness.child_env({"HOME": str(tmp_path)})
    lldbinit = tmp_path / ".lldbinit"
    line = "command script import %s" % script(venv, "lldb-script")
    for _ in range(2):
        rc, out, err = pyunwind(venv, "install-lldb", env=env)
        assert rc == 0, err
        assert lldbinit.read_text() == line + "\n"
    out = run_lldb("target create %s --core %s" % (shapes.exe, shapes.make_core()),
                   "py-bt -a --json", env=env, init=True)
    check_report(report_after(out, "py-bt -a --json"), shapes.truth)
    rc, out, err = pyunwind(venv, "uninstall-lldb", env=env)
    assert rc == 0 and lldbinit.read_text() == "", err

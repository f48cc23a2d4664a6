"""The pip package installed in fresh venvs, for test_packaging*.py and test_lldb_sources.py.

Two venvs, at fixed paths under $PYUNWIND_CACHE/pip-test: `pip install <checkout>` (maturin) on
pyenv's 3.12 ("pip-checkout-pyenv-3.12") and the wheel of `make wheel` on Debian's python3.11
("wheel-debian-3.11"). A test module gets the `venvs` fixture (import it with `shapes`): a venv
is made the first time a test of the module asks for it, so a module that tests one venv
makes only that one. The checks both debuggers' test files run on each venv are here too.

`make integration` runs the test files by file on several workers: test_packaging_checkout.py
(`pip install <checkout>`) and test_packaging.py (the wheel) make different venvs, so they can
run at the same time; both wait for the background wheel job (tools/wheel-x86_64.sh), whose x86-64
build leaves pip's build nothing to compile. test_lldb_sources.py makes both venvs, in
`make integration-lldb`, after them.

Run as a script (`packaging_venvs.py checkout-python`, by tools/wheel-x86_64.sh): prints
`checkout_python()`.
"""

import glob
import json
import os
import pathlib
import re

import pytest

import harness

from test_stacks import check_report, json_from

PIP_TIMEOUT = 1200
GDB_TIMEOUT = 120
CHECKOUT_VENV = "pip-checkout-pyenv-3.12"
WHEEL_VENV = "wheel-debian-3.11"
VENVS = [CHECKOUT_VENV, WHEEL_VENV]


def wheel_path():
    """The x86-64 wheel `make wheel` built (`make integration` builds it in the background:
    harness.wait_for_wheels; the aarch64 one beside it is test_arm64_cross's)."""
    harness.wait_for_wheels()
    found = sorted(glob.glob(str(harness.repo_root() / "target" / "wheels" / "pyunwind-*_x86_64.whl")),
                   key=os.path.getmtime)
    if not found:
        raise harness.HarnessError("no x86-64 wheel in target/wheels: run `make wheel-x86_64`")
    return pathlib.Path(found[-1])


def _pip(venv, *args, env=None):
    rc, out, err = harness.run([venv / "bin" / "python", "-m", "pip", "install",
                                "--disable-pip-version-check", "-q", *map(str, args)],
                               PIP_TIMEOUT, env=env)
    assert rc == 0, "pip install %s failed:\n%s\n%s" % (" ".join(map(str, args)), out, err)


def _fresh_venv(base_python, where):
    # --clear: a fresh venv each run, at a fixed path (see `checkout_venv`).
    rc, out, err = harness.run([base_python, "-m", "venv", "--clear", where], 120)
    assert rc == 0, err
    return where


def _root():
    root = harness.cache_dir() / "pip-test"
    root.mkdir(exist_ok=True)
    return root


def _checkout_base():
    return harness.pick(["pyenv-3.12"], among=harness.interpreters())[0].exe


def checkout_python():
    """The interpreter `pip install <checkout>` builds with: its venv's python (made here,
    without packages, when missing). tools/wheel-x86_64.sh builds the x86-64 wheel for it (`make
    wheel WHEEL_PYTHON=...`), in the target dir that `pip install` builds in: pyo3's build script
    keys its output on the interpreter's path, so pip's build of the same sources then finds
    everything compiled (a crate compile less, about 100 CPU-seconds, on every run whose sources
    changed). The venv is made again, fresh, by `checkout_venv`, at the same path."""
    venv = _root() / "pyenv-3.12"
    if not os.access(venv / "bin" / "python", os.X_OK):
        rc, out, err = harness.run([_checkout_base(), "-m", "venv", venv], 120)
        assert rc == 0, err
    return venv / "bin" / "python"


def _wheel_target_dir():
    """`make wheel`'s WHEEL_TARGET: $PYUNWIND_CACHE/wheel-target (the Makefile seeds it)."""
    return harness.cache_dir() / "wheel-target"


def checkout_venv():
    """`pip install <checkout>` builds with maturin (from PyPI, through pip's cache) into
    `make wheel`'s target dir, after the background wheel job built the x86-64 wheel there for
    this venv's python (`checkout_python`): the build is not isolated (pip's isolated build
    environments have random paths, and pyo3 rebuilds when the interpreter's path changes)."""
    harness.wait_for_wheels()
    venv = _fresh_venv(_checkout_base(), checkout_python().parent.parent)
    _pip(venv, "maturin>=1.5,<2")
    env = harness.child_env({"CARGO_TARGET_DIR": str(_wheel_target_dir())})
    env["PATH"] = "%s:%s" % (venv / "bin", env.get("PATH", ""))  # the build hook runs `maturin`
    _pip(venv, "--no-build-isolation", harness.repo_root(), env=env)
    return venv


def wheel_venv():
    venv = _fresh_venv(harness.DEBIAN_PYTHON311, _root() / "debian-3.11")
    _pip(venv, wheel_path())
    return venv


class _Venvs(dict):
    """name -> venv, made on first use."""

    MAKERS = {CHECKOUT_VENV: checkout_venv, WHEEL_VENV: wheel_venv}

    def __missing__(self, name):
        self[name] = self.MAKERS[name]()
        return self[name]


@pytest.fixture(scope="module")
def venvs():
    """name -> a fresh venv with pyunwind installed (VENVS names them)."""
    return _Venvs()


@pytest.fixture(scope="module")
def shapes():
    """The `shapes` scenario on pyenv 3.12, running for the module, and its core."""
    interp = harness.pick(["pyenv-3.12"])[0]
    with harness.Scenario(interp, "shapes") as sc:
        sc.make_core()
        yield sc


def pyunwind(venv, *args, env=None):
    return harness.run([venv / "bin" / "pyunwind", *map(str, args)], 120, env=env)


def script(venv, which):
    rc, out, err = pyunwind(venv, which)
    assert rc == 0, err
    path = pathlib.Path(out.strip())
    site = glob.glob(str(venv / "lib" / "python3.*" / "site-packages" / "pyunwind"))
    assert path.is_file() and str(path.parent) == site[0], (path, site)
    return path


def gdb_with(venv, shapes, source, *commands, nx=True, env=None):
    cmd = ["gdb", "-q", "-batch"] + (["-nx"] if nx else []) + [
        "-iex", "set auto-load off", "-iex", "set debuginfod enabled off"]
    if source:
        cmd += ["-x", str(source)]
    for c in commands:
        cmd += ["-ex", c]
    cmd += ["-ex", "python import sys; print('MODULE=' + sys.modules['_pyunwind'].__file__)"]
    rc, out, err = harness.run(cmd + [shapes.exe, shapes.make_core()], GDB_TIMEOUT,
                               env=env or harness.child_env())
    assert rc == 0, err
    assert "Traceback (most recent call last)" not in out + err, out + err
    module = re.search(r"^MODULE=(.*)$", out, re.M).group(1)
    assert module.startswith(str(venv)), module
    return out


# --- the checks test_packaging.py and test_packaging_checkout.py run on their venv ------------


def check_installed_cli_is_the_same_cli(venv, shapes):
    rc, help_out, err = pyunwind(venv, "--help")
    assert rc == 0, err
    rc, bin_help, err = harness.run([harness.cli_path(), "--help"], 30)
    assert help_out == bin_help
    rc, out, err = pyunwind(venv, "core", shapes.make_core(), "--json")
    assert rc == 0, err
    report = harness.check_report_schema(json.loads(out))
    check_report(report, shapes.truth)
    rc, out, err = pyunwind(venv, "pid", shapes.pid, "--json")
    assert rc == 0, err
    check_report(json.loads(out), shapes.truth, live_cli=True)
    rc, out, err = pyunwind(venv, "core", "/nonexistent/core")
    assert rc == 1 and err == "pyunwind: /nonexistent/core: No such file or directory (os error 2)\n", err


def check_gdb_script_loads_the_installed_module(venv, shapes):
    out = gdb_with(venv, shapes, script(venv, "gdb-script"), "py-bt -a --json")
    check_report(json_from(out[:out.index("MODULE=")]), shapes.truth)
    # Live, too.
    cmd = ["gdb", "-q", "-batch", "-nx", "-iex", "set auto-load off", "-iex",
           "set debuginfod enabled off", "-x", str(script(venv, "gdb-script")),
           "-ex", "py-bt -a --json", "-p", str(shapes.pid)]
    rc, out, err = harness.run(cmd, GDB_TIMEOUT, env=harness.child_env())
    assert rc == 0, err
    check_report(json_from(out), shapes.truth)


def check_install_gdb_is_idempotent_and_reversible(venv, shapes, tmp_path):
    env = harness.child_env({"HOME": str(tmp_path)})
    gdbinit = tmp_path / ".gdbinit"
    gdbinit.write_text("set pagination off")  # no final newline: kept as it is
    line = "source %s" % script(venv, "gdb-script")
    for _ in range(2):
        rc, out, err = pyunwind(venv, "install-gdb", env=env)
        assert rc == 0, err
        assert gdbinit.read_text() == "set pagination off\n%s\n" % line
    out = gdb_with(venv, shapes, None, "py-bt -a --json", nx=False, env=env)
    check_report(json_from(out[:out.index("MODULE=")]), shapes.truth)
    rc, out, err = pyunwind(venv, "uninstall-gdb", env=env)
    assert rc == 0 and gdbinit.read_text() == "set pagination off\n", err
    rc, out, err = pyunwind(venv, "uninstall-gdb", env=env)
    assert rc == 0 and "has no" in out


if __name__ == "__main__":
    import sys
    if sys.argv[1:] != ["checkout-python"]:
        sys.exit("usage: packaging_venvs.py checkout-python")
    print(checkout_python())

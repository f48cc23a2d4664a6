"""CPython's own gdb tests (Lib/test/test_gdb, installed with each pyenv interpreter) against
pyunwind's py-* commands, with libpython.py kept out.

cpython_gdb_driver.py runs the suite under the interpreter it tests; gdb-with-pyunwind.sh is
the `gdb` it finds on PATH. Each interpreter's suite is a test file of its own
(test_cpython_gdb_suite_3XX.py): `make integration` runs pytest-xdist with --dist loadfile,
which keeps a file on one worker, and one suite takes minutes, so one file per interpreter lets
the workers share them. Every test must pass.
"""

import json
import os
import pathlib
import subprocess
import tempfile

import harness


HERE = pathlib.Path(__file__).resolve().parent
DRIVER = HERE / "cpython_gdb_driver.py"
GDB_WRAPPER = HERE / "gdb-with-pyunwind.sh"
SUITE_TIMEOUT_SECONDS = 900

# How many tests each version's suite (the driver's MODULES) holds: every one must run and pass
# (a skip, or a test the loader no longer finds, fails the run).
TEST_COUNTS = {10: 46, 11: 57, 12: 57, 13: 57}


def suite_file(minor):
    return HERE / ("test_cpython_gdb_suite_3%d.py" % minor)


def run_suite(minor):
    """Runs the suite under pyenv's 3.<minor>; (outcomes, log)."""
    version = harness.PYENV_VERSIONS[minor]
    exe = harness.pyenv_root() / "versions" / version / "bin" / ("python3.%d" % minor)
    if not exe.exists():
        raise harness.HarnessError("missing test interpreter %s" % exe)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="pyunwind-test-gdb-3.%d-" % minor))
    bindir = tmp / "bin"
    bindir.mkdir()
    (bindir / "gdb").symlink_to(GDB_WRAPPER)
    env = harness.child_env()
    env["PATH"] = "%s:%s" % (bindir, env.get("PATH", os.defpath))
    out = tmp / ("3.%d.json" % minor)
    with open(tmp / ("3.%d.log" % minor), "w") as log:
        proc = subprocess.Popen([str(exe), str(DRIVER), str(out)], cwd=tmp, env=env,
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        try:
            proc.wait(timeout=SUITE_TIMEOUT_SECONDS)
        finally:
            proc.kill()
    text = (tmp / ("3.%d.log" % minor)).read_text(errors="replace")
    outcomes = json.loads(out.read_text()) if out.exists() else {}
    return outcomes, text


def check(minor):
    """The suite of pyenv's 3.<minor> runs all its tests and each passes."""
    # A version added to the matrix needs its count here and its file beside this one.
    missing = [m for m in harness.PYENV_VERSIONS
               if m not in TEST_COUNTS or not suite_file(m).exists()]
    assert not missing, "no test count or no test file for pyenv %s" % ", ".join(
        "3.%d" % m for m in missing)
    outcomes, log = run_suite(minor)
    failed = {t: o for t, o in outcomes.items() if o != "pass"}
    assert not failed, "CPython test_gdb on 3.%d: %s\n%s" % (minor, failed, log[-20000:])
    assert len(outcomes) == TEST_COUNTS[minor], log[-20000:]

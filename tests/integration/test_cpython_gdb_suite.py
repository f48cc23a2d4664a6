"""CPython's own gdb tests (Lib/test/test_gdb, installed with each pyenv interpreter) against
pyunwind's py-* commands, with libpython.py kept out.

cpython_gdb_driver.py runs the suite under the interpreter it tests; gdb-with-pyunwind.sh is
the `gdb` it finds on PATH. The four versions run at once (each is mostly waiting on gdb).
Every test must pass.
"""

import json
import os
import pathlib
import subprocess
import tempfile

import pytest

import harness


HERE = pathlib.Path(__file__).resolve().parent
DRIVER = HERE / "cpython_gdb_driver.py"
GDB_WRAPPER = HERE / "gdb-with-pyunwind.sh"
SUITE_TIMEOUT_SECONDS = 900

# How many tests each version's suite (the driver's MODULES) holds: every one must run and pass (a skip, or a test
# the loader no longer finds, fails the run).
TEST_COUNTS = {10: 46, 11: 57, 12: 57, 13: 57}


@pytest.fixture(scope="module")
def suite_results():
    """Starts the suite under every pyenv version at once; {minor: (outcomes, log)}."""
    root = harness.pyenv_root()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="pyunwind-test-gdb-"))
    bindir = tmp / "bin"
    bindir.mkdir()
    (bindir / "gdb").symlink_to(GDB_WRAPPER)
    env = harness.child_env()
    env["PATH"] = "%s:%s" % (bindir, env.get("PATH", os.defpath))
    runs = {}
    for minor, version in harness.PYENV_VERSIONS.items():
        exe = root / "versions" / version / "bin" / ("python3.%d" % minor)
        if not exe.exists():
            raise harness.HarnessError("missing test interpreter %s" % exe)
        out = tmp / ("3.%d.json" % minor)
        log = open(tmp / ("3.%d.log" % minor), "w")
        runs[minor] = (subprocess.Popen([str(exe), str(DRIVER), str(out)], cwd=tmp, env=env,
                                        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT),
                       out, log)
    results = {}
    for minor, (proc, out, log) in runs.items():
        try:
            proc.wait(timeout=SUITE_TIMEOUT_SECONDS)
        finally:
            proc.kill()
            log.close()
        text = pathlib.Path(log.name).read_text(errors="replace")
        outcomes = json.loads(out.read_text()) if out.exists() else {}
        results[minor] = (outcomes, text)
    return results


@pytest.mark.parametrize("minor", sorted(harness.PYENV_VERSIONS), ids=lambda m: "pyenv-3.%d" % m)
def test_cpython_test_gdb(suite_results, minor):
    outcomes, log = suite_results[minor]
    failed = {t: o for t, o in outcomes.items() if o != "pass"}
    assert not failed, "CPython test_gdb on 3.%d: %s\n%s" % (minor, failed, log[-20000:])
    assert len(outcomes) == TEST_COUNTS[minor], log[-20000:]

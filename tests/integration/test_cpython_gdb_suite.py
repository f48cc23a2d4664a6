"""CPython's own gdb tests (Lib/test/test_gdb, installed with each pyenv interpreter) against
pyunwind's py-* commands, with libpython.py kept out.

cpython_gdb_driver.py runs the suite under the interpreter it tests; gdb-with-pyunwind.sh is
the `gdb` it finds on PATH. The four versions run at once (each is mostly waiting on gdb).
Every test outside PrettyPrintTests must pass; PrettyPrintTests (gdb's `print` of a
`PyObject *` through pretty-printers) is not implemented yet and not run.
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

# What is run: 3.10 has one test_gdb.py, 3.11+ a package.
SUITES = {
    10: ["test.test_gdb.PyListTests", "test.test_gdb.StackNavigationTests",
         "test.test_gdb.PyBtTests", "test.test_gdb.PyPrintTests", "test.test_gdb.PyLocalsTests"],
}
SUITE_3_11_PLUS = ["test.test_gdb.test_backtrace", "test.test_gdb.test_misc",
                   "test.test_gdb.test_cfunction", "test.test_gdb.test_cfunction_full"]

COMMON = [
    "PyListTests.test_basic_command", "PyListTests.test_one_abs_arg",
    "PyListTests.test_two_abs_args",
    "StackNavigationTests.test_pyup_command", "StackNavigationTests.test_down_at_bottom",
    "StackNavigationTests.test_up_at_top", "StackNavigationTests.test_up_then_down",
    "PyBtTests.test_bt", "PyBtTests.test_bt_full", "PyBtTests.test_threads", "PyBtTests.test_gc",
    "PyBtTests.test_wrapper_call",
    "PyPrintTests.test_basic_command", "PyPrintTests.test_print_after_up",
    "PyPrintTests.test_printing_global", "PyPrintTests.test_printing_builtin",
    "PyLocalsTests.test_basic_command", "PyLocalsTests.test_locals_after_up",
]
CFUNCTION = ["test_pycfunction_noargs", "test_pycfunction_o", "test_pycfunction_varargs",
             "test_pycfunction_varargs_keywords", "test_pycfunction_fastcall",
             "test_pycfunction_fastcall_keywords"]
# 3.10: test_gdb.PyBtTests holds the C function tests.
EXPECTED_3_10 = {"test.test_gdb." + t for t in COMMON} | {
    "test.test_gdb.PyBtTests.test_pycfunction",
}
_MODULE_OF = {"PyListTests": "test_misc", "StackNavigationTests": "test_misc",
              "PyPrintTests": "test_misc", "PyLocalsTests": "test_misc",
              "PyBtTests": "test_backtrace"}
EXPECTED_3_11_PLUS = {"test.test_gdb.%s.%s" % (_MODULE_OF[t.split(".")[0]], t) for t in COMMON} | {
    "test.test_gdb.test_cfunction.CFunctionTests." + t for t in CFUNCTION} | {
    "test.test_gdb.test_cfunction_full.CFunctionFullTests." + t for t in CFUNCTION}


def expected(minor):
    return EXPECTED_3_10 if minor == 10 else EXPECTED_3_11_PLUS


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
        names = SUITES.get(minor, SUITE_3_11_PLUS)
        runs[minor] = (subprocess.Popen([str(exe), str(DRIVER), str(out)] + names, cwd=tmp, env=env,
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
    passed = {t for t, o in outcomes.items() if o == "pass"}
    want = expected(minor)
    missing = sorted(want - passed)
    assert not missing, "CPython test_gdb on 3.%d: expected to pass but did not: %s\n%s" % (
        minor, missing, log[-20000:])
    extra = sorted(passed - want)
    assert not extra, "passing now, add them to the expected list: %s" % extra

"""Run CPython's own Lib/test/test_gdb against pyunwind's py-* commands.

Started with the interpreter under test (`python driver.py REPORT.json [TEST_ID...]`); PATH must
lead `gdb` to gdb-wrapper.sh, which keeps libpython.py out and sources pyunwind. Only the skips
that concern libpython itself are lifted: "source builds only" and "compiled with
optimizations" (libpython needs DWARF that optimization loses; pyunwind reads memory only).
The installed test files are imported as they are, not copied or edited.
"""

import json
import sys
import sysconfig
import unittest

from test import support

# Both are read when the test modules are imported (decorators, module-level checks).
support.python_is_optimized = lambda: False
sysconfig.is_python_build = lambda *args, **kwargs: True

MODULES = {
    (3, 10): ["test.test_gdb"],
}
DEFAULT_MODULES = [
    "test.test_gdb.test_backtrace",
    "test.test_gdb.test_misc",
    "test.test_gdb.test_cfunction",
    "test.test_gdb.test_cfunction_full",
    "test.test_gdb.test_pretty_print",
]


class _Result(unittest.TextTestResult):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.outcomes = {}

    def _set(self, test, outcome, err=None):
        tid = test.id()
        # A failing subtest fails its test.
        if self.outcomes.get(tid) in ("fail", "error") and outcome == "pass":
            return
        self.outcomes[tid] = outcome

    def addSuccess(self, test):
        super().addSuccess(test)
        self._set(test, "pass")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._set(test, "fail")

    def addError(self, test, err):
        super().addError(test, err)
        self._set(test, "error")

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._set(test, "skip: " + reason)

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            self._set(test, "fail")


def main():
    report = sys.argv[1]
    names = sys.argv[2:] or MODULES.get(sys.version_info[:2], DEFAULT_MODULES)
    suite = unittest.defaultTestLoader.loadTestsFromNames(names)
    runner = unittest.TextTestRunner(verbosity=2, resultclass=_Result, stream=sys.stderr)
    result = runner.run(suite)
    with open(report, "w") as f:
        json.dump(result.outcomes, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()

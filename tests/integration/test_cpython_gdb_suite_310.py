"""CPython 3.10's own test_gdb against pyunwind's py-* commands (cpython_gdb_suite.py)."""

import cpython_gdb_suite


def test_cpython_test_gdb():
    cpython_gdb_suite.check(10)

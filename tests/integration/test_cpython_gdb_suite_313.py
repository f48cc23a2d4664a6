"""CPython 3.13's own test_gdb against pyunwind's py-* commands (cpython_gdb_suite.py)."""

import pytest

import cpython_gdb_suite

# Minutes: it runs first under pytest-xdist (conftest.py).
pytestmark = pytest.mark.long_file


def test_cpython_test_gdb():
    cpython_gdb_suite.check(13)

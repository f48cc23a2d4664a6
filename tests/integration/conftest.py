"""pytest glue for the integration tests; the real work is in harness.py.

- ``import harness`` works from every test module here.
- A test that takes an ``interp`` argument and does not parametrize it itself runs once per
  interpreter of ``harness.interpreters()``, with ids like ``pyenv-3.12-stripped``. Explicit
  ``@pytest.mark.parametrize("interp", harness.interpreters(), ids=harness_id)`` also works.
- ``scenario(interp, name)`` fixture: starts a scenario and stops it after the test.
- ``pyunwind_build`` (session, autouse): the release CLI and the built Python module must
  exist; a test run without them fails, it does not skip.
"""

import os
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
# The checks that test files share from these modules report their asserts as a test's do.
pytest.register_assert_rewrite("cpython_gdb_suite", "packaging_venvs")

import harness  # noqa: E402

def harness_id(interp):
    """Test id of an interpreter, for ``parametrize(..., ids=harness_id)``."""
    return interp.id


def _parametrized_names(metafunc):
    names = set()
    for mark in metafunc.definition.iter_markers("parametrize"):
        argnames = mark.args[0] if mark.args else mark.kwargs.get("argnames", ())
        if isinstance(argnames, str):
            argnames = argnames.split(",")
        names.update(name.strip() for name in argnames)
    return names


def pytest_generate_tests(metafunc):
    if "interp" in metafunc.fixturenames and "interp" not in _parametrized_names(metafunc):
        metafunc.parametrize("interp", harness.interpreters(), ids=harness_id)


class Build:
    def __init__(self, cli, module):
        self.cli = cli  # target/release/pyunwind
        self.module = module  # the pyo3 extension module


@pytest.fixture(scope="session", autouse=True)
def pyunwind_build():
    cli = harness.cli_path()
    module = harness.module_path()
    missing = []
    if not os.access(cli, os.X_OK):
        missing.append(str(cli))
    if module is None:
        where = os.environ.get("PYUNWIND_MODULE") or " or ".join(harness.MODULE_CANDIDATES)
        missing.append("the _pyunwind module (%s, exporting %s)"
                       % (where, harness.MODULE_INIT_SYMBOL.decode()))
    if missing:
        pytest.fail("not built: %s (run `make` first)" % ", ".join(missing), pytrace=False)
    return Build(cli, module)


@pytest.fixture
def scenario():
    """``scenario(interp, name)`` -> a running harness.Scenario, closed after the test."""
    started = []

    def start(interp, name, **kwargs):
        s = harness.Scenario(interp, name, **kwargs)
        started.append(s)
        return s

    yield start
    for s in started:
        s.close()

"""pytest glue for the integration tests; the real work is in harness.py.

- ``import harness`` works from every test module here.
- A test that takes an ``interp`` argument and does not parametrize it itself runs once per
  interpreter of ``harness.interpreters()``, with ids like ``pyenv-3.12-stripped``. Explicit
  ``@pytest.mark.parametrize("interp", harness.interpreters(), ids=harness_id)`` also works.
- ``scenario(interp, name)`` fixture: starts a scenario and stops it after the test.
- ``pyunwind_build`` (session, autouse): the release CLI and the built Python module must
  exist; a test run without them fails, it does not skip.
"""

import mmap
import os
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import harness  # noqa: E402

# Where the build may put the pyo3 extension module `_pyunwind` (cargo feature "python"), in
# order of preference; the environment variable PYUNWIND_MODULE overrides. A candidate counts
# only if it exports PyInit__pyunwind: the cdylib is also built without the feature.
MODULE_CANDIDATES = (
    "target/release/_pyunwind.so",
    "target/release/libpyunwind.so",
)
MODULE_INIT_SYMBOL = b"PyInit__pyunwind"


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


def module_path():
    """Path of the built Python extension module, or None when it is not there."""
    override = os.environ.get("PYUNWIND_MODULE")
    candidates = [override] if override else [harness.repo_root() / c for c in MODULE_CANDIDATES]
    for candidate in map(pathlib.Path, candidates):
        if candidate.is_file() and candidate.stat().st_size and _exports_module_init(candidate):
            return candidate
    return None


def _exports_module_init(path):
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        return data.find(MODULE_INIT_SYMBOL) != -1


class Build:
    def __init__(self, cli, module):
        self.cli = cli  # target/release/pyunwind
        self.module = module  # the pyo3 extension module


@pytest.fixture(scope="session", autouse=True)
def pyunwind_build():
    cli = harness.cli_path()
    module = module_path()
    missing = []
    if not os.access(cli, os.X_OK):
        missing.append(str(cli))
    if module is None:
        where = os.environ.get("PYUNWIND_MODULE") or " or ".join(MODULE_CANDIDATES)
        missing.append("the _pyunwind module (%s, exporting %s)"
                       % (where, MODULE_INIT_SYMBOL.decode()))
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

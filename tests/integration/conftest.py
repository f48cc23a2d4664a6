"""pytest glue for the integration tests; the real work is in harness.py.

- ``import harness`` works from every test module here.
- A test that takes an ``interp`` argument and does not parametrize it itself runs once per
  interpreter of ``harness.interpreters()``, with ids like ``pyenv-3.12-stripped``. Explicit
  ``@pytest.mark.parametrize("interp", harness.interpreters(), ids=harness_id)`` also works.
- ``scenario(interp, name)`` fixture: starts a scenario and stops it after the test.
- ``pyunwind_build`` (session, autouse): the release CLI and the built Python module must
  exist; a test run without them fails, it does not skip.
- Test files run in this order: those marked ``long_file`` first, then the others by number of
  tests, most first (see ``pytest_collection_modifyitems``).
"""

import os
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
# The checks that test files share from these modules report their asserts as a test's do.
pytest.register_assert_rewrite("cpython_gdb_suite", "packaging_venvs")

import harness  # noqa: E402

# No debuginfod unless a test asks for it (test_debuginfod.py sets its own servers): a
# DEBUGINFOD_URLS of the machine (Debian's /etc/profile.d sets one) would make every --native
# run of the CLI ask the network for the files the tests leave out on purpose.
os.environ.pop("DEBUGINFOD_URLS", None)

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


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "long_file: a test file that takes minutes with few tests; it runs first")
    config.addinivalue_line(
        "markers", "after_wheels: a test file that needs the pip packages, "
        "which `make integration` builds in the background (tools/wheel-x86_64.sh); it runs last")
    config.addinivalue_line(
        "markers", "aarch64_wheel: a test file that needs the aarch64 pip package, which "
        "`make integration` builds at the lowest priority (tools/wheel-aarch64.sh) and runs "
        "these files after the lldb tests (`-m aarch64_wheel`)")
    # pytest-xdist's own reordering (by number of tests) would undo pytest_collection_modifyitems'.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(items):
    """`make integration` runs pytest-xdist with --dist loadfile: a worker takes the next test
    file, in this order, when it has finished its last. A file that takes minutes and comes last
    keeps one worker busy after the other has run out of work. So the files marked `long_file`
    (`pytestmark = pytest.mark.long_file`) come first, then the others by number of tests, most
    first (as pytest-xdist orders them by itself); a file's tests keep their order unless it
    names another (`scenario_key`). Files marked `after_wheels` come after all those, in the same
    order among themselves: they wait for tools/wheel-x86_64.sh, which builds while the others run."""
    per_file = {}
    for item in items:
        per_file.setdefault(item.nodeid.split("::")[0], []).append(item)

    def key(path):
        tests = per_file[path]
        first = tests[0]
        return (first.get_closest_marker("after_wheels") is not None,
                first.get_closest_marker("long_file") is None, -len(tests))

    # A file whose tests share costly state in a row (test_stacks: one process per scenario)
    # names their order with a `scenario_key(item)` function.
    for tests in per_file.values():
        order = getattr(getattr(tests[0], "module", None), "scenario_key", None)
        if order is not None:
            tests.sort(key=order)
    items[:] = [item for path in sorted(per_file, key=key) for item in per_file[path]]


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


def pytest_terminal_summary(terminalreporter):
    """The time of each test file (setup, call and teardown of its tests; module fixtures count
    in the setup of their first test) and of each xdist worker: with --dist loadfile a file
    runs on one worker, so the slowest files are the tail of the run, the ones to split."""
    files, workers = {}, {}
    for reports in terminalreporter.stats.values():
        for rep in reports:
            if not isinstance(getattr(rep, "duration", None), float) or not hasattr(rep, "when"):
                continue
            path = rep.nodeid.split("::")[0]
            node = getattr(rep, "node", None)
            worker = node.gateway.id if node is not None else "-"
            seconds, names = files.get(path, (0.0, set()))
            files[path] = (seconds + rep.duration, names | {worker})
            workers[worker] = workers.get(worker, 0.0) + rep.duration
    if not files:
        return
    terminalreporter.write_sep("=", "slowest test files")
    for path, (seconds, names) in sorted(files.items(), key=lambda f: -f[1][0])[:15]:
        terminalreporter.write_line("%8.1fs  %-5s %s" % (seconds, ",".join(sorted(names)), path))
    terminalreporter.write_line("workers: " + ", ".join(
        "%s %.1fs" % (w, s) for w, s in sorted(workers.items())))

"""lldb's `py-bt -a` names each thread as lldb does (issue 38 item 4; gdb and the CLI:
test_thread_names.py), on tests/scenarios/thread_names.py: live, lldb's names are /proc's.
Runs under `make integration-lldb` ($PYUNWIND_LLDB)."""

import json

import pytest

import harness
from test_lldb import json_from, mark, run_lldb, split
from test_thread_names import (check_python_threads, comm, expected_header, header,
                               python_threads, tasks)

# lldb's name of every thread, as JSON {lwp: name or null}.
LLDB_NAMES = ("script import json; print('NAMES ' + json.dumps({t.GetThreadID(): t.GetName() "
              "for t in lldb.process}))")


@pytest.fixture(scope="module")
def stop():
    with harness.Scenario(harness.pick(["pyenv-3.12"])[0], "thread_names") as sc:
        yield sc


def lldb_names(text):
    line = next(l for l in text.splitlines() if l.startswith("NAMES "))
    return {int(k): v for k, v in json.loads(line[len("NAMES "):]).items()}


def test_lldb_names_threads_as_lldb_does_live(stop):
    out = run_lldb(stop.interp, mark("NAMES"), LLDB_NAMES, mark("JSON"), "py-bt -a --json",
                   mark("TEXT"), "py-bt -a", pid=stop.pid)
    got = split(out, ["NAMES", "JSON", "TEXT"])
    theirs = lldb_names(got["NAMES"])
    assert sorted(theirs) == tasks(stop)
    assert theirs == comm(stop)
    check_python_threads(stop, json_from(got["JSON"])["threads"], theirs)
    lines = got["TEXT"].splitlines()
    for tid in python_threads(stop):
        assert header(stop, tid, lines) == expected_header(stop, tid, True)
    assert harness.panic_in(out) is None, out


def test_lldb_on_a_gcore_core_names_no_thread(stop):
    """On a gcore core lldb names its first thread after NT_PRPSINFO's `pr_fname` (gdb writes
    argv[0]'s file name there, `python3`), which is no thread's name: `py-bt -a` names none,
    as the CLI and gdb do (test_thread_names.py)."""
    out = run_lldb(stop.interp, mark("NAMES"), LLDB_NAMES, mark("JSON"), "py-bt -a --json",
                   mark("TEXT"), "py-bt -a", core=stop.make_core())
    got = split(out, ["NAMES", "JSON", "TEXT"])
    theirs = lldb_names(got["NAMES"])
    assert sorted(theirs) == tasks(stop)
    assert [n for n in theirs.values() if n is not None] == ["python3"], theirs
    check_python_threads(stop, json_from(got["JSON"])["threads"], {})
    lines = got["TEXT"].splitlines()
    for tid in python_threads(stop):
        assert header(stop, tid, lines) == expected_header(stop, tid, False)
    assert harness.panic_in(out) is None, out

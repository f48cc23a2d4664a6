"""numpy scalars and arrays, and torch tensors, in lldb's `py-locals` and `py-print` on gcore
cores, exactly as the CLI's `--locals` shows them (docs/report.md, "Locals"), against the
programs' own record: tests/scenarios/heap_arrays.py's `repr` of each numpy scalar and summary
of each array (numpy 1.26.4 on 3.10, 2.5.5 on 3.12, 2.4.6 on the free-threaded 3.13t:
tools/numpy.sh), tests/scenarios/heap_torch.py's summary of each tensor (torch from PyPI on
3.12: tools/torch.sh). The CLI and gdb side: test_heap_arrays.py, test_heap_torch.py. Runs
under `make integration-lldb` ($PYUNWIND_LLDB)."""

import pytest

import harness
from test_heap_arrays import PRINTED, SETS, expected_locals, numpy_root  # noqa: F401 (the fixture)
from test_lldb import mark, run_lldb, split
from test_why_torch import torch_interp  # noqa: F401 (the fixture)

POOL = tuple(harness.interpreters()) + tuple(harness.provisioned_interpreters())


def shown_locals(text):
    """{name: text} of `py-locals`' lines."""
    return dict(line.split(" = ", 1) for line in text.strip().splitlines() if " = " in line)


def check_locals_and_prints(out, want, printed):
    got = split(out, ["LOCALS", "PRINT"])
    shown = shown_locals(got["LOCALS"])
    assert {n: shown.get(n) for n in want} == want
    for name in printed:
        assert "local '%s' = %s\n" % (name, want[name]) in got["PRINT"], (name, got["PRINT"])
    assert harness.panic_in(out) is None, out


@pytest.mark.parametrize("interp", harness.pick(["pyenv-3.10", "pyenv-3.12", "ft-3.13t"], POOL),
                         ids=lambda i: i.id)
def test_lldb_numpy_locals(interp, numpy_root):  # noqa: F811
    env = {"PYUNWIND_NUMPY": str(numpy_root / SETS[interp.id])}
    with harness.Scenario(interp, "heap_arrays", env=env) as sc:
        want = expected_locals(sc.truth)
        # Thread 1 is the main thread, which made the truth (numpy's BLAS has threads too).
        out = run_lldb(interp, "thread select 1", mark("LOCALS"), "py-locals", mark("PRINT"),
                       *("py-print %s" % n for n in PRINTED), core=sc.make_core())
        check_locals_and_prints(out, want, PRINTED)


def test_lldb_torch_locals(torch_interp):  # noqa: F811
    with harness.Scenario(torch_interp, "heap_torch", timeout=120) as sc:
        want = sc.truth["summaries"]
        out = run_lldb(torch_interp, "thread select 1", mark("LOCALS"), "py-locals",
                       mark("PRINT"), *("py-print %s" % n for n in want), core=sc.make_core())
        check_locals_and_prints(out, want, list(want))

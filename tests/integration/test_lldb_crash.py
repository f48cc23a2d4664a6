"""lldb's `py-bt -a` on a kernel core of a crash (tests/integration/test_crash.py makes it): the
same first line, crash and thread order as the CLI, since every frontend renders through the
same Rust code. Runs under `make integration-lldb` ($PYUNWIND_LLDB)."""

from test_crash import check_kernel_core, crash_line, interp, kernel_core  # noqa: F401
from test_lldb import json_from, mark, run_lldb, split


def test_lldb_py_bt_all_on_a_kernel_core(kernel_core):  # noqa: F811
    it = interp("pyenv-3.12")
    c = kernel_core(it, "segv", "worker")
    report = check_kernel_core(c)
    out = run_lldb(it, mark("TEXT"), "py-bt -a", mark("JSON"), "py-bt -a --json", core=str(c.core))
    got = split(out, ["TEXT", "JSON"])
    # What the command printed, after lldb's echo of it.
    lines = got["TEXT"].split("(lldb) py-bt -a\n", 1)[1].splitlines()
    assert lines[0] == crash_line(report["crash"], "parser"), got["TEXT"]
    assert lines[1] == ""
    assert lines[2].startswith('Thread %d "parser"' % c.truth["native_id"]), got["TEXT"]
    ours = json_from(got["JSON"])
    assert ours["crash"] == report["crash"]
    assert [t["native_id"] for t in ours["threads"]] == [t["native_id"] for t in report["threads"]]

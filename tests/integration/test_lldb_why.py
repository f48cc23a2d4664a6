"""`py-why` in lldb: the same verdict, waits, holds and deadlocks as the CLI's `--why` on a core
of the lock-order deadlock scenario (the gdb side: test_why_gdb.py). Runs under
`make integration-lldb` ($PYUNWIND_LLDB)."""

import json

import harness
from test_lldb import json_from, mark, run_lldb, split
from test_why_gdb import cli_why, verdict, why_core, why_fields  # noqa: F401


def test_lldb_py_why_is_the_cli_why(why_core):  # noqa: F811
    interp, core = why_core
    want = json.loads(cli_why(core, "--json"))
    out = run_lldb(interp, mark("TEXT"), "py-why", mark("JSON"), "py-why --json", core=str(core))
    got = split(out, ["TEXT", "JSON"])
    assert why_fields(json_from(got["JSON"])) == why_fields(want)
    # What the command printed, after lldb's echo of it.
    text = got["TEXT"].split("(lldb) py-why\n", 1)[1]
    assert verdict(text) == verdict(cli_why(core)), text
    assert harness.panic_in(out) is None, out

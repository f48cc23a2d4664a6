"""lldb's `py-bt` and frame provider on tests/scenarios/subinterpreters.py (issue 40): `py-bt -a`
and `py-bt` are the CLI's, crossings marked, on lldb 19 and 22; with lldb 22's provider a
subinterpreter's Python frames in `bt` carry its id after the name, as in gdb's `bt`."""

import re

import harness
from test_lldb import lldb_major, mark, run_lldb, split
from test_subinterpreters import SHOWN, check_py_bt, expected_text, labelled

# `frame #8: park_in_sub [interpreter 1] at subinterp_child.py:87 [synthetic]`.
LLDB_PY = re.compile(r"^\s*\*?\s*frame #\d+: (.+?) at (\S+):(\d+) \[synthetic\]$")


def test_lldb_py_bt_and_provider():
    """`py-bt -a` and `py-bt` are the CLI's; lldb 22's frame provider names a subinterpreter's
    frames as gdb's `bt` does (lldb 19 has no provider: its `bt` is lldb's own, not checked)."""
    provider = lldb_major() >= 22
    interp = harness.pick(["debian-3.14"])[0]
    with harness.Scenario(interp, "subinterpreters") as sc:
        core = sc.make_core()
        commands = [mark("ALL"), "py-bt -a"]
        for tt in sc.truth["threads"]:
            commands += ["script lldb.process.SetSelectedThreadByID(%d)" % tt["native_id"],
                         mark("T%d" % tt["native_id"])] + (["bt"] if provider else []) + ["py-bt"]
        names = ["T%d" % tt["native_id"] for tt in sc.truth["threads"]]
        out = split(run_lldb(interp, *commands, core=core), ["ALL"] + names)
        harness.assert_no_panic(out["ALL"])
        blocks = {}
        for block in out["ALL"].split("\n\n"):
            lines = [line for line in block.splitlines() if SHOWN.match(line)]
            if lines and lines[0].startswith("Thread "):
                blocks[int(lines[0].split()[1])] = lines
        for tt in sc.truth["threads"]:
            assert blocks.get(tt["native_id"]) == expected_text(sc.truth, tt), out["ALL"]
            text = out["T%d" % tt["native_id"]]
            if provider:
                shown = [(m.group(1), int(m.group(3)))
                         for m in map(LLDB_PY.match, text.splitlines()) if m]
                assert shown == labelled(tt), text
            check_py_bt(text[text.index("Traceback"):], tt)

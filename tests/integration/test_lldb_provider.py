"""lldb 22's frame provider (`make integration-lldb` runs this file with lldb 22 only: lldb 19
has no provider, and its `bt` is lldb's own, checked in test_lldb.py and test_lldb_jit.py)."""

import json
import re

import pytest

import harness
from test_lldb import INTERPS, LLDB_TIMEOUT, lldb_major, mark, run_lldb, split


# A frame of lldb's `bt`: `frame #9: 0x… libpython3.12.so.1.0`dict_subscript(mp=…) at …`, its
# symbol `___lldb_unnamed_symbol_5c7010 + 388` where the module has none; Python frames
# `[synthetic]` without a pc.
LLDB_FRAME = re.compile(r"^\s*\*?\s*frame #\d+: (?:0x[0-9a-f]+ [^`]*`([\w.]+)|.* \[synthetic\]$)")


@pytest.mark.parametrize("interp", harness.pick(("pyenv-3.12", "debian-3.11"), INTERPS), ids=lambda i: i.id)
def test_lldb_provider_keeps_the_builtins(interp):
    """tests/scenarios/native_builtins.py: lldb 22's `bt` (the frame provider) keeps, between the
    Python frames, the native frames `--native` keeps (builtin_sorted, list_sort_impl...,
    dict_subscript; without symbols the frame running `sorted`): the one rule of
    test_native_builtins.py."""
    assert lldb_major() >= 22, "the frame provider needs lldb 22 (the Makefile runs this file there)"
    with harness.Scenario(interp, "native_builtins") as sc:
        core = sc.make_core()
        # Debian's python3.11-dbg may be installed here (make bench): hidden, as run_lldb hides
        # it from lldb.
        rc, out, err = harness.run([harness.cli_path(), "core", core, "--native", "--json",
                                    "--debug-file-directory", interp.debug_dir or "/nonexistent"],
                                   LLDB_TIMEOUT)
        assert rc == 0, err
        frames = json.loads(out)["threads"][0]["frames"]
        py = [i for i, f in enumerate(frames) if f["kind"] == "python"]
        # lldb names no stripped function; ours names the builtin's frame after it.
        name = lambda f: None if f.get("function", "").endswith(" (builtin)") else f.get("function")  # noqa: E731
        ours = [("py",) if f["kind"] == "python" else ("c", name(f)) for f in frames[py[0]:py[-1] + 1]]
        assert len(ours) > len(py), frames
        bt = split(run_lldb(interp, mark("BT"), "bt", core=core), ["BT"])["BT"]
        shown = [("py",) if m.group(1) is None else
                 ("c", None if m.group(1).startswith("___lldb_unnamed_symbol") else m.group(1))
                 for line in bt.splitlines() for m in [LLDB_FRAME.match(line)] if m]
        py = [i for i, x in enumerate(shown) if x == ("py",)]
        # lldb 22 lists the frame of `slot_mp_subscript` (3.12) by its innermost inlined call
        # alone (`_PyObject_VectorcallTstate`, without `vectorcall_unbound`, `vectorcall_method`
        # and the function itself), so the provider, which shows lldb's frames, hides it as
        # plumbing: the one frame --native keeps that lldb's bt cannot.
        ours = [x for x in ours if x != ("c", "slot_mp_subscript")]
        assert shown[py[0]:py[-1] + 1] == ours, (bt, ours)

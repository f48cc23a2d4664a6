"""Python stacks in editors through lldb-dap (lldb 22+, pyunwind's frame provider), driven by
the DAP client an editor's role plays (dap_client.py): on a launched program, an attached
process and a core, `stackTrace` lists every Python frame with its own name, .py path and line,
in the truth's order, and `scopes`/`variables` show a Python frame's locals as their reprs.

The lldb is $PYUNWIND_LLDB (`make integration-lldb` runs this file for lldb 22 and later only:
lldb 19 has no frame provider); its lldb-dap is the same version's."""

import os
import time

import pytest

import editors_doc
import harness
from dap_client import DapClient, DapError
from test_dap import DAP_INTERPS, check_locals, launched_and_paused, python_frames, stopped  # noqa: F401
from test_lldb import SCRIPT, lldb_major, lldb_path
from test_stacks import expected

INIT_COMMANDS = [
    # Debian's python3.11-dbg may be installed here (make bench): hide it, as test_lldb does.
    "settings set symbols.enable-external-lookup false",
    "command script import %s" % SCRIPT,
]


def lldb_dap_path():
    major = lldb_major()
    assert major >= 22, "lldb %d has no frame provider: make integration-lldb runs this file for 22+" % major
    lldb = os.path.realpath(lldb_path())
    path = os.path.join(os.path.dirname(lldb), "lldb-dap")
    if not os.access(path, os.X_OK):
        pytest.fail("no lldb-dap beside %s (Debian's lldb-%d package has it)" % (lldb, major), pytrace=False)
    return path


def lldb_dap(interp):
    return DapClient([lldb_dap_path()], env=harness.child_env(interp.env))


def check_stack(client, truth):
    """The main thread's Python frames and the innermost one's locals, against the truth."""
    thread = client.request("threads")["threads"][0]["id"]
    frames = client.stack(thread)
    assert python_frames(frames) == expected(truth["threads"][0]["frames"]), frames
    ids = [f["id"] for f in frames]
    assert len(set(ids)) == len(ids), ids
    py = [f for f in frames if f.get("source", {}).get("path", "").endswith(".py")]
    first = truth["threads"][0]["frames"][0]
    if "locals" in first:
        check_locals(client.locals_of(py[0]["id"]), first["locals"])
        # An outer frame's locals are its own (main() has none).
        assert not client.locals_of(py[1]["id"])


@pytest.mark.parametrize("name", ["shapes", "locals"])
def test_lldb_dap_attach_and_core(stopped, name):
    interp, made = stopped
    s = made[name]
    with lldb_dap(interp) as client:
        client.initialize()
        client.start("attach", pid=s.sc.pid, program=interp.exe, initCommands=INIT_COMMANDS, stopOnEntry=True)
        check_stack(client, s.sc.truth)
    with lldb_dap(interp) as client:
        client.initialize()
        client.start("attach", program=interp.exe, coreFile=s.core, initCommands=INIT_COMMANDS)
        check_stack(client, s.sc.truth)


def request_until(client, deadline, refusal, command, **arguments):
    """`command`'s answer, asked again while lldb-dap refuses it with `refusal` (a state it
    passes through), until `deadline`; any other failure fails the test."""
    while True:
        try:
            return client.request(command, **arguments)
        except DapError as e:
            assert refusal in str(e) and time.monotonic() < deadline, e
            time.sleep(0.1)


@pytest.mark.parametrize("name", ["shapes", "locals"])
def test_lldb_dap_attach_without_stop_on_entry(stopped, name):
    """An attach configuration without `stopOnEntry`: lldb-dap lets the process run on after
    `configurationDone` (no `stopped` event), and the editor's pause button stops it; the
    stack and locals are the same as with `stopOnEntry`."""
    interp, made = stopped
    s = made[name]
    with lldb_dap(interp) as client:
        client.initialize()
        seq = client.request_async("attach", pid=s.sc.pid, program=interp.exe, initCommands=INIT_COMMANDS)
        client.wait_event("initialized")
        client.request("configurationDone")
        client.response(seq, "attach")
        # lldb-dap resumes the process after configurationDone, with no event to say so: the
        # pause button is refused ("Process is not running") until it has, and lldb-dap 24
        # answers no thread list while the process is between stopped and running.
        deadline = time.monotonic() + 30
        threads = request_until(client, deadline, "failed to retrieve threads", "threads")
        request_until(client, deadline, "not running", "pause", threadId=threads["threads"][0]["id"])
        client.wait_event("stopped")
        check_stack(client, s.sc.truth)


@pytest.mark.parametrize("interp", DAP_INTERPS, ids=lambda i: i.id)
def test_lldb_dap_launch(interp):
    with lldb_dap(interp) as client, \
            launched_and_paused(client, interp, "locals", initCommands=INIT_COMMANDS) as truth:
        check_stack(client, truth)


@pytest.mark.parametrize("stopped", [i for i in DAP_INTERPS if i.exe == editors_doc.PROGRAM], indirect=True,
                         ids=lambda i: i.id)
def test_editors_doc_lldb_dap(stopped):
    """docs/editors.md's lldb-dap configurations (VS Code's and nvim-dap's), as they are, on the
    doc's interpreter (Debian's python3.11)."""
    interp, made = stopped
    s = made["locals"]
    configs = editors_doc.vscode("vscode-lldb-dap")
    _, nvim_configs = editors_doc.nvim()
    attach = [configs["Python under lldb: attach"], configs["Python under lldb: core"]]
    attach += [c for c in nvim_configs if c["type"] == "lldb-dap"]
    assert len(attach) == 3
    for config in attach:
        with lldb_dap(interp) as client:
            client.initialize()
            client.start(config["request"], **editors_doc.dap_arguments(config, pid=s.sc.pid, core=s.core))
            check_stack(client, s.sc.truth)
    launch = editors_doc.dap_arguments(configs["Python under lldb: launch"])
    with lldb_dap(interp) as client, \
            launched_and_paused(client, interp, "locals", initCommands=launch["initCommands"]) as truth:
        check_stack(client, truth)


@pytest.mark.parametrize("interp", [i for i in harness.provisioned_interpreters()
                                    if i.minor in (14, 15) and not i.debug_dir], ids=lambda i: i.id)
def test_lldb_dap_jit_frames(interp):
    """A core of JIT code calling into C (sid's 3.14 and 3.15, PYTHON_JIT=1): lldb-dap's
    stackTrace names the JIT frame as `bt` does, with its pc, right above the Python frames,
    and goes on to `_start` (lldb 22 alone stops at 3.14's JIT frame)."""
    import jit_harness as jh

    with harness.Scenario(interp, "jit_call", env={"PYTHON_JIT": "1"}) as sc:
        anon = jh.anon_exec_ranges(sc.pid)
        with lldb_dap(interp) as client:
            client.initialize()
            client.start("attach", program=interp.exe, coreFile=sc.make_core(), initCommands=INIT_COMMANDS)
            frames = client.stack(client.request("threads")["threads"][0]["id"])
    names = [f["name"] for f in frames]
    want = "[jit] leaf (%s:%d)" % (sc.script, jh.def_line("jit_call.py", "leaf"))
    assert names.count(want) == 1 and not [n for n in names if n.startswith("[jit]") and n != want], names
    j = names.index(want)
    assert jh.in_ranges(anon, int(frames[j]["instructionPointerReference"], 16)), frames[j]
    main = expected(sc.truth["threads"][0]["frames"])
    assert python_frames(frames) == main, frames
    assert python_frames(frames[j + 1:j + 1 + len(main)]) == main, frames
    assert names[-1] == "_start", names

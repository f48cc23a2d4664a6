"""docs/editors.md's gdb configurations, run as the editors run them (editors_doc.py reads
them), on Debian's stripped python3.11, the doc's interpreter: VS Code's GDB DAP extension
(`gdb -i dap` with pyunwind from ~/.gdbinit, as `pyunwind install-gdb` writes it), cpptools
over gdb/MI (its setupCommands, then what it sends for a core and a process) and nvim-dap's gdb
adapter. The lldb-dap ones are run by test_lldb_dap.py."""

import os

import pytest

import editors_doc
import harness
from dap_client import DapClient
from test_dap import check_mi, check_stack, gdb18, launched_and_paused

INTERP = [i for i in harness.interpreters() if i.exe == editors_doc.PROGRAM][0]
TIMEOUT = 120
# What the tests give every gdb: no debuginfod, no -dbg package's debug info (a user without it).
QUIET = ["-iex", "set debuginfod enabled off", "-iex", "set debug-file-directory /nonexistent"]


@pytest.fixture(scope="module")
def sc():
    with harness.Scenario(INTERP, "locals") as s:
        s.make_core()
        yield s


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """A home directory whose ~/.gdbinit `pyunwind install-gdb` wrote."""
    path = tmp_path_factory.mktemp("home")
    rc, out, err = harness.run([harness.cli_path(), "install-gdb"], 30,
                               env=harness.child_env({"HOME": str(path)}))
    assert rc == 0 and (path / ".gdbinit").is_file(), out + err
    return path


def test_vscode_gdb_dap(sc, home):
    configs = editors_doc.vscode("vscode-gdb-dap")
    assert {c["type"] for c in configs.values()} == {"gdb-dap"}

    def adapter():
        # The extension runs `<gdb-dap.executable-path> -i dap`; gdb reads ~/.gdbinit.
        return DapClient([gdb18(), "-i", "dap"] + QUIET, env=harness.child_env({"HOME": str(home)}))

    truth = sc.truth
    for config in (configs["Python under gdb: attach"], configs["Python under gdb: core"]):
        with adapter() as client:
            client.initialize()
            client.start(config["request"], **editors_doc.dap_arguments(config, pid=sc.pid, core=sc.make_core()))
            check_stack(client, truth)
    launch = editors_doc.dap_arguments(configs["Python under gdb: launch"])
    with adapter() as client, launched_and_paused(client, INTERP, "locals") as launched:
        assert set(launch) == {"program", "args", "cwd"}
        check_stack(client, launched)


def test_vscode_cpptools(sc):
    configs = editors_doc.vscode("vscode-cpptools")
    assert {c["type"] for c in configs.values()} == {"cppdbg"}
    for config in configs.values():
        assert config["MIMode"] == "gdb"
        setup = [c["text"] for c in config["setupCommands"]]
        assert "-enable-frame-filters" in setup
        # What cpptools sends after its setupCommands: the program, then the core or the process.
        if "coreDumpPath" in config:
            target = ["-target-select core %s" % editors_doc.substitute(config["coreDumpPath"], core=sc.make_core())]
        else:
            target = ["-target-attach %d" % editors_doc.substitute(config["processId"], pid=sc.pid)]

        def run(lines):
            cmd = ["gdb", "-q", "-nx", "--interpreter=mi"] + QUIET
            script = setup + ["-file-exec-and-symbols %s" % config["program"]] + target + lines
            rc, out, err = harness.run(cmd, TIMEOUT, input="\n".join(script + ["-gdb-exit", ""]))
            assert rc == 0, err
            assert "^error" not in out, out[-3000:]
            return out

        check_mi(run, sc.truth["threads"][0]["frames"])


def test_nvim_dap_gdb(sc, tmp_path):
    adapters, configurations = editors_doc.nvim()
    gdb = adapters["gdb"]
    assert gdb["command"] == "gdb" and "--interpreter=dap" in gdb["args"]
    script = gdb["args"][gdb["args"].index("-x") + 1]
    assert os.path.isfile(script), script
    ran = 0
    for config in configurations:
        if config["type"] != "gdb":
            continue
        # The doc's `gdb` is a gdb 14+ on PATH: here gdb 18.
        # An empty home: no ~/.gdbinit of this machine's.
        with DapClient([gdb18()] + QUIET + gdb["args"], env=harness.child_env({"HOME": str(tmp_path)})) as client:
            client.initialize()
            client.start(config["request"], **editors_doc.dap_arguments(config, pid=sc.pid, core=sc.make_core()))
            check_stack(client, sc.truth)
        ran += 1
    assert ran == 2

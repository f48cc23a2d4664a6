"""The pip package: the wheel of `make wheel` (in a fresh venv on Debian's python3.11) gives the
`pyunwind` command (the same CLI as the binary, with complete help), `pyunwind gdb-script` /
`lldb-script` (scripts that load the installed module into the debugger's own Python, 3.11
here, whatever the venv's), and `install-gdb` / `uninstall-gdb` (idempotent, reversible).
`pip install <checkout>` gets the same checks in test_packaging_checkout.py; the venvs and the
checks are in packaging_venvs.py. The lldb side is in test_lldb_sources.py (run by
`make integration-lldb` with each lldb)."""

import re

import pytest

import harness
import packaging_venvs as pv
from packaging_venvs import shapes, venvs  # noqa: F401

# The x86-64 wheel `make integration` builds while the other files run (tools/wheel-x86_64.sh).
pytestmark = pytest.mark.after_wheels

SUBCOMMANDS = ["pid", "core", "gdb-script", "lldb-script", "install-gdb", "install-lldb",
               "uninstall-gdb", "uninstall-lldb", "merge"]


def test_wheel_is_abi3_manylinux():
    name = pv.wheel_path().name
    assert re.match(r"pyunwind-[0-9.]+-cp38-abi3-manylinux_2_\d+_x86_64\.whl$", name), name


def test_cli_help_is_complete():
    """`pyunwind --help` lists every subcommand with a description, and each subcommand's
    help describes every argument and option."""
    rc, out, err = harness.run([harness.cli_path(), "--help"], 30)
    assert rc == 0, err
    for sub in SUBCOMMANDS:
        assert re.search(r"^  %s\s+\S" % re.escape(sub), out, re.M), sub
        rc, sub_out, err = harness.run([harness.cli_path(), sub, "-h"], 30)
        assert rc == 0, err
        # Every line naming an option or argument has its description on the same line.
        for line in sub_out.splitlines():
            m = re.match(r"^\s+(-\w, )?(--[\w-]+|<[\w-]+>|-h)( <\w+>)?(.*)$", line)
            if m:
                assert m.group(4).strip(), "%s: undocumented %r" % (sub, line)


@pytest.mark.parametrize("name", [pv.WHEEL_VENV])
def test_installed_cli_is_the_same_cli(venvs, shapes, name):  # noqa: F811
    pv.check_installed_cli_is_the_same_cli(venvs[name], shapes)


@pytest.mark.parametrize("name", [pv.WHEEL_VENV])
def test_gdb_script_loads_the_installed_module(venvs, shapes, name):  # noqa: F811
    pv.check_gdb_script_loads_the_installed_module(venvs[name], shapes)


@pytest.mark.parametrize("name", [pv.WHEEL_VENV])
def test_install_gdb_is_idempotent_and_reversible(venvs, shapes, name, tmp_path):  # noqa: F811
    pv.check_install_gdb_is_idempotent_and_reversible(venvs[name], shapes, tmp_path)

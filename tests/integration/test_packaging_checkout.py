"""The pip package built from this checkout: `pip install <checkout>` (maturin, in a fresh venv
on pyenv's 3.12) passes the checks test_packaging.py runs on the wheel (packaging_venvs.py).
It runs after the background wheel job (tools/wheel-x86_64.sh), which compiles the crate for this
venv's interpreter in the target dir pip's build uses (packaging_venvs.checkout_python): pip's
build then compiles nothing. Also: the checkout's CLI, built with the `python` feature as the
module is (`make build`), references no libpython symbol."""

import pytest

import harness
import packaging_venvs as pv
from packaging_venvs import shapes, venvs  # noqa: F401

# After the wheel job, whose x86-64 build is the one pip's finds done (conftest.py).
pytestmark = pytest.mark.after_wheels


@pytest.mark.parametrize("name", [pv.CHECKOUT_VENV])
def test_installed_cli_is_the_same_cli(venvs, shapes, name):  # noqa: F811
    pv.check_installed_cli_is_the_same_cli(venvs[name], shapes)


@pytest.mark.parametrize("name", [pv.CHECKOUT_VENV])
def test_gdb_script_loads_the_installed_module(venvs, shapes, name):  # noqa: F811
    pv.check_gdb_script_loads_the_installed_module(venvs[name], shapes)


@pytest.mark.parametrize("name", [pv.CHECKOUT_VENV])
def test_install_gdb_is_idempotent_and_reversible(venvs, shapes, name, tmp_path):  # noqa: F811
    pv.check_install_gdb_is_idempotent_and_reversible(venvs[name], shapes, tmp_path)


def python_symbols(path):
    """The undefined dynamic symbols of `path` that libpython would provide."""
    rc, out, err = harness.run(["nm", "-D", "--undefined-only", str(path)], 60)
    assert rc == 0, err
    return [line.split()[-1] for line in out.splitlines()
            if line.split()[-1].startswith(("Py", "_Py"))]


def test_the_cli_binary_needs_no_libpython():
    """`make build` makes the CLI and the module in one build of the crate with the `python`
    feature: the binary must still run where no libpython is loaded. The module, which does
    use libpython's symbols, shows that the check can fail."""
    assert python_symbols(harness.cli_path()) == []
    rc, out, err = harness.run(["ldd", str(harness.cli_path())], 60)
    assert rc == 0 and "libpython" not in out, out + err
    assert python_symbols(harness.module_path()) != []

"""The pip package built from this checkout: `pip install <checkout>` (maturin, in a fresh venv
on pyenv's 3.12) passes the checks test_packaging.py runs on the wheel (packaging_venvs.py).
A file of its own: the build takes minutes on a fresh clone, and `make integration` runs files
on two workers."""

import pytest

import packaging_venvs as pv
from packaging_venvs import shapes, venvs  # noqa: F401

# Minutes on a fresh clone (the build): it runs first under pytest-xdist (conftest.py).
pytestmark = pytest.mark.long_file


@pytest.mark.parametrize("name", [pv.CHECKOUT_VENV])
def test_installed_cli_is_the_same_cli(venvs, shapes, name):  # noqa: F811
    pv.check_installed_cli_is_the_same_cli(venvs[name], shapes)


@pytest.mark.parametrize("name", [pv.CHECKOUT_VENV])
def test_gdb_script_loads_the_installed_module(venvs, shapes, name):  # noqa: F811
    pv.check_gdb_script_loads_the_installed_module(venvs[name], shapes)


@pytest.mark.parametrize("name", [pv.CHECKOUT_VENV])
def test_install_gdb_is_idempotent_and_reversible(venvs, shapes, name, tmp_path):  # noqa: F811
    pv.check_install_gdb_is_idempotent_and_reversible(venvs[name], shapes, tmp_path)

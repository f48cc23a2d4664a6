"""Byte-compiles the PyPI packages installed for other ABIs with their own interpreter.

tools/greenlet.sh, uvloop.sh, numpy.sh and pip-target.sh (FastAPI, asyncpg and aiohttp) install
wheels for each ABI the tests run them on into `$PYUNWIND_CACHE/<set>/.../cp3XY[t]` with the test
venv's pip, which byte-compiles them for its own 3.11 only. The tests write no bytecode
(PYTHONDONTWRITEBYTECODE), so every start of another interpreter compiled again what it
imported: `import fastapi, uvicorn` took 0.76 s on pyenv's 3.12 instead of 0.35, gevent's
monkey-patching 0.26 s instead of 0.15, `import numpy` 0.25 s instead of 0.09. Each folder is
compiled once, by the test interpreter of its ABI (`harness.interpreters()`; 3.13t shares
3.13's cache tag and magic number), and marked done (PYC_STAMP, which a reinstall of the folder
removes with it). gunicorn (one pure-Python folder for all) is compiled by each interpreter.

Run by `make integration` before the test files (`abi_pyc.py`); seconds once the folders are
marked."""

import subprocess
import sys

import harness

STAMP = "PYC_STAMP"


def interpreters_by_abi():
    """{"cp312": exe, "cp313t": exe, ...}: one test interpreter per ABI."""
    found = {}
    for interp in harness.interpreters() + harness.provisioned_interpreters():
        abi = "cp3%d%s" % (interp.minor, "t" if interp.id.startswith("ft-") else "")
        found.setdefault(abi, interp.exe)
    return found


def compile_dir(exe, folder):
    """`exe -m compileall` over folder, quietly; a failure names the folder and the output."""
    proc = subprocess.run([exe, "-m", "compileall", "-q", "-j", "0", str(folder)],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=harness.child_env(), timeout=600)
    if proc.returncode != 0:
        # A package may ship a file for another Python (a py2 compatibility module): the
        # compile of the others stands, and the imports that need that file compile it as now.
        print("abi_pyc: %s -m compileall %s: exit %d (kept what compiled):\n%s"
              % (exe, folder, proc.returncode, proc.stdout[-2000:]), file=sys.stderr)


def main():
    cache = harness.cache_dir()
    exes = interpreters_by_abi()
    every = sorted(set(exes.values()))
    done = 0
    # <set>/cp3XY[t] and <set>/<version>/cp3XY[t]: the folders tools/*.sh install per ABI.
    for folder in sorted(cache.glob("*/cp3*")) + sorted(cache.glob("*/*/cp3*")):
        exe = exes.get(folder.name)
        # An ABI no test interpreter has: nothing runs it.
        if exe is None or not folder.is_dir() or (folder / STAMP).exists():
            continue
        compile_dir(exe, folder)
        (folder / STAMP).write_text(exe + "\n")
        done += 1
    for folder in sorted(p for p in (cache / "gunicorn").glob("*") if p.is_dir()):
        if (folder / STAMP).exists():
            continue
        for exe in every:
            compile_dir(exe, folder)
        (folder / STAMP).write_text("\n".join(every) + "\n")
        done += 1
    print("abi_pyc: %d folders byte-compiled by their ABI's interpreter" % done, file=sys.stderr)


if __name__ == "__main__":
    main()

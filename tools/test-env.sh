#!/usr/bin/env bash
# Prepare what the integration tests need; safe to run again and again.
#
# - Debian packages: gdb (gdb, gcore), patchelf, binutils (strip), python3.11 (the stripped
#   distribution interpreter of the matrix); apt-get runs only when one is missing.
# - The pyenv interpreters of the matrix must already exist (exit 1 otherwise).
# - gcc and libpython3.11-dev (a C extension the --native tests build), strace (a tracer that
#   makes `pid --native` refuse),
# - compression tools (zstd, lz4, xz, gzip) for the compressed-core tests, python3.11-venv (the
#   pip-install tests make a venv on Debian's python3.11), util-linux (unshare).
# - A venv with pytest, pytest-xdist (the suite runs on two workers), jsonschema (every --json
#   output is validated against docs/report.schema.json), pystack (the reference `--native` is
#   compared with, tests/integration/test_native.py) and maturin (`make wheel`, the pip-install
#   tests) and protobuf (`record --format pprof` is parsed with pprof's own message definitions,
#   tests/integration/pprof_proto.py), made with pyenv's
#   3.11.7, at ${PYUNWIND_CACHE:-~/.cache/pyunwind}/venv. pip keeps its downloads in its own
#   cache (~/.cache/pip), so a new venv installs without downloading again.
# - uvloop wheels for each CPython the tests run (tools/uvloop.sh).
# - numpy 1.x and 2.x wheels for the array tests (tools/numpy.sh).
# - gunicorn (pure Python) from PyPI for the verdict tests on real servers (tools/gunicorn.sh).
# - asyncpg and aiohttp from PyPI (tools/aioservices.sh) and Debian's postgresql, for the
#   peer-process tests (tests/integration/test_why_peers.py).
# - Cython and cffi from PyPI for the native-wait tests (tools/calls.sh).
# - gdb 18 from PyPI for the DAP tests (tools/gdb18.sh), in $PYUNWIND_CACHE/gdb18.
# - Debian's debuginfod server, and the .debs it serves in the debuginfod tests (python3.11-dbg,
#   libc6-dbg and python3.11-minimal at the installed versions, unpacked by
#   tools/debuginfod-tree.sh into $PYUNWIND_CACHE/debuginfod).
#
# Everything is logged to stderr; the last (and only) line on stdout is the venv's python.
set -euo pipefail

PYENV_VERSIONS=(3.10.13 3.11.7 3.12.1 3.13.0)
VENV_VERSION=3.11.7
CACHE="${PYUNWIND_CACHE:-$HOME/.cache/pyunwind}"
VENV="$CACHE/venv"

log() { printf 'test-env: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# --- Debian packages ------------------------------------------------------------------------
missing=()
command -v gdb >/dev/null 2>&1 || missing+=(gdb)
command -v gcore >/dev/null 2>&1 || missing+=(gdb)
command -v patchelf >/dev/null 2>&1 || missing+=(patchelf)
command -v strip >/dev/null 2>&1 || missing+=(binutils)
[ -x /usr/bin/python3.11 ] || missing+=(python3.11)
command -v zstd >/dev/null 2>&1 || missing+=(zstd)
command -v lz4 >/dev/null 2>&1 || missing+=(lz4)
command -v xz >/dev/null 2>&1 || missing+=(xz-utils)
command -v gzip >/dev/null 2>&1 || missing+=(gzip)
command -v unshare >/dev/null 2>&1 || missing+=(util-linux)
# The C extension test_native.py builds (tests/scenarios/native_cext.c) for Debian's 3.11 too.
command -v gcc >/dev/null 2>&1 || missing+=(gcc)
[ -f /usr/include/python3.11/Python.h ] || missing+=(libpython3.11-dev)
# libffi's headers: cffi's backend for the free-threaded 3.13 is built from source (tools/calls.sh).
[ -f /usr/include/x86_64-linux-gnu/ffi.h ] || missing+=(libffi-dev)
# A second tracer, to check that `pid --native` refuses when it cannot ptrace.
command -v strace >/dev/null 2>&1 || missing+=(strace)
dpkg-query -W -f='${Status}' python3.11-venv 2>/dev/null | grep -q 'ok installed' || missing+=(python3.11-venv)
# The server of tests/integration/test_debuginfod.py.
command -v debuginfod >/dev/null 2>&1 || missing+=(debuginfod)
# The PostgreSQL server asyncpg talks to in tests/integration/test_why_peers.py (its initdb and
# pg_ctl, under /usr/lib/postgresql/VERSION/bin; the test runs it as a plain user).
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || missing+=(postgresql)
if [ "${#missing[@]}" -gt 0 ]; then
    mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
    bash "$(dirname "$0")/apt-install.sh" "${missing[@]}"
fi

# --- pyenv interpreters ---------------------------------------------------------------------
if command -v pyenv >/dev/null 2>&1; then
    PYENV_ROOT_DIR="$(pyenv root)"
else
    PYENV_ROOT_DIR="${PYENV_ROOT:-$HOME/.pyenv}"
fi
absent=()
for v in "${PYENV_VERSIONS[@]}"; do
    exe="$PYENV_ROOT_DIR/versions/$v/bin/python3"
    [ -x "$exe" ] || absent+=("$exe")
done
if [ "${#absent[@]}" -gt 0 ]; then
    die "missing pyenv interpreters (build them with: pyenv install <version>): ${absent[*]}"
fi

# --- venv with pytest -----------------------------------------------------------------------
base="$PYENV_ROOT_DIR/versions/$VENV_VERSION/bin/python3"
if ! "$VENV/bin/python" -c 'import sys' >/dev/null 2>&1; then
    log "creating $VENV with $base"
    rm -rf "$VENV"
    mkdir -p "$CACHE"
    "$base" -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c 'import pytest, jsonschema, xdist' >/dev/null 2>&1 || [ ! -x "$VENV/bin/maturin" ] \
        || [ ! -x "$VENV/bin/pystack" ]; then
    log "installing pytest, pytest-xdist, jsonschema, pystack and maturin into $VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check pytest pytest-xdist jsonschema pystack 'maturin>=1.5,<2' >&2
fi
if ! "$VENV/bin/python" -c 'import google.protobuf' >/dev/null 2>&1; then
    log "installing protobuf into $VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check 'protobuf>=4,<8' >&2
fi

# --- uvloop for the scenario interpreters (tests/integration/test_asyncio.py) -----------------
bash "$(dirname "$0")/uvloop.sh" "$VENV/bin/pip"

# --- greenlet and gevent for the scenario interpreters (tests/integration/test_greenlets.py) --
bash "$(dirname "$0")/greenlet.sh" "$VENV/bin/pip"

# --- numpy for the array tests (tests/integration/test_heap_arrays.py) ----------------------
bash "$(dirname "$0")/numpy.sh" "$VENV/bin/pip"

# --- gunicorn for the verdict tests on real servers (tests/integration/test_why_gunicorn.py) ---
bash "$(dirname "$0")/gunicorn.sh" "$VENV/bin/pip"

# --- FastAPI and uvicorn for the event-loop verdict (tests/integration/test_why_fastapi.py) -----
bash "$(dirname "$0")/asgi.sh" "$VENV/bin/pip"

# --- asyncpg and aiohttp for the task verdicts on real clients (tests/integration/test_why_peers.py)
bash "$(dirname "$0")/aioservices.sh" "$VENV/bin/pip"

# --- Cython and cffi for the native-wait tests (tests/integration/test_why_calls.py) ---------
bash "$(dirname "$0")/calls.sh" "$VENV/bin/pip"

# --- gdb 18 (its DAP server) for tests/integration/test_dap.py --------------------------------
bash "$(dirname "$0")/gdb18.sh" "$base" >/dev/null

# --- what debuginfod serves in tests/integration/test_debuginfod.py ---------------------------
bash "$(dirname "$0")/debuginfod-tree.sh" >/dev/null

echo "$VENV/bin/python"

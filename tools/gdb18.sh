#!/usr/bin/env bash
# gdb 18 with its DAP server (`gdb -i=dap`, gdb 14 and later; Debian bookworm has gdb 13), from
# PyPI's gdb-for-pwndbg, in a venv of its own at ${PYUNWIND_CACHE:-~/.cache/pyunwind}/gdb18 (the
# package's gdb embeds that venv's Python). Safe to run again and again: quick when installed.
#
# Usage: tools/gdb18.sh BASE_PYTHON. Logs go to stderr; the last (and only) line on stdout is
# the gdb to run.
set -euo pipefail

BASE="${1:?usage: tools/gdb18.sh BASE_PYTHON}"
PIN="gdb-for-pwndbg==18.1.0.post1"
CACHE="${PYUNWIND_CACHE:-$HOME/.cache/pyunwind}"
DIR="$CACHE/gdb18"
GDB="$DIR/bin/gdb"

log() { printf 'gdb18: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

works() { "$GDB" -nx -batch -ex 'python print("gdb18-python-ok")' 2>/dev/null | grep -q gdb18-python-ok; }

if ! works; then
    log "installing $PIN into $DIR"
    rm -rf "$DIR"
    mkdir -p "$CACHE"
    "$BASE" -m venv "$DIR"
    "$DIR/bin/python" -m pip install --quiet --disable-pip-version-check "$PIN" >&2
    works || die "$GDB does not run Python"
fi
"$GDB" --version | head -n 1 | grep -q ' 18\.' || die "$GDB is not gdb 18"
echo "$GDB"

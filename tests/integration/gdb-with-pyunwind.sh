#!/bin/bash
# `gdb` as CPython's test_gdb starts it, with libpython.py kept out (no auto-loaded
# python-scripts) and pyunwind's script sourced first.
# A suite starts gdb 100 to 130 times, each on the same libpython: gdb's index
# cache keeps the index of its DWARF, which gdb otherwise builds at every start (about a third
# of the suites' CPU time).
index_cache="${PYUNWIND_CACHE:-$HOME/.cache/pyunwind}/gdb-index-cache"
mkdir -p "$index_cache"
exec "${PYUNWIND_REAL_GDB:-/usr/bin/gdb}" \
  -iex "set index-cache directory $index_cache" -iex "set index-cache enabled on" \
  -iex "set auto-load python-scripts off" \
  -iex "source $(dirname "$(dirname "$(dirname "$(realpath "$0")")")")/gdb-scripts/pyunwind-gdb.py" \
  "$@"

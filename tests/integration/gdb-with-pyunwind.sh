#!/bin/bash
# `gdb` as CPython's test_gdb starts it, with libpython.py kept out (no auto-loaded
# python-scripts) and pyunwind's script sourced first.
exec "${PYUNWIND_REAL_GDB:-/usr/bin/gdb}" \
  -iex "set auto-load python-scripts off" \
  -iex "source $(dirname "$(dirname "$(dirname "$(realpath "$0")")")")/gdb-scripts/pyunwind-gdb.py" \
  "$@"

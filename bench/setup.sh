#!/usr/bin/env bash
# Prepare what `make bench` needs: gdb, Debian's python3.11 debug info (for libpython's
# py-bt) and a venv with pystack and py-spy (the peers). Idempotent; does nothing slow when
# already done.
#
# The debug info is python3.11-dbg (and libc6-dbg) unpacked into $PYUNWIND_CACHE by
# tools/debuginfod-tree.sh, not installed: installed, it puts python3.11-gdb.py where every
# gdb of the machine auto-loads it, and its debug files where every gdb finds them, which
# changes what the tests' gdb runs show. bench/run.py points gdb at the tree
# (`set debug-file-directory`, `source .../python3.11-gdb.py`): gdb reads the same files.
set -euo pipefail

cache="${PYUNWIND_CACHE:-$HOME/.cache/pyunwind}"
venv="$cache/bench-venv"

need_apt=()
command -v gdb >/dev/null 2>&1 || need_apt+=(gdb)
[ -x /usr/bin/python3.11 ] || need_apt+=(python3.11)
if [ "${#need_apt[@]}" -gt 0 ]; then
    echo "setup: apt-get install ${need_apt[*]}" >&2
    bash "$(dirname "$0")/../tools/apt-install.sh" "${need_apt[@]}"
fi

tree=$(bash "$(dirname "$0")/../tools/debuginfod-tree.sh" | tail -n 1)
# The debug info must belong to the installed interpreter (same build id).
build_id=$(readelf -n /usr/bin/python3.11 | awk '/Build ID/ {print $3}')
debug_file="$tree/usr/lib/debug/.build-id/${build_id:0:2}/${build_id:2}.debug"
if [ ! -f "$debug_file" ]; then
    echo "setup: no debug info for /usr/bin/python3.11 (build id $build_id) at $debug_file" >&2
    exit 1
fi
if [ ! -f "$tree/usr/share/gdb/auto-load/usr/bin/python3.11-gdb.py" ]; then
    echo "setup: no python3.11-gdb.py in $tree" >&2
    exit 1
fi

if [ ! -x "$venv/bin/pystack" ] || [ ! -x "$venv/bin/py-spy" ]; then
    pyenv_python="$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")/versions/3.11.7/bin/python3"
    [ -x "$pyenv_python" ] || pyenv_python=/usr/bin/python3.11
    echo "setup: creating $venv with pystack and py-spy" >&2
    mkdir -p "$cache"
    [ -x "$venv/bin/pip" ] || "$pyenv_python" -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check pystack py-spy
fi
"$venv/bin/pystack" --help >/dev/null
"$venv/bin/py-spy" --version >/dev/null

echo "setup: ok (gdb $(gdb --version | head -1 | awk '{print $NF}'), $("$venv/bin/pystack" --version 2>/dev/null || echo pystack), debug info $debug_file)" >&2

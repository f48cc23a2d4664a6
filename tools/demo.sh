#!/usr/bin/env bash
# make demo: run examples/demo.py, attach gdb with pyunwind, show py-bt and the filtered bt.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${1:-/usr/bin/python3.11}
"$py" examples/demo.py &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
sleep 1
echo "=== gdb -p $pid, with pyunwind ($py, $(file -bL "$py" | grep -o 'stripped\|not stripped'))"
gdb -q -batch -nx -iex 'set auto-load off' -iex 'set debug-file-directory /nonexistent' \
    -x gdb-scripts/pyunwind-gdb.py -p "$pid" \
    -ex 'echo \n(gdb) py-bt\n' -ex 'py-bt' \
    -ex 'echo \n(gdb) bt\n' -ex 'bt' \
    -ex 'echo \n(gdb) py-bt -a\n' -ex 'py-bt -a' 2>&1 | grep -v '^\[New LWP\|^\[Thread debugging\|^Using host libthread_db'
echo
echo "=== pyunwind pid $pid"
target/release/pyunwind pid "$pid"
echo
echo "=== pyunwind pid $pid --why (the verdict first)"
target/release/pyunwind pid "$pid" --why

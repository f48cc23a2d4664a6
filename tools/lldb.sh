#!/usr/bin/env bash
# The lldb versions `make integration-lldb` tests (LLDB_VERSIONS, which the Makefile exports),
# installed ahead of it: `make test` runs this in the background while the crate builds
# (tools/prefetch.sh), so that apt's downloads and unpacking are not in the serial lldb phase at
# the end. Each is installed in turn (their Python packages conflict) and the first left
# installed; apt keeps the others' .debs, so tools/lldb-env.sh's later switch is a dpkg run.
# Safe to run again: a version already installed is checked in a second.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
read -r -a versions <<<"${LLDB_VERSIONS:-19 22}"
[ "${#versions[@]}" -gt 0 ] || { echo "lldb: LLDB_VERSIONS is empty" >&2; exit 2; }
for v in "${versions[@]:1}" "${versions[0]}"; do
    bash "$HERE/lldb-env.sh" "$v"
done

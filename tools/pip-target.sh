#!/usr/bin/env bash
# Pinned PyPI packages for the CPython ABIs the tests run real services on, one folder per ABI:
# $PYUNWIND_CACHE/NAME/<abi>/site-packages, put on sys.path by the scenario. The folder is named
# as pip's own are, so that the verdict's rule for library code (docs/report.md) sees these
# packages as it sees a user's. Binary wheels only, no dependency resolution: the caller pins
# every package, dependencies included, so that a new release cannot change the frames a test
# expects. Safe to run again and again: a folder whose STAMP names exactly what it should hold
# is kept. Used by tools/asgi.sh and tools/aioservices.sh.
#
# usage: tools/pip-target.sh NAME PIP "REQUIREMENTS"
#   PIP: a pip that can download for other Pythons (the test venv's)
set -euo pipefail

NAME="${1:?usage: tools/pip-target.sh NAME PIP REQUIREMENTS}"
PIP="${2:?usage: tools/pip-target.sh NAME PIP REQUIREMENTS}"
WANT="${3:?usage: tools/pip-target.sh NAME PIP REQUIREMENTS}"
ABIS=(311 312 313)
CACHE="${PYUNWIND_CACHE:-$HOME/.cache/pyunwind}"
log() { printf '%s: %s\n' "$NAME" "$*" >&2; }

for abi in "${ABIS[@]}"; do
    dest="$CACHE/$NAME/cp$abi"
    [ -f "$dest/STAMP" ] && [ "$(cat "$dest/STAMP")" = "site-packages $WANT" ] && continue
    log "installing for cp$abi into $dest/site-packages: $WANT"
    rm -rf "$dest" "$dest.tmp"
    mkdir -p "$dest.tmp"
    # shellcheck disable=SC2086  # WANT is a list of requirements
    "$PIP" install --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
        --target "$dest.tmp/site-packages" --python-version "3.${abi#3}" --implementation cp \
        --abi "cp$abi" --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \
        --platform manylinux_2_17_x86_64 $WANT >&2
    echo "site-packages $WANT" > "$dest.tmp/STAMP"
    mv "$dest.tmp" "$dest"
done

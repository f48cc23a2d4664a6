#!/usr/bin/env bash
# uvloop from PyPI for every CPython ABI it ships wheels for that the tests run (cp311 to cp315;
# none for the free-threaded cp313t), each in its own folder the scenarios put on sys.path:
# $PYUNWIND_CACHE/uvloop/<abi>. Safe to run again and again: a folder with a STAMP is kept.
#
# usage: tools/uvloop.sh PIP   (a pip that can download for other Pythons: the test venv's)
set -euo pipefail

PIP="${1:?usage: tools/uvloop.sh PIP}"
VERSION=0.23.0
ABIS=(311 312 313 314 315)
CACHE="${PYUNWIND_CACHE:-$HOME/.cache/pyunwind}"
log() { printf 'uvloop: %s\n' "$*" >&2; }

for abi in "${ABIS[@]}"; do
    dest="$CACHE/uvloop/cp$abi"
    [ -f "$dest/STAMP" ] && [ "$(cat "$dest/STAMP")" = "$VERSION" ] && continue
    log "installing uvloop $VERSION for cp$abi into $dest"
    rm -rf "$dest" "$dest.tmp"
    mkdir -p "$dest.tmp"
    "$PIP" install --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
        --target "$dest.tmp" --python-version "3.${abi#3}" --implementation cp --abi "cp$abi" \
        --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 "uvloop==$VERSION" >&2
    echo "$VERSION" > "$dest.tmp/STAMP"
    mv "$dest.tmp" "$dest"
done

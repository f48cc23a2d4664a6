#!/usr/bin/env bash
# asyncpg and aiohttp from PyPI, for the task verdicts on real asyncio clients and servers
# (tests/integration/test_why_peers.py), one folder per CPython ABI the tests run them on (both
# are compiled), each put on sys.path by the scenario: $PYUNWIND_CACHE/aioservices/<abi>. Every
# package is pinned, dependencies included, so a new release cannot change the frames the tests
# expect. Safe to run again and again: a folder whose STAMP names exactly what it should hold is
# kept. The PostgreSQL server asyncpg talks to is Debian's (tools/test-env.sh installs it).
#
# usage: tools/aioservices.sh PIP   (a pip that can download for other Pythons: the test venv's)
set -euo pipefail

PIP="${1:?usage: tools/aioservices.sh PIP}"
WANT="asyncpg==0.32.0 aiohttp==3.14.5 aiohappyeyeballs==2.7.1 aiosignal==1.4.0 attrs==26.1.0 \
frozenlist==1.8.0 multidict==7.2.1 propcache==0.5.4 typing-extensions==4.16.0 yarl==1.25.1 \
idna==3.20"
ABIS=(311 312 313)
CACHE="${PYUNWIND_CACHE:-$HOME/.cache/pyunwind}"
log() { printf 'aioservices: %s\n' "$*" >&2; }

for abi in "${ABIS[@]}"; do
    dest="$CACHE/aioservices/cp$abi"
    [ -f "$dest/STAMP" ] && [ "$(cat "$dest/STAMP")" = "$WANT" ] && continue
    log "installing asyncpg and aiohttp for cp$abi into $dest"
    rm -rf "$dest" "$dest.tmp"
    mkdir -p "$dest.tmp"
    # shellcheck disable=SC2086  # WANT is a list of requirements
    "$PIP" install --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
        --target "$dest.tmp" --python-version "3.${abi#3}" --implementation cp --abi "cp$abi" \
        --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \
        --platform manylinux_2_17_x86_64 $WANT >&2
    echo "$WANT" > "$dest.tmp/STAMP"
    mv "$dest.tmp" "$dest"
done

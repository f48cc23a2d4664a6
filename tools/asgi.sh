#!/usr/bin/env bash
# FastAPI under uvicorn from PyPI, for the event-loop verdict on a real ASGI service
# (tests/integration/test_why_fastapi.py), one folder per CPython ABI the tests run it on
# (pydantic-core is compiled), each put on sys.path by the scenario:
# $PYUNWIND_CACHE/fastapi/<abi>/site-packages, a folder named as pip's own are, so that the
# verdict's rule for library code (docs/report.md) sees them as it sees a user's.
# Every package is pinned, dependencies included, so a new release cannot change the frames the
# test expects. Safe to run again and again: a folder whose STAMP names exactly what it should
# hold is kept.
#
# usage: tools/asgi.sh PIP   (a pip that can download for other Pythons: the test venv's)
set -euo pipefail

PIP="${1:?usage: tools/asgi.sh PIP}"
WANT="fastapi==0.165.0 uvicorn==0.54.0 starlette==1.10.0 pydantic==2.14.4 pydantic-core==2.50.5 \
anyio==4.16.0 h11==0.16.0 click==8.5.1 idna==3.20 typing-extensions==4.16.0 \
typing-inspection==0.4.5 annotated-types==0.8.0 annotated-doc==0.0.7 opentelemetry-api==1.45.2"
ABIS=(311 312 313)
CACHE="${PYUNWIND_CACHE:-$HOME/.cache/pyunwind}"
log() { printf 'asgi: %s\n' "$*" >&2; }

for abi in "${ABIS[@]}"; do
    dest="$CACHE/fastapi/cp$abi"
    [ -f "$dest/STAMP" ] && [ "$(cat "$dest/STAMP")" = "site-packages $WANT" ] && continue
    log "installing FastAPI and uvicorn for cp$abi into $dest"
    rm -rf "$dest" "$dest.tmp"
    mkdir -p "$dest.tmp"
    # shellcheck disable=SC2086  # WANT is a list of requirements
    "$PIP" install --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
        --target "$dest.tmp/site-packages" --python-version "3.${abi#3}" --implementation cp --abi "cp$abi" \
        --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \
        --platform manylinux_2_17_x86_64 $WANT >&2
    echo "site-packages $WANT" > "$dest.tmp/STAMP"
    mv "$dest.tmp" "$dest"
done

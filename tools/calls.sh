#!/usr/bin/env bash
# Cython and cffi for the native-wait tests (tests/integration/test_why_calls.py), pinned, in
# $PYUNWIND_CACHE/calls. Safe to run again and again: a folder whose STAMP names exactly what
# it should hold is kept.
#
#   cython/        Cython 3.3.1, its pure-Python wheel: the compiler, which the test runs with
#                  the test venv's Python to turn tests/scenarios/why_calls_cy.pyx into C (built
#                  then with gcc against each interpreter's headers).
#   cffi/<abi>/    cffi 2.1.1 and pycparser 3.11 (what cffi's `cdef` parses with), put on
#                  sys.path by the scenario: PyPI's wheels for cp310 to cp315. cffi has no
#                  free-threaded 3.13 wheel, so for cp313t its `_cffi_backend` is built here
#                  with gcc from cffi's sdist against the free-threaded 3.13's own headers
#                  (`make pythons`) and Debian's libffi (libffi-dev), with the same macros its
#                  setup.py defines on Linux, and cffi's Python package beside it.
#
# usage: tools/calls.sh PIP   (a pip that can download for other Pythons: the test venv's)
set -euo pipefail

PIP="${1:?usage: tools/calls.sh PIP}"
CACHE="${PYUNWIND_CACHE:-$HOME/.cache/pyunwind}"
DEST="$CACHE/calls"
CYTHON=cython==3.3.1
CFFI=cffi==2.1.1
PYCPARSER=pycparser==3.11
log() { printf 'calls: %s\n' "$*" >&2; }

# One run at a time: `make integration` runs tools/test-env.sh (and so this) while the
# background wheel jobs do too (tools/wheel-x86_64.sh, tools/wheel-aarch64.sh); two runs that
# both find cffi's backend for 3.13t missing (3.13t is built after the first test-env run) built
# it in one folder. The second waits, then finds it made. Nothing started here outlives the
# script (pip, tar, gcc), so the lock ends with it.
mkdir -p "$DEST"
exec 9>"$DEST/.lock"
flock 9

# fresh DIR WANT: true when DIR's STAMP is WANT; else DIR.tmp made empty for a new build.
fresh() {
    [ -f "$1/STAMP" ] && [ "$(cat "$1/STAMP")" = "$2" ] && return 0
    rm -rf "$1" "$1.tmp"
    mkdir -p "$1.tmp"
    return 1
}

# finish DIR WANT: DIR.tmp stamped and moved to DIR.
finish() {
    echo "$2" > "$1.tmp/STAMP"
    mv "$1.tmp" "$1"
}

pip_target() {
    "$PIP" install --quiet --disable-pip-version-check --no-deps --only-binary=:all: "$@" >&2
}

dir="$DEST/cython"
if ! fresh "$dir" "$CYTHON"; then
    log "installing $CYTHON into $dir"
    pip_target --target "$dir.tmp" --python-version 3.11 --implementation py --abi none \
        --platform any "$CYTHON"
    finish "$dir" "$CYTHON"
fi

for minor in 10 11 12 13 14 15; do
    dir="$DEST/cffi/cp3$minor"
    fresh "$dir" "$CFFI $PYCPARSER" && continue
    log "installing $CFFI and $PYCPARSER for cp3$minor into $dir"
    pip_target --target "$dir.tmp" --python-version "3.$minor" --implementation cp \
        --abi "cp3$minor" --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \
        --platform manylinux_2_17_x86_64 --platform any "$CFFI" "$PYCPARSER"
    finish "$dir" "$CFFI $PYCPARSER"
done

ft="$CACHE/pythons/3.13t"
dir="$DEST/cffi/cp313t"
if [ ! -x "$ft/bin/python3.13t" ]; then
    log "no free-threaded 3.13 in $ft (run \`make pythons\`): cffi for cp313t not built"
elif ! fresh "$dir" "$CFFI $PYCPARSER (built)"; then
    log "building $CFFI for cp313t into $dir"
    src="$dir.tmp/src"
    mkdir -p "$src"
    "$PIP" download --quiet --disable-pip-version-check --no-deps --no-binary=:all: \
        -d "$src" "$CFFI" >&2
    tar -xzf "$src"/cffi-*.tar.gz -C "$src"
    tree=("$src"/cffi-*/)
    config() { "$ft/bin/python3.13t" -c "import sysconfig; print(sysconfig.$1)"; }
    suffix="$(config "get_config_var('EXT_SUFFIX')")"
    include="$(config "get_paths()['include']")"
    gcc -shared -fPIC -O2 -DFFI_BUILDING=1 -DUSE__THREAD -DHAVE_SYNC_SYNCHRONIZE \
        -I "$include" "${tree[0]}src/c/_cffi_backend.c" -lffi \
        -o "$dir.tmp/_cffi_backend$suffix" >&2
    cp -r "${tree[0]}src/cffi" "$dir.tmp/cffi"
    pip_target --target "$dir.tmp" --python-version 3.13 --implementation py --abi none \
        --platform any "$PYCPARSER"
    rm -rf "$src"
    finish "$dir" "$CFFI $PYCPARSER (built)"
fi

#!/usr/bin/env bash
# numpy from PyPI for the array tests (tests/integration/test_heap_arrays.py), each set in its
# own folder the scenario puts on sys.path ($PYUNWIND_NUMPY): $PYUNWIND_CACHE/numpy/<set>/<abi>.
# Safe to run again and again: a folder whose STAMP names exactly what it should hold is kept.
#
# Sets (the scalars' text changes with the minor version too: src/cpython/numpy_scalars.rs):
#   np1/cp310   numpy 1.26.4: the last 1.x (PyArray_Descr's int `elsize` at 32).
#   np2/cp310   numpy 2.2.6: the last for 3.10; floats positional up to 1e16, a NaT without
#               its unit.
#   np2/cp311   numpy 2.3.5: the last for 3.11; float16/float32 positional up to 1e3/1e6.
#   np2/cp312   numpy 2.5.5 (PyArray_Descr's npy_intp `elsize` at 40).
#   np2/cp313   numpy 2.5.5.
#   np2/cp314   numpy 2.5.5.
#   np2/cp315   numpy 2.5.5.
#   np2/cp313t  numpy 2.4.6: the newest with a free-threaded 3.13 wheel (2.5 ships none); a
#               NaT with its unit.
#
# numpy has no runtime dependencies: --no-deps installs all of it. --ignore-requires-python: the
# pip runs on 3.11, and its check of numpy 2.5's `>=3.12` reads the running Python, not
# --python-version (the ABI tags already pick the wheel).
#
# usage: tools/numpy.sh PIP   (a pip that can download for other Pythons: the test venv's)
set -euo pipefail

PIP="${1:?usage: tools/numpy.sh PIP}"
CACHE="${PYUNWIND_CACHE:-$HOME/.cache/pyunwind}"
log() { printf 'numpy: %s\n' "$*" >&2; }

# install SET ABI PYTHON_VERSION PACKAGE==VERSION
install() {
    local set="$1" abi="$2" pyver="$3"
    shift 3
    local dest="$CACHE/numpy/$set/$abi" want="$*"
    [ -f "$dest/STAMP" ] && [ "$(cat "$dest/STAMP")" = "$want" ] && return 0
    log "installing $want for $abi into $dest"
    rm -rf "$dest" "$dest.tmp"
    mkdir -p "$dest.tmp"
    "$PIP" install --quiet --disable-pip-version-check --no-deps --only-binary=:all: --ignore-requires-python \
        --target "$dest.tmp" --python-version "$pyver" --implementation cp --abi "$abi" \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 "$@" >&2
    echo "$want" > "$dest.tmp/STAMP"
    mv "$dest.tmp" "$dest"
}

install np1 cp310 3.10 numpy==1.26.4
install np2 cp310 3.10 numpy==2.2.6
install np2 cp311 3.11 numpy==2.3.5
install np2 cp312 3.12 numpy==2.5.5
install np2 cp313 3.13 numpy==2.5.5
install np2 cp314 3.14 numpy==2.5.5
install np2 cp315 3.15 numpy==2.5.5
install np2 cp313t 3.13 numpy==2.4.6

#!/usr/bin/env bash
# greenlet (and gevent) from PyPI for the greenlet tests (tests/integration/test_greenlets.py),
# each set in its own folder the scenarios put on sys.path ($PYUNWIND_GREENLET):
# $PYUNWIND_CACHE/greenlet/<set>/<abi>. Safe to run again and again: a folder whose STAMP names
# exactly what it should hold is kept.
#
# Sets:
#   latest/cp310..cp315  greenlet 3.5.6, gevent 26.9.0 and gevent's runtime dependencies
#                        (zope.event, zope.interface; greenlet is the third, cffi only on
#                        Windows). zope.interface 8.7 has no cp310 wheel and 8.6 none for cp315:
#                        each ABI gets the one it has.
#   latest/cp313t        greenlet 3.2.2 alone: the newest greenlet with a free-threaded 3.13
#                        wheel (3.3+ ship cp314t only), and gevent ships no free-threaded wheel.
#   g303/cp312           greenlet 3.0.3: the first with exposed frames on 3.12, no `_self`.
#   g310/cp312           greenlet 3.1.0: the last without `_self` in its Greenlet object.
#
# Everything is installed with --no-deps, dependencies listed explicitly: pip resolves a
# dependency for the running Python, not for --python-version's.
#
# usage: tools/greenlet.sh PIP   (a pip that can download for other Pythons: the test venv's)
set -euo pipefail

PIP="${1:?usage: tools/greenlet.sh PIP}"
CACHE="${PYUNWIND_CACHE:-$HOME/.cache/pyunwind}"
log() { printf 'greenlet: %s\n' "$*" >&2; }

# install SET ABI PYTHON_VERSION PACKAGE==VERSION...
install() {
    local set="$1" abi="$2" pyver="$3"
    shift 3
    local dest="$CACHE/greenlet/$set/$abi" want="$*"
    [ -f "$dest/STAMP" ] && [ "$(cat "$dest/STAMP")" = "$want" ] && return 0
    log "installing $want for $abi into $dest"
    rm -rf "$dest" "$dest.tmp"
    mkdir -p "$dest.tmp"
    "$PIP" install --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
        --target "$dest.tmp" --python-version "$pyver" --implementation cp --abi "$abi" \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 \
        --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform any \
        "$@" >&2
    echo "$want" > "$dest.tmp/STAMP"
    mv "$dest.tmp" "$dest"
}

for minor in 10 11 12 13 14 15; do
    zope_interface=8.7
    [ "$minor" = 10 ] && zope_interface=8.6
    install latest "cp3$minor" "3.$minor" greenlet==3.5.6 gevent==26.9.0 zope.event==6.2 \
        "zope.interface==$zope_interface"
done
install latest cp313t 3.13 greenlet==3.2.2
install g303 cp312 3.12 greenlet==3.0.3
install g310 cp312 3.12 greenlet==3.1.0

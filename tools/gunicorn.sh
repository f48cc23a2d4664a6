#!/usr/bin/env bash
# gunicorn from PyPI for the verdict tests on real servers (tests/integration/test_why_gunicorn.py),
# in one folder the scenario puts on sys.path ($PYUNWIND_GUNICORN): gunicorn is pure Python
# (a py3-none-any wheel, Requires-Python >= 3.10), so one folder serves every interpreter of the
# matrix. Its gevent worker also needs `packaging` (gunicorn's `gevent` extra); gevent itself
# comes from tools/greenlet.sh's `latest` sets, which the scenario puts on sys.path too.
# Safe to run again and again: a folder whose STAMP names exactly what it should hold is kept.
#
# usage: tools/gunicorn.sh PIP   (the test venv's pip)
set -euo pipefail

PIP="${1:?usage: tools/gunicorn.sh PIP}"
CACHE="${PYUNWIND_CACHE:-$HOME/.cache/pyunwind}"
WANT="gunicorn==27.0.1 packaging==26.4"
DEST="$CACHE/gunicorn/27.0.1"

[ -f "$DEST/STAMP" ] && [ "$(cat "$DEST/STAMP")" = "$WANT" ] && exit 0
printf 'gunicorn: installing %s into %s\n' "$WANT" "$DEST" >&2
rm -rf "$DEST" "$DEST.tmp"
mkdir -p "$DEST.tmp"
# shellcheck disable=SC2086  # WANT is a list of requirements
"$PIP" install --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --target "$DEST.tmp" $WANT >&2
echo "$WANT" > "$DEST.tmp/STAMP"
mv "$DEST.tmp" "$DEST"

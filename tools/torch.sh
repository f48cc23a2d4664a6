#!/usr/bin/env bash
# PyTorch from PyPI for the torch.distributed test (tests/integration/test_why_torch.py): a venv
# of pyenv's 3.12.1 at ${PYUNWIND_CACHE:-~/.cache/pyunwind}/torch/venv-3.12.1 with torch 2.15.0,
# the CUDA build PyPI serves (`import torch` loads its nvidia-* wheels; no GPU is needed, and
# the gloo backend runs torch.distributed on the CPU). About 100 s and 5.3 GB the first time
# (measured: 112 s; again with a new cache folder, 92 s: pip's cache, ~/.cache/pip, kept none
# of the wheels here, so the venv and its STAMP are what make the next run instant).
#
# A venv of the matrix's pyenv 3.12.1, rather than a --target folder or the test venv: pip
# resolves torch's dependencies for the Python that runs them, `torchrun` is a real console
# script, the pyenv interpreter stays as the rest of the matrix uses it, and the test venv
# (3.11, which tools/test-env.sh may remake) stays small. The venv's python is pyenv's
# python3.12 (a link), so it maps pyenv's libpython3.12.so.
#
# Safe to run again and again: a venv whose STAMP names exactly what it should hold is kept
# (its PACKAGES file lists every distribution pip installed, with versions). The test module
# runs it from its module fixture, so only a run that includes that test pays for it.
#
# Usage: tools/torch.sh. Logs go to stderr; the last (and only) line on stdout is the venv's
# python.
set -euo pipefail

PYTHON_VERSION=3.12.1
PIN="torch==2.15.0"
CACHE="${PYUNWIND_CACHE:-$HOME/.cache/pyunwind}"
DIR="$CACHE/torch/venv-$PYTHON_VERSION"
WANT="$PIN on pyenv $PYTHON_VERSION"

log() { printf 'torch: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

if command -v pyenv >/dev/null 2>&1; then
    PYENV_ROOT_DIR="$(pyenv root)"
else
    PYENV_ROOT_DIR="${PYENV_ROOT:-$HOME/.pyenv}"
fi
BASE="$PYENV_ROOT_DIR/versions/$PYTHON_VERSION/bin/python3"
[ -x "$BASE" ] || die "missing $BASE (pyenv install $PYTHON_VERSION)"

if [ -f "$DIR/STAMP" ] && [ "$(cat "$DIR/STAMP")" = "$WANT" ]; then
    echo "$DIR/bin/python"
    exit 0
fi

# A venv remembers its own path: build it in place, with the STAMP written last, so that an
# interrupted install is redone from scratch on the next run.
started=$SECONDS
log "installing $WANT into $DIR (about 100 s and 5 GB the first time)"
rm -rf "$DIR"
mkdir -p "$(dirname "$DIR")"
"$BASE" -m venv "$DIR"
"$DIR/bin/python" -m pip install --quiet --disable-pip-version-check --only-binary=:all: \
    "$PIN" >&2 || die "pip install $PIN failed"
"$DIR/bin/python" -m pip list --format=freeze --disable-pip-version-check > "$DIR/PACKAGES"
# -W: torch warns at import that NumPy (which it does not need) is missing.
CHECK='import torch, torch.distributed as d
assert d.is_gloo_available(), "no gloo backend"
print(torch.__version__)'
version=$("$DIR/bin/python" -W ignore::UserWarning -c "$CHECK") || die "import torch failed in $DIR"
[ "${version%%+*}" = "${PIN#torch==}" ] || die "$DIR has torch $version, not ${PIN#torch==}"
[ -x "$DIR/bin/torchrun" ] || die "no torchrun in $DIR/bin"
echo "$WANT" > "$DIR/STAMP"
log "installed torch $version in $((SECONDS - started)) s ($(du -sh "$DIR" | cut -f1))"
echo "$DIR/bin/python"

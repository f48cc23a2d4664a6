#!/usr/bin/env bash
# The x86-64 pip package (`make wheel-x86_64`), which only some integration tests need. On a
# fresh machine it is minutes of compiling (a release build of pyo3 and the crate in a target dir
# of its own), which `make integration` does not wait for: it starts this script in the
# background (tools/prefetch.sh start wheel-x86_64) and runs the test files that do not need it
# meanwhile; those that do (marked `after_wheels`, run last) wait for it
# (harness.wait_for_wheels), and the lldb tests run after it ended. Where the caches hold these
# sources' build, seconds.
#
# The wheel is built for the interpreter test_packaging_checkout.py's `pip install <checkout>`
# builds with (its venv's python, made here when missing), in the target dir that build uses:
# pip's build of the same sources then compiles nothing (`make wheel`'s WHEEL_PYTHON).
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
py=$(bash "$REPO/tools/test-env.sh" | tail -n 1)
builder=$("$py" "$REPO/tests/integration/packaging_venvs.py" checkout-python)
# Started from a make recipe: its MAKEFLAGS (a jobserver's descriptors) are not ours.
exec env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$REPO" --no-print-directory wheel-x86_64 \
    WHEEL_PYTHON="$builder"

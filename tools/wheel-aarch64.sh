#!/usr/bin/env bash
# The aarch64 pip package (`make wheel-aarch64`, tools/cross-aarch64.sh), which only the tests
# marked `aarch64_wheel` need: on a fresh machine a release build of the crate and its
# dependencies for aarch64 (about 220 CPU-seconds). `make test` starts it first thing, at the
# lowest priority (tools/prefetch.sh start-idle): it builds on the CPU the other steps leave
# (the lldb tests use about four fifths of it), not on the integration tests' share, and
# `make integration` runs its tests last. Where the caches hold these sources' build, seconds.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
# Under `make test` the test-env job, started beside this one, makes the venv whose maturin
# builds the wheel: test-env.sh is not made to run twice at once. (Its failure is `make test`'s
# to report; make's own call of it then says what is missing.)
bash "$REPO/tools/prefetch.sh" wait test-env || true
# Started from a make recipe: its MAKEFLAGS (a jobserver's descriptors) are not ours.
exec env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$REPO" --no-print-directory wheel-aarch64

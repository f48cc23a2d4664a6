#!/usr/bin/env bash
# The builds only some integration tests need: the pip packages (`make wheel`: x86-64, then
# aarch64) and the aarch64 CLI (`make cross`). On a fresh machine they are about four minutes
# of compiling (three release builds of the crate in target dirs of their own), which
# `make integration` no longer waits for: it starts this script in the background
# (tools/prefetch.sh start wheels) and runs the test files that do not need them meanwhile;
# those that do (marked `after_wheels`, run last) wait for it (harness.wait_for_wheels), and
# the lldb tests run after it ended. Where the caches hold these sources' builds, seconds.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
# Started from a make recipe: its MAKEFLAGS (a jobserver's descriptors) are not ours.
exec env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$REPO" --no-print-directory wheel cross

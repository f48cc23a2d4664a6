#!/usr/bin/env bash
# Installs Debian packages on the host for the project's scripts: `tools/apt-install.sh PKG...`.
#
# Every host apt-get of the scripts goes through here, so that two of them running at once
# (`make test` provisions the arm64 roots, the test venv and torch in the background while it
# builds, tools/prefetch.sh) wait for each other: apt-get's own DPkg::Lock::Timeout covers
# dpkg's lock, not the lists that `apt-get update` rewrites. It tries the install first and
# updates the lists only when that fails (a fresh machine's lists may be stale or empty), so a
# machine whose lists are current pays no update. No recommends: qemu-user's would register
# qemu with the kernel for every foreign binary (binfmt), and none of the rest need theirs.
set -euo pipefail
[ "$#" -gt 0 ] || { echo "usage: $0 PACKAGE..." >&2; exit 2; }
sudo=()
[ "$(id -u)" -eq 0 ] || sudo=(sudo)
export DEBIAN_FRONTEND=noninteractive
LOCK="${PYUNWIND_CACHE:-$HOME/.cache/pyunwind}/.apt.lock"
mkdir -p "$(dirname "$LOCK")"
exec 9>"$LOCK"
flock 9
apt=("${sudo[@]}" apt-get -o DPkg::Lock::Timeout=900 -y -qq)
printf 'apt-install: %s\n' "$*" >&2
if ! "${apt[@]}" install --no-install-recommends "$@" >&2; then
    "${apt[@]}" update >&2
    "${apt[@]}" install --no-install-recommends "$@" >&2 \
        || { printf 'apt-install: error: cannot install %s\n' "$*" >&2; exit 1; }
fi

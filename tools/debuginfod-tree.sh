#!/usr/bin/env bash
# What the debuginfod tests serve (tests/integration/test_debuginfod.py): Debian's .debs of the
# installed python3.11 and glibc, at exactly the installed versions, downloaded with
# `apt-get download` and unpacked with `dpkg-deb -x` into one tree that Debian's own
# `debuginfod -F` scans:
#   python3.11-dbg     the separate debug files of /usr/bin/python3.11 and its extension modules
#   libc6-dbg          those of libc.so.6, ld.so, libm...
#   python3.11-minimal /usr/bin/python3.11 itself (a core's missing executable is fetched)
# into $PYUNWIND_CACHE/debuginfod/<versions>/tree. Safe to run again and again: a tree whose
# STAMP names exactly these packages and versions is kept. Prints the tree's path.
set -euo pipefail

CACHE="${PYUNWIND_CACHE:-$HOME/.cache/pyunwind}"
log() { printf 'debuginfod-tree: %s\n' "$*" >&2; }

version() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || true; }
py=$(version python3.11-minimal)
libc=$(version libc6)
[ -n "$py" ] || { log "error: python3.11-minimal is not installed"; exit 1; }
[ -n "$libc" ] || { log "error: libc6 is not installed"; exit 1; }
WANT="python3.11-dbg=$py libc6-dbg=$libc python3.11-minimal=$py"
DEST="$CACHE/debuginfod/${py//[^A-Za-z0-9.+~-]/_}_${libc//[^A-Za-z0-9.+~-]/_}"

if [ -f "$DEST/STAMP" ] && [ "$(cat "$DEST/STAMP")" = "$WANT" ]; then
    echo "$DEST/tree"
    exit 0
fi
log "downloading and unpacking $WANT into $DEST"
rm -rf "$DEST"
mkdir -p "$DEST/debs" "$DEST/tree"
# apt-get download writes into the current directory; as root it warns that the download is
# not sandboxed (the _apt user cannot write there), which is harmless.
# shellcheck disable=SC2086  # WANT is a list of packages
if ! (cd "$DEST/debs" && apt-get -qq download $WANT >&2); then
    # Stale or empty package lists (a fresh machine): update them under apt-install.sh's lock.
    LOCK="$CACHE/.apt.lock"
    sudo=()
    [ "$(id -u)" -eq 0 ] || sudo=(sudo)
    (flock 9 && "${sudo[@]}" apt-get -qq update >&2) 9>"$LOCK"
    # shellcheck disable=SC2086
    (cd "$DEST/debs" && apt-get -qq download $WANT >&2) \
        || { log "error: cannot download $WANT"; exit 1; }
fi
for deb in "$DEST"/debs/*.deb; do
    dpkg-deb -x "$deb" "$DEST/tree"
done
echo "$WANT" > "$DEST/STAMP"
echo "$DEST/tree"

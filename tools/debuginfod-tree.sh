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
# WANT and DEST for the installed versions.
want() {
    py=$(version python3.11-minimal)
    libc=$(version libc6)
    [ -n "$py" ] || { log "error: python3.11-minimal is not installed"; exit 1; }
    [ -n "$libc" ] || { log "error: libc6 is not installed"; exit 1; }
    WANT="python3.11-dbg=$py libc6-dbg=$libc python3.11-minimal=$py"
    DEST="$CACHE/debuginfod/${py//[^A-Za-z0-9.+~-]/_}_${libc//[^A-Za-z0-9.+~-]/_}"
}
want

if [ -f "$DEST/STAMP" ] && [ "$(cat "$DEST/STAMP")" = "$WANT" ]; then
    echo "$DEST/tree"
    exit 0
fi
# apt-get download writes into the current directory; as root it warns that the download is
# not sandboxed (the _apt user cannot write there), which is harmless.
download() {
    log "downloading and unpacking $WANT into $DEST"
    rm -rf "$DEST"
    mkdir -p "$DEST/debs" "$DEST/tree"
    # shellcheck disable=SC2086  # WANT is a list of packages
    (cd "$DEST/debs" && apt-get -qq download $WANT >&2)
}
if ! download; then
    # Stale or empty package lists (a fresh machine): update them under apt-install.sh's lock.
    LOCK="$CACHE/.apt.lock"
    sudo=()
    [ "$(id -u)" -eq 0 ] || sudo=(sudo)
    (flock 9 && "${sudo[@]}" apt-get -qq update >&2) 9>"$LOCK"
    if ! download; then
        # Debian's mirror keeps only the point release's and the security update's builds: a
        # machine image older than both has a python3.11 whose -dbg package is gone. Bring the
        # installed python3.11 packages to the version the mirror serves (a patch release of
        # the same 3.11.2), whose -dbg matches it again.
        # shellcheck disable=SC2207  # package names have no spaces
        pkgs=($(dpkg-query -W -f='${binary:Package} ${source:Package} ${db:Status-Status}\n' 2>/dev/null \
            | awk '$2 ~ /^python3\.11/ && $NF == "installed" {print $1}'))
        log "python3.11 $py is no longer on the mirror: upgrading ${pkgs[*]}"
        bash "$(dirname "$0")/apt-install.sh" --only-upgrade "${pkgs[@]}"
        want
        download || { log "error: cannot download $WANT"; exit 1; }
    fi
fi
for deb in "$DEST"/debs/*.deb; do
    dpkg-deb -x "$deb" "$DEST/tree"
done
echo "$WANT" > "$DEST/STAMP"
echo "$DEST/tree"

#!/usr/bin/env bash
# Debian's lldb VERSION where bookworm has no package of it: `tools/lldb-root.sh 24` unpacks
# experimental's lldb-24 (LLVM's main branch, a snapshot Debian refreshes) and python3-lldb-24
# with their library closure from sid (glibc, libpython3.14: lldb embeds sid's Python 3.14) into
# $PYUNWIND_CACHE/lldb/VERSION; safe to run again (quick once its STAMP is there).
#
# lldb 24 is the first whose scripted-extension callbacks skip the target's API lock (llvm
# PR #208242, on main since July 2026; not in 23.1.x): the frame provider lldb's event thread
# makes while a command holds that lock reads its frames (docs/debugger-commands.md).
#
# The root runs on this machine without being installed: every ELF file of it but glibc's own
# gets the root's dynamic linker (executables) and a DT_RPATH of the root's library folders
# (patchelf), for the final path, which the move at the end creates. The embedded Python finds
# its standard library from PYTHONHOME, which ROOT/bin/lldb and ROOT/bin/lldb-dap set before
# they exec the real programs (its own search starts at /usr, where bookworm has no 3.14).
# lldb-server, which lldb starts for a live process, needs no Python.
#
# The .debs come through a private apt configuration (sid and experimental lists under
# $PYUNWIND_CACHE/lldb/downloads/apt; the system's apt state is not touched). Experimental keeps
# only its newest snapshot: a download that fails updates the lists once and tries again.
# Everything is logged to stderr; the last (and only) line on stdout is the lldb to run.
set -euo pipefail

VERSION="${1:?usage: tools/lldb-root.sh VERSION}"
HERE="$(cd "$(dirname "$0")" && pwd)"
CACHE="${PYUNWIND_CACHE:-$HOME/.cache/pyunwind}/lldb"
DL="$CACHE/downloads"
APTDIR="$DL/apt"
R="$CACHE/$VERSION"
STAMP=STAMP

log() { printf 'lldb-root: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9

check() {
    local out
    out="$("$R/bin/lldb" -b --no-lldbinit -o 'script import os, sys; print("lldb-python", sys.version_info[:2], os.environ.get("PYTHONHOME"))' 2>&1)" \
        || die "$R/bin/lldb failed: $out"
    grep -q "^lldb-python (3, 14) None" <<<"$out" || die "$R/bin/lldb has no working Python 3.14, or its PYTHONHOME stays set for what it launches: $out"
    "$R/bin/lldb" --version | grep -q "^lldb version $VERSION\." || die "$R/bin/lldb is not lldb $VERSION"
}

if [ -f "$R/$STAMP" ]; then
    check
    echo "$R/bin/lldb"
    exit 0
fi
command -v patchelf >/dev/null || bash "$HERE/apt-install.sh" patchelf

APT=(-o Dir::Etc::SourceList="$APTDIR/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o Dir::State::Lists="$APTDIR/lists" -o Dir::Cache="$APTDIR/cache"
    -o Dir::State::status=/dev/null -o APT::Sandbox::User=root)
update() {
    log "apt-get update (private sid/experimental lists in $APTDIR)"
    apt-get "${APT[@]}" update >&2 || die "apt-get update of the sid/experimental lists failed"
}
mkdir -p "$APTDIR/lists/partial" "$APTDIR/cache/archives/partial" "$DL/debs"
cat >"$APTDIR/sources.list" <<'EOF'
deb [arch=amd64] http://deb.debian.org/debian sid main
deb [arch=amd64] http://deb.debian.org/debian experimental main
EOF
[ -n "$(find "$APTDIR/lists" -maxdepth 1 -name '*_experimental_main_binary-amd64_Packages*')" ] || update

# The closure, sid's package where both suites have one (experimental has only the snapshot's
# own packages newer than sid's).
WANT="lldb-$VERSION python3-lldb-$VERSION"
SKIP="python3 python3-minimal libpython3-stdlib tzdata media-types mime-support netbase debconf
 perl-base dpkg readline-common libc-dev-bin libc6-dev linux-libc-dev libcrypt-dev libexpat1-dev
 zlib1g-dev rpcsvc-proto libtirpc-dev libnsl-dev gcc-14-base gcc-15-base gcc-16-base"
closure() {
    local suite f
    for suite in sid experimental; do
        f=$(find "$APTDIR/lists" -maxdepth 1 -name "*_${suite}_main_binary-amd64_Packages*" | head -n 1)
        [ -n "$f" ] || die "no $suite list in $APTDIR/lists"
        /usr/lib/apt/apt-helper cat-file "$f"
        echo
    done | python3 "$HERE/sid_closure.py" "$WANT" "$SKIP" >"$DL/list-$VERSION.txt" \
        || die "lldb $VERSION: dependency closure"
}
download() {
    local need=() line
    while read -r line; do
        [ -n "$(deb_file "$line")" ] || need+=("$line")
    done <"$DL/list-$VERSION.txt"
    [ "${#need[@]}" -eq 0 ] || (cd "$DL/debs" && apt-get "${APT[@]}" download "${need[@]}" >&2)
}
# PACKAGE=VERSION -> its downloaded .deb (apt-get download escapes the epoch's colon), or nothing.
deb_file() {
    local p=${1%%=*} v=${1#*=}
    compgen -G "$DL/debs/${p}_${v/:/%3a}_*.deb" | head -n 1
}
closure
if ! download; then
    update
    closure
    download || die "lldb $VERSION: download failed"
fi
log "lldb $VERSION: $(wc -l <"$DL/list-$VERSION.txt") packages ($(grep "^lldb-$VERSION=" "$DL/list-$VERSION.txt"))"

tmp="$R.tmp"
rm -rf "$tmp" && mkdir -p "$tmp"
glibc="$tmp/glibc.files"
while read -r line; do
    deb="$(deb_file "$line")"
    [ -f "$deb" ] || die "lldb $VERSION: no .deb for $line"
    dpkg -x "$deb" "$tmp"
    # glibc's own files keep their paths: its dynamic linker and libc run as they are.
    [ "${line%%=*}" != libc6 ] || dpkg -c "$deb" | awk '$1 ~ /^-/ {sub(/^\./, "", $6); print $6}' >"$glibc"
done <"$DL/list-$VERSION.txt"
[ -s "$glibc" ] || die "lldb $VERSION: libc6 is not in the closure"
L="$R/usr/lib/x86_64-linux-gnu"
(cd "$tmp" && find usr -type f \( -perm -u+x -o -name '*.so*' \)) | grep -vxFf <(sed 's|^/||' "$glibc") \
    | while read -r f; do
        [ "$(head -c 4 "$tmp/$f" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
        if readelf -l "$tmp/$f" 2>/dev/null | grep -q 'program interpreter'; then
            patchelf --set-interpreter "$L/ld-linux-x86-64.so.2" "$tmp/$f"
        fi
        patchelf --force-rpath --set-rpath "$R/usr/lib/llvm-$VERSION/lib:$L" "$tmp/$f"
    done
mkdir -p "$tmp/bin"
for t in lldb lldb-dap; do
    [ -x "$tmp/usr/lib/llvm-$VERSION/bin/$t" ] || die "lldb $VERSION: no $t"
    printf '#!/bin/sh\n# lldb %s from a private root (tools/lldb-root.sh): its Python is the root'"'"'s.\nPYTHONHOME=%s/usr exec %s "$@"\n' \
        "$VERSION" "$R" "$R/usr/lib/llvm-$VERSION/bin/$t" >"$tmp/bin/$t"
    chmod +x "$tmp/bin/$t"
done
rm -f "$glibc"
# The Python's site hook drops PYTHONHOME from lldb's environment once the Python has started:
# programs lldb and lldb-dap launch get lldb's environment, and the wrapper's PYTHONHOME would
# point their own Python at this root's standard library. (Debian's file there is a link to
# /etc/python3.14/sitecustomize.py, which this machine does not have.)
rm -f "$tmp/usr/lib/python3.14/sitecustomize.py"
printf 'import os\n\nos.environ.pop("PYTHONHOME", None)\n' >"$tmp/usr/lib/python3.14/sitecustomize.py"
rm -rf "$R" && mv "$tmp" "$R"
check
touch "$R/$STAMP"
log "lldb $VERSION: ready in $R ($(du -sh "$R" | cut -f1))"
echo "$R/bin/lldb"

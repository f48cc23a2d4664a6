#!/usr/bin/env bash
# Make lldb VERSION (19, 22, ...) and its Python package the installed ones; safe to run again
# and again (quick when they already are). Debian bookworm's python3-lldb-X packages conflict
# with each other, so installing one removes the other: the lldb tests run one version, then
# call this again for the next. apt keeps the downloaded .debs, so switching back is quick.
# A version bookworm has no package of (24: LLVM's main branch) comes from Debian's newer suites
# in a private root instead, beside the installed one (tools/lldb-root.sh).
#
# Everything is logged to stderr; the last (and only) line on stdout is the lldb to run.
set -euo pipefail

VERSION="${1:?usage: tools/lldb-env.sh VERSION}"
case "$VERSION" in
19 | 22) ;;
*) exec bash "$(dirname "$0")/lldb-root.sh" "$VERSION" ;;
esac
LLDB="/usr/bin/lldb-$VERSION"
PACKAGES=("lldb-$VERSION" "python3-lldb-$VERSION")

log() { printf 'lldb-env: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

installed() {
    local p
    for p in "${PACKAGES[@]}"; do
        [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || return 1
    done
}

if ! installed || [ ! -x "$LLDB" ]; then
    log "installing ${PACKAGES[*]} (removes any other python3-lldb-X)"
    bash "$(dirname "$0")/apt-install.sh" "${PACKAGES[@]}" || die "cannot install ${PACKAGES[*]}"
fi
installed || die "${PACKAGES[*]} not installed"
# lldb must load its Python: the py-* commands are Python.
out="$("$LLDB" -b -o 'script print("lldb-python-ok")' 2>&1)" || die "$LLDB failed: $out"
case "$out" in *lldb-python-ok*) ;; *) die "$LLDB has no working Python: $out" ;; esac
echo "$LLDB"

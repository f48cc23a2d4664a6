#!/usr/bin/env bash
# pyunwind's pip package built for aarch64 (arm64) Linux on this x86-64 machine, for the tests
# that run it under qemu-user (tests/integration/test_arm64_cross.py); safe to run again and
# again.
#
#   tools/cross-aarch64.sh wheel MATURIN  the abi3 manylinux wheel (`make wheel`), built by that
#                                         maturin into target/wheels/pyunwind-*_aarch64.whl
#
# No standalone aarch64 CLI: the wheel's `pyunwind` command is the same Rust command line, and
# building the binary too would compile the crate once more for aarch64.
#
# Toolchain, installed only when missing: rustup's aarch64-unknown-linux-gnu target, and
# Debian's gcc-aarch64-linux-gnu (the linker, and the C compiler of the static liblzma) with
# libc6-dev-arm64-cross (glibc 2.36, the glibc the wheel's manylinux tag then follows). Cargo is
# told through the environment of these builds only (CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER,
# CC_/AR_aarch64_unknown_linux_gnu): host builds are unaffected.
#
# Time: a build's output is kept under a hash of everything it is made from (the crate's and the
# package's files, rustc's and maturin's versions, RECIPE), in $PYUNWIND_CACHE/cross-aarch64/out
# (the four newest of each kind): the same sources give the same file, copied without running
# cargo. Other sources are built from a copy of them at one path, $PYUNWIND_CACHE/cross-aarch64/src
# (a file whose bytes did not change keeps its copy's time), into one target dir beside it: a
# dependency is compiled again only when Cargo.lock changes it, and the crate incrementally
# (CARGO_INCREMENTAL=1; rustc reuses its work only for sources at the path it saw them at, and a
# fresh clone may be anywhere).
set -euo pipefail

TARGET=aarch64-unknown-linux-gnu
# Bumped when the way an output is made changes (its hash, so the output, changes with it).
RECIPE=cross-aarch64-2
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(dirname "$HERE")"
CACHE="${PYUNWIND_CACHE:-$HOME/.cache/pyunwind}/cross-aarch64"
# What the wheel is made from (the wheel's python/ links into the script dirs).
INPUTS=(Cargo.toml Cargo.lock build.rs .cargo src pyproject.toml README.md python pylib
    gdb-scripts lldb-scripts tools/cross-aarch64.sh)
KEEP=4
STAGE="$CACHE/src"

log() { printf 'cross-aarch64: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# --- toolchain ---------------------------------------------------------------------------------
toolchain() {
    if ! rustup target list --installed 2>/dev/null | grep -qx "$TARGET"; then
        log "rustup target add $TARGET"
        rustup target add "$TARGET" >&2 || die "rustup target add $TARGET failed"
    fi
    local missing=()
    command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || missing+=(gcc-aarch64-linux-gnu)
    [ -f /usr/aarch64-linux-gnu/include/stdio.h ] || missing+=(libc6-dev-arm64-cross)
    if [ "${#missing[@]}" -gt 0 ]; then
        bash "$(dirname "$0")/apt-install.sh" "${missing[@]}"
        command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 \
            || die "aarch64-linux-gnu-gcc missing after installing gcc-aarch64-linux-gnu"
    fi
    export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
    export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
    export AR_aarch64_unknown_linux_gnu=aarch64-linux-gnu-ar
    export CARGO_TARGET_DIR="$CACHE/target"
    export CARGO_INCREMENTAL=1
    # No debug info: maturin strips the module (pyproject.toml's `strip = true`, rustc's
    # -C strip=symbols), so the release profile's `debug = 1` would be compiled, for every
    # dependency, only to be thrown away.
    export CARGO_PROFILE_RELEASE_DEBUG=0
}

# --- the inputs ------------------------------------------------------------------------------------
# list_inputs: the files in INPUTS (tracked or new, not ignored, in a git checkout), relative to
# REPO, sorted, NUL-separated.
list_inputs() {
    (
        cd "$REPO"
        if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
            git ls-files -z -co --exclude-standard -- "${INPUTS[@]}"
        else
            find "${INPUTS[@]}" \( -type f -o -type l \) -print0 2>/dev/null
        fi | sort -z | while IFS= read -r -d '' f; do
            # A tracked file deleted in the work tree is no input.
            if [ -e "$f" ] || [ -L "$f" ]; then printf '%s\0' "$f"; fi
        done
    )
}

# inputs_hash KIND [TOOL...]: a hash of KIND, RECIPE, rustc's and the tools' versions and of every
# input (its path and content).
inputs_hash() {
    local kind=$1 t
    shift
    {
        echo "$RECIPE $kind $TARGET"
        rustc -vV
        for t in "$@"; do "$t" --version; done
        list_inputs | (cd "$REPO" && xargs -0 -r sha256sum)
    } | sha256sum | cut -c1-24
}

# stage: the inputs copied to $STAGE, where the builds run. A file whose bytes (or link) did
# not change is left alone, with its old time; files no longer among the inputs are removed.
stage() {
    local f list="$CACHE/inputs.list"
    mkdir -p "$STAGE"
    list_inputs >"$list"
    while IFS= read -r -d '' f; do
        if [ -L "$REPO/$f" ]; then
            [ -L "$STAGE/$f" ] && [ "$(readlink "$STAGE/$f")" = "$(readlink "$REPO/$f")" ] && continue
        elif [ ! -L "$STAGE/$f" ] && cmp -s "$REPO/$f" "$STAGE/$f"; then
            continue
        fi
        mkdir -p "$(dirname "$STAGE/$f")"
        rm -rf "${STAGE:?}/$f"
        cp -P "$REPO/$f" "$STAGE/$f"
    done <"$list"
    (cd "$STAGE" && find . \( -type f -o -type l \) -printf '%P\0' | sort -z \
        | comm -z -23 - "$list" | xargs -0 -r rm -f)
}

# keep_newest DIR: removes all but the KEEP newest entries of DIR.
keep_newest() {
    local old
    # shellcheck disable=SC2012 # names are hex hashes
    old=$(ls -1t "$1" | tail -n +"$((KEEP + 1))")
    for o in $old; do rm -rf "${1:?}/$o"; done
}

build_wheel() {
    local maturin=$1 key kept whl
    [ -x "$maturin" ] || die "no maturin at $maturin"
    key=$(inputs_hash wheel cargo "$maturin")
    kept="$CACHE/out/wheel/$key"
    if ! compgen -G "$kept/pyunwind-*_aarch64.whl" >/dev/null; then
        log "maturin build --release --target $TARGET in $STAGE"
        stage
        rm -rf "$kept.tmp" && mkdir -p "$kept.tmp"
        (cd "$STAGE" && "$maturin" build --release --target "$TARGET" --out "$kept.tmp" >&2) \
            || die "the aarch64 wheel build failed"
        rm -rf "$kept" && mv "$kept.tmp" "$kept"
        keep_newest "$CACHE/out/wheel"
    else
        log "the wheel of these sources is built: $kept"
        touch "$kept"
    fi
    whl=$(compgen -G "$kept/pyunwind-*_aarch64.whl" | head -n 1)
    mkdir -p "$REPO/target/wheels"
    # Only this build's aarch64 wheel in target/wheels (an older version's would be picked too).
    find "$REPO/target/wheels" -maxdepth 1 -name 'pyunwind-*_aarch64.whl' \
        ! -name "$(basename "$whl")" -delete
    cp "$whl" "$REPO/target/wheels/.$(basename "$whl").tmp"
    mv -f "$REPO/target/wheels/.$(basename "$whl").tmp" "$REPO/target/wheels/$(basename "$whl")"
    echo "$REPO/target/wheels/$(basename "$whl")"
}

[ "${1:-}" = wheel ] && [ $# -eq 2 ] || die "usage: $0 wheel MATURIN"
toolchain
mkdir -p "$CACHE"
# One build at a time (clones and CI runs share the target dir).
exec 9>"$CACHE/.lock"
flock 9
started=$SECONDS
build_wheel "$2"
log "wheel ready in $((SECONDS - started)) s"

#!/usr/bin/env bash
# Provide the test interpreters that no Debian bookworm package has; safe to run again and again.
#
#   $PYUNWIND_CACHE/pythons/debian-sid   Debian sid's python3.14 and python3.15 (stripped LTO
#       builds with the JIT compiled in, off unless PYTHON_JIT=1), their pydebug builds
#       (python3.14d, python3.15d) and detached debug info (usr/lib/debug/.build-id), unpacked
#       with sid's own glibc and made runnable here with patchelf (interpreter + DT_RPATH).
#   $PYUNWIND_CACHE/pythons/3.13t        free-threaded CPython 3.13 built from Debian's
#       python3.13 orig tarball (--disable-gil).
#   $PYUNWIND_CACHE/pythons/3.14t, 3.15t free-threaded 3.14/3.15, built the same way, only if
#       Debian's mirror serves their orig tarballs (it did not in November 2026: 404).
#
# A prefix is complete when its STAMP file exists; it is then left alone. Work happens in
# PREFIX.tmp and is moved into place at the end, so an interrupted run starts that prefix over.
# The Debian packages and tarballs stay in $PYUNWIND_CACHE/pythons/downloads.
# Any failure of a required interpreter exits non-zero (CI must fail, not skip).
# The libthread_db caveat (sid's cannot be loaded by bookworm's gdb) is in docs/development.md, `make pythons`.
set -euo pipefail

CACHE="${PYUNWIND_CACHE:-$HOME/.cache/pyunwind}/pythons"
DL="$CACHE/downloads"
APTDIR="$DL/apt"
STAMP=STAMP
JOBS=${JOBS:-$(nproc)}

log() { printf 'pythons: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

mkdir -p "$CACHE"
# One run at a time: `make test` starts one in the background (tools/prefetch.sh) and the unit
# tests' `make pythons` waits here for it to finish, then finds every STAMP in place.
exec 9>"$CACHE/.lock"
flock 9

# --- host packages (bookworm): patchelf for the sid root, a C toolchain and -dev libraries for
# the source builds -------------------------------------------------------------------------
host_deps() {
    local pkgs=(build-essential pkg-config patchelf xz-utils libssl-dev zlib1g-dev libffi-dev
        libbz2-dev liblzma-dev libsqlite3-dev libreadline-dev libncurses-dev uuid-dev
        libgdbm-dev libgdbm-compat-dev libzstd-dev libexpat1-dev)
    local missing=() p
    for p in "${pkgs[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
    done
    if [ "${#missing[@]}" -gt 0 ]; then
        bash "$(dirname "$0")/apt-install.sh" "${missing[@]}"
    fi
}

# --- a private apt configuration that sees sid (binaries) and sid/forky (sources) ------------
APT=(-o Dir::Etc::SourceList="$APTDIR/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o Dir::State::Lists="$APTDIR/lists" -o Dir::Cache="$APTDIR/cache"
    -o Dir::State::status=/dev/null -o APT::Sandbox::User=root)
apt_setup() {
    mkdir -p "$APTDIR/lists/partial" "$APTDIR/cache/archives/partial"
    cat >"$APTDIR/sources.list" <<'EOF'
deb [arch=amd64] http://deb.debian.org/debian sid main
deb-src http://deb.debian.org/debian sid main
deb-src http://deb.debian.org/debian forky main
EOF
    if [ -z "$(find "$APTDIR/lists" -maxdepth 1 -name '*_sid_main_binary-amd64_Packages*' 2>/dev/null)" ]; then
        log "apt-get update (private sid/forky lists in $APTDIR)"
        apt-get "${APT[@]}" update >&2 || die "apt-get update of the sid lists failed"
    fi
}

# --- Debian sid binaries in a private root ---------------------------------------------------
SID_WANT="python3.14-minimal libpython3.14-stdlib libpython3.14 python3.14-dbg libpython3.14-dbg
 python3.15-minimal libpython3.15-stdlib libpython3.15 python3.15-dbg libpython3.15-dbg"
# Data and tool packages the interpreters do not need at run time.
SID_SKIP="python3.14 python3.15 tzdata media-types mime-support netbase libtcl8.6 libtk8.6 debconf
 perl-base dpkg libpython3-stdlib python3-minimal python3 gdb libc-dev-bin libc6-dev
 libexpat1-dev zlib1g-dev libcrypt-dev linux-libc-dev rpcsvc-proto libtirpc-dev libnsl-dev
 libpython3.14-dev libpython3.15-dev gcc-16-base gcc-15-base gcc-14-base"

sid_root() {
    local R="$CACHE/debian-sid"
    [ -f "$R/$STAMP" ] && { log "debian-sid: present"; return 0; }
    apt_setup
    local pk
    pk=$(find "$APTDIR/lists" -maxdepth 1 -name '*_sid_main_binary-amd64_Packages*' | head -n 1)
    mkdir -p "$DL/debs"
    # The dependency closure, first alternative of each Depends/Pre-Depends.
    /usr/lib/apt/apt-helper cat-file "$pk" | python3 "$(dirname "$0")/sid_closure.py" \
        "$SID_WANT" "$SID_SKIP" >"$DL/debs/list.txt" || die "debian-sid: dependency closure"
    log "debian-sid: $(wc -l <"$DL/debs/list.txt") packages"
    local need=() line
    while read -r line; do
        ls "$DL/debs/${line%%=*}_"*.deb >/dev/null 2>&1 || need+=("$line")
    done <"$DL/debs/list.txt"
    if [ "${#need[@]}" -gt 0 ]; then
        (cd "$DL/debs" && apt-get "${APT[@]}" download "${need[@]}" >&2) \
            || die "debian-sid: download failed"
    fi
    local tmp="$R.tmp" L="$R/usr/lib/x86_64-linux-gnu" b
    rm -rf "$tmp" && mkdir -p "$tmp"
    while read -r line; do
        dpkg -x "$(ls "$DL/debs/${line%%=*}_"*.deb | head -n 1)" "$tmp"
    done <"$DL/debs/list.txt"
    # Paths are patched for the final location, which the move below creates.
    for b in "$tmp"/usr/bin/python3.1[45] "$tmp"/usr/bin/python3.1[45]d; do
        [ -f "$b" ] && [ ! -L "$b" ] || continue
        patchelf --set-interpreter "$L/ld-linux-x86-64.so.2" --force-rpath --set-rpath "$L" "$b"
    done
    for b in "$tmp"/usr/lib/x86_64-linux-gnu/libpython3.1[45]*.so.1.0; do
        patchelf --force-rpath --set-rpath "$L" "$b"
    done
    rm -rf "$R" && mv "$tmp" "$R"
    for b in python3.14 python3.14d python3.15 python3.15d; do
        [ -x "$R/usr/bin/$b" ] || die "debian-sid: $b missing"
        PYTHON_JIT=1 "$R/usr/bin/$b" -c 'import sys, ctypes; assert sys._jit.is_enabled()' \
            || die "debian-sid: $b does not run with PYTHON_JIT=1"
    done
    touch "$R/$STAMP"
    log "debian-sid: ready in $R ($(du -sh "$R" | cut -f1))"
}

# The standard libraries' .pyc files, which Debian's postinst (py3compile) writes and `dpkg -x`
# does not: without them each start of these interpreters compiles again every module it
# imports (the tests write no bytecode: PYTHONDONTWRITEBYTECODE), 0.30 s for `import asyncio,
# json, threading, ctypes` instead of 0.08, at each of the suite's many starts. Once, in a few
# seconds; PYC_STAMP says it was done (a root made before this step gets it on the next run).
sid_pyc() {
    local R="$CACHE/debian-sid" v
    [ -f "$R/PYC_STAMP" ] && return 0
    for v in 3.14 3.15; do
        "$R/usr/bin/python$v" -m compileall -q -j 0 "$R/usr/lib/python$v" >/dev/null \
            || die "debian-sid: compileall of $R/usr/lib/python$v failed"
    done
    touch "$R/PYC_STAMP"
    log "debian-sid: standard libraries byte-compiled"
}

# --- free-threaded builds from Debian's orig tarballs ----------------------------------------
# orig_tarball PKG: the path of the newest downloadable orig tarball of PKG, or nothing.
# When the mirror answered 404 for the orig tarball of every version the lists name, those
# versions are written to $DL/src/PKG.404 and not asked for again (about 2 s each, every run)
# until the lists name others; a failure other than a 404 is tried again on the next run.
orig_tarball() {
    local pkg=$1 f ver versions out gone=()
    f=$(ls "$DL/src/${pkg}_"*.orig.tar.xz 2>/dev/null | sort -V | tail -n 1 || true)
    [ -n "$f" ] && { echo "$f"; return 0; }
    apt_setup
    mkdir -p "$DL/src"
    versions=$(apt-cache "${APT[@]}" showsrc "$pkg" 2>/dev/null | awk '/^Version:/{print $2}' | sort -uVr)
    if [ -n "$versions" ] && [ "$(cat "$DL/src/$pkg.404" 2>/dev/null)" = "$versions" ]; then
        log "$pkg ${versions//$'\n'/ }: orig tarballs not on the mirror (404, $DL/src/$pkg.404)"
        return 0
    fi
    for ver in $versions; do
        out=$(cd "$DL/src" && apt-get "${APT[@]}" source --download-only "$pkg=$ver" 2>&1) || true
        f="$DL/src/${pkg}_${ver%-*}.orig.tar.xz"
        [ -f "$f" ] && { echo "$f"; return 0; }
        log "$pkg $ver: orig tarball not downloadable"
        grep -q "/${pkg}_${ver%-*}\.orig\.tar\.xz  *404 " <<<"$out" && gone+=("$ver")
    done
    [ -n "$versions" ] && [ "$(printf '%s\n' "${gone[@]}")" = "$versions" ] \
        && echo "$versions" >"$DL/src/$pkg.404"
    return 0
}

# build_ft NAME PKG REQUIRED: configure --disable-gil, make, install into $CACHE/NAME.
build_ft() {
    local name=$1 pkg=$2 required=$3 P="$CACHE/$1" tarball src bld
    [ -f "$P/$STAMP" ] && { log "$name: present"; return 0; }
    tarball=$(orig_tarball "$pkg")
    if [ -z "$tarball" ]; then
        [ "$required" = required ] && die "$name: no $pkg orig tarball can be downloaded"
        log "$name: no $pkg orig tarball can be downloaded; not built"
        return 0
    fi
    src="$DL/build/src-$name" bld="$DL/build/$name"
    rm -rf "$src" "$bld" "$P" "$P.tmp" && mkdir -p "$src" "$bld"
    tar -xJf "$tarball" -C "$src" --strip-components=1
    log "$name: building from $(basename "$tarball") (about 4 minutes on 2 cores)"
    # -g and frame pointers: the tests read its DWARF to check our built-in layout. No test
    # modules (the _test* extensions and Lib/test, a third of the stdlib that `make install`
    # byte-compiles three times): no test runs them, and on a fresh 2-core machine this build
    # runs beside the crate's.
    (cd "$bld" && "$src/configure" --prefix="$P" --with-ensurepip=no --enable-shared --disable-gil \
        --disable-test-modules \
        CFLAGS='-g -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer' \
        LDFLAGS="-Wl,-rpath,$P/lib" >"$bld/configure.log" 2>&1) \
        || die "$name: configure failed, see $bld/configure.log"
    (cd "$bld" && make -j"$JOBS" >"$bld/make.log" 2>&1) || die "$name: make failed, see $bld/make.log"
    (cd "$bld" && make install DESTDIR="$P.tmp" >"$bld/install.log" 2>&1) \
        || die "$name: make install failed, see $bld/install.log"
    mv "$P.tmp$P" "$P" && rm -rf "$P.tmp" "$bld" "$src"
    local exe
    exe=$(ls "$P"/bin/python3.1[0-9]t | head -n 1)
    "$exe" -c 'import sys; assert not sys._is_gil_enabled()' || die "$name: the GIL is enabled"
    touch "$P/$STAMP"
    log "$name: ready in $P ($(du -sh "$P" | cut -f1))"
}

host_deps
sid_root
sid_pyc
build_ft 3.13t python3.13 required
build_ft 3.14t python3.14 optional
build_ft 3.15t python3.15 optional
log "all present under $CACHE"

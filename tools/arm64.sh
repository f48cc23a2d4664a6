#!/usr/bin/env bash
# Debian's own arm64 (aarch64) interpreters and debuggers, run on this x86-64 machine under
# qemu-user, for the arm64 tests (tests/integration/test_arm64*.py); safe to run again and again.
#
#   $PYUNWIND_CACHE/arm64/bookworm   Debian 12 arm64 python3.11 (libpython3.11-stdlib) and its
#       library closure (libc6 2.36, zlib1g, libexpat1, libffi8, libssl3...).
#   $PYUNWIND_CACHE/arm64/sid        Debian sid arm64 python3.14 and python3.15 (JIT compiled
#       in, off unless PYTHON_JIT=1; -mbranch-protection=standard: PAC in saved return
#       addresses) with sid's glibc.
#   $PYUNWIND_CACHE/arm64/bookworm-debuggers   Debian 12 arm64 gdb 13.1 and lldb-19, both
#       embedding python3.11 (libpython3.11), with their library closure.
#   $PYUNWIND_CACHE/arm64/sid-debuggers        Debian sid arm64 lldb-22, embedding python3.14.
#
# An interpreter root is what `qemu-aarch64 -L ROOT ROOT/usr/bin/python3.X` runs and what
# `pyunwind core CORE --sysroot ROOT` reads; a debugger root what `qemu-aarch64 -L ROOT
# ROOT/usr/bin/gdb` (or lldb-N) runs, given an interpreter root as its sysroot. Each is the packages unpacked with `dpkg-deb -x` (no
# maintainer scripts), laid out merged-/usr as a Debian system is (bin, sbin, lib -> usr/...),
# absolute symlinks made relative so that they resolve inside the root, and the standard-library
# modules the scenarios import byte-compiled once by the root's own interpreter (it only saves
# start-up time under qemu).
#
# The .debs come from deb.debian.org through a private apt configuration (arch arm64, its own
# lists and cache under $PYUNWIND_CACHE/arm64/downloads; the system's apt state is not touched)
# and `apt-get download`. A root is complete when its STAMP file holds its current recipe; it is
# then left alone.
# Work happens in ROOT.tmp and is moved into place, so an interrupted run starts that root over.
# Host packages: qemu-user (qemu-aarch64) and gdb-multiarch, installed with apt-get only when
# missing. Any failure exits non-zero (CI must fail, not skip).
#
# The last lines on stdout are machine-readable: `bookworm=ROOT`, `sid=ROOT`,
# `bookworm-debuggers=ROOT` and `sid-debuggers=ROOT`.
set -euo pipefail

CACHE="${PYUNWIND_CACHE:-$HOME/.cache/pyunwind}/arm64"
DL="$CACHE/downloads"
STAMP=STAMP
# Bumped when the way a root is made changes (its STAMP then differs: the root is made again).
RECIPE=arm64-root-1
HERE="$(cd "$(dirname "$0")" && pwd)"
MIRROR=http://deb.debian.org/debian

log() { printf 'arm64: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

mkdir -p "$DL"
# One run at a time (a CI run and a developer's may share the cache).
exec 9>"$CACHE/.lock"
flock 9

# --- host packages ---------------------------------------------------------------------------
host_deps() {
    local missing=()
    command -v qemu-aarch64 >/dev/null 2>&1 || missing+=(qemu-user)
    command -v gdb-multiarch >/dev/null 2>&1 || missing+=(gdb-multiarch)
    command -v dpkg-deb >/dev/null 2>&1 || missing+=(dpkg)
    command -v python3 >/dev/null 2>&1 || missing+=(python3)
    # The cross C compiler test_arm64.py builds its DWARF library with (tools/cross-aarch64.sh
    # wants it too, but `make integration` runs that in the background, after test_arm64 starts).
    command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || missing+=(gcc-aarch64-linux-gnu)
    [ -f /usr/aarch64-linux-gnu/include/stdio.h ] || missing+=(libc6-dev-arm64-cross)
    if [ "${#missing[@]}" -gt 0 ]; then
        # No recommends (tools/apt-install.sh): qemu-user-binfmt would register qemu with the
        # kernel for every foreign binary; the tests call qemu-aarch64 themselves.
        bash "$HERE/apt-install.sh" "${missing[@]}"
    fi
    command -v qemu-aarch64 >/dev/null 2>&1 || die "qemu-aarch64 missing after installing qemu-user"
    command -v gdb-multiarch >/dev/null 2>&1 || die "gdb-multiarch missing after installing it"
    command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 \
        || die "aarch64-linux-gnu-gcc missing after installing gcc-aarch64-linux-gnu"
}

# --- a private apt configuration per suite, arm64 only -----------------------------------------
# apt_opts SUITE: sets APT to the options of SUITE's private configuration.
apt_opts() {
    local d="$DL/apt-$1"
    APT=(-o Dir::Etc::SourceList="$d/sources.list" -o Dir::Etc::SourceParts=/dev/null
        -o Dir::Etc::Preferences=/dev/null -o Dir::Etc::PreferencesParts=/dev/null
        -o Dir::State::Lists="$d/lists" -o Dir::Cache="$d/cache"
        -o Dir::State::status=/dev/null -o APT::Sandbox::User=root
        -o APT::Architecture=arm64 -o APT::Architectures=arm64 -o Acquire::Languages=none)
}

# apt_lists SUITE [refresh]: the path of SUITE's arm64 Packages index, downloaded if absent (or
# again with `refresh`).
apt_lists() {
    local suite=$1 d="$DL/apt-$1" pk
    apt_opts "$suite"
    mkdir -p "$d/lists/partial" "$d/cache/archives/partial"
    # target=Packages: no Translations, no DEP-11 metadata or icons.
    echo "deb [arch=arm64 target=Packages] $MIRROR $suite main" >"$d/sources.list"
    pk=$(find "$d/lists" -maxdepth 1 -name "*_${suite}_main_binary-arm64_Packages*" | head -n 1)
    if [ -z "$pk" ] || [ "${2:-}" = refresh ]; then
        log "$suite: apt-get update (private arm64 lists in $d)"
        apt-get "${APT[@]}" update >&2 || die "$suite: apt-get update of the arm64 lists failed"
        pk=$(find "$d/lists" -maxdepth 1 -name "*_${suite}_main_binary-arm64_Packages*" | head -n 1)
    fi
    [ -n "$pk" ] || die "$suite: no arm64 Packages index in $d/lists"
    echo "$pk"
}

# deb_of NAME=VERSION: the path the .deb of that exact version has in $DL/debs, or nothing
# (apt-get download writes an epoch's colon as %3a).
deb_of() {
    local name=${1%%=*} ver=${1#*=} f
    for f in "$DL/debs/${name}_${ver//:/%3a}_"*.deb "$DL/debs/${name}_${ver#*:}_"*.deb; do
        [ -f "$f" ] && { echo "$f"; return 0; }
    done
    return 0
}

# closure LIST SUITE WANT SKIP [refresh]: writes $DL/LIST.list (NAME=VERSION of the dependency
# closure in SUITE, first alternative of each Depends/Pre-Depends) and downloads what is not in
# $DL/debs yet.
closure() {
    local list=$1 suite=$2 want=$3 skip=$4 pk line need=()
    pk=$(apt_lists "$suite" "${5:-}") || exit 1
    apt_opts "$suite"
    /usr/lib/apt/apt-helper cat-file "$pk" | python3 "$HERE/sid_closure.py" "$want" "$skip" \
        >"$DL/$list.list" || die "$list: dependency closure in $suite failed"
    mkdir -p "$DL/debs"
    while read -r line; do
        [ -n "$(deb_of "$line")" ] || need+=("$line")
    done <"$DL/$list.list"
    if [ "${#need[@]}" -gt 0 ]; then
        log "$list: downloading ${#need[@]} of $(wc -l <"$DL/$list.list") packages ($suite)"
        (cd "$DL/debs" && apt-get "${APT[@]}" download "${need[@]}" >&2) || return 1
    fi
    return 0
}

# merge_usr ROOT: the merged-/usr layout (bin, sbin, lib -> usr/...), moving what a package
# put in /lib etc. into /usr first.
merge_usr() {
    local r=$1 d
    for d in bin sbin lib; do
        mkdir -p "$r/usr/$d"
        if [ -d "$r/$d" ] && [ ! -L "$r/$d" ]; then
            cp -a "$r/$d/." "$r/usr/$d/" && rm -rf "${r:?}/$d"
        fi
        [ -L "$r/$d" ] || ln -s "usr/$d" "$r/$d"
    done
}

# relative_links ROOT: absolute symlinks inside ROOT point into ROOT instead (relative targets),
# so the root is usable from any path, by qemu -L and by a reader given --sysroot ROOT.
relative_links() {
    python3 - "$1" <<'EOF'
import os, sys
root = sys.argv[1]
for d, dirs, files in os.walk(root):
    for name in dirs + files:
        p = os.path.join(d, name)
        if os.path.islink(p):
            t = os.readlink(p)
            if t.startswith("/"):
                os.unlink(p)
                os.symlink(os.path.relpath(root + t, d), p)
EOF
}

# guest ROOT PYTHON ARGS...: run one of ROOT's interpreters under qemu.
guest() {
    local r=$1 py=$2
    shift 2
    env -u PYTHONHOME -u PYTHONPATH -u LD_LIBRARY_PATH -u LD_PRELOAD -u PYTHONDONTWRITEBYTECODE \
        qemu-aarch64 -L "$r" "$r/usr/bin/$py" "$@"
}

# What the test scenarios import (tests/scenarios/_truth.py, asyncio/cases.py, jit_call.py):
# checked to work, and byte-compiled into the root on the way (Debian's postinst would compile
# the whole standard library; under qemu that takes minutes, and a module imported without its
# .pyc is compiled again at every start: sid's 3.14 then needs ~25 s to import asyncio).
WARM_UP='
import asyncio, concurrent.futures, ctypes, gc, json, linecache, platform, re, sysconfig
import encodings.ascii, threading, time, types
assert sys.executable == sys.argv[1], (sys.executable, sys.argv[1])
assert ctypes.CDLL(None).getpid() > 0
t = threading.Thread(target=lambda: None); t.start(); t.join()
asyncio.run(asyncio.sleep(0))
json.loads(json.dumps({"ok": [1.5, None]}))
sysconfig.get_config_vars(); platform.python_version(); platform.machine()
'

# check_python ROOT PYTHON [jit]: the interpreter is arm64, starts, and imports what the
# scenarios need (leaving their .pyc files in the root); with `jit`, PYTHON_JIT=1 enables the
# JIT.
check_python() {
    local r=$1 py=$2 exe="$1/usr/bin/$2" machine
    [ -x "$exe" ] || die "$py missing from $r"
    machine=$(python3 -c 'import struct, sys
print(struct.unpack_from("<H", open(sys.argv[1], "rb").read(20), 18)[0])' "$exe")
    [ "$machine" = 183 ] || die "$exe is not an EM_AARCH64 (183) ELF file: e_machine $machine"
    guest "$r" "$py" -c "import sys; $WARM_UP" "$exe" \
        || die "$exe does not run under qemu-aarch64 -L $r"
    if [ "${3:-}" = jit ]; then
        PYTHON_JIT=1 guest "$r" "$py" -c 'import sys; assert sys._jit.is_enabled()' \
            || die "$exe does not run with PYTHON_JIT=1"
    fi
}

# root_ready NAME RECIPE: true when root NAME is complete and made by RECIPE (its STAMP holds
# it; a root made from another recipe is made again).
root_ready() {
    local R="$CACHE/$1"
    if [ -f "$R/$STAMP" ] && [ "$(cat "$R/$STAMP")" = "$2" ]; then
        log "$1: present in $R"
        return 0
    fi
    return 1
}

# unpack_root NAME SUITE "WANT" "SKIP": root NAME made anew in $CACHE/NAME from the closure of
# WANT in SUITE (its STAMP is written by stamp_root once its programs are checked).
unpack_root() {
    local name=$1 suite=$2 want=$3 skip=$4 R="$CACHE/$1" line deb
    # Lists may be stale (sid drops superseded .debs within days): on a failed download,
    # fetch them again and retry once.
    if ! closure "$name" "$suite" "$want" "$skip"; then
        log "$suite: download failed; refreshing the lists and retrying"
        closure "$name" "$suite" "$want" "$skip" refresh || die "$name: download failed"
    fi
    local tmp="$R.tmp"
    rm -rf "$tmp" "$R" && mkdir -p "$tmp"
    while read -r line; do
        deb=$(deb_of "$line")
        [ -n "$deb" ] || die "$name: no .deb for $line"
        dpkg-deb -x "$deb" "$tmp" || die "$name: dpkg-deb -x $deb failed"
    done <"$DL/$name.list"
    merge_usr "$tmp"
    relative_links "$tmp"
    cp "$DL/$name.list" "$tmp/PACKAGES"
    mv "$tmp" "$R"
}

# stamp_root NAME RECIPE: root NAME is complete.
stamp_root() {
    local R="$CACHE/$1"
    echo "$2" >"$R/$STAMP"
    log "$1: ready in $R ($(du -sh "$R" | cut -f1), $(wc -l <"$R/PACKAGES") packages)"
}

# build_root NAME SUITE "WANT" "SKIP" "PYTHONS" [jit]: a root of interpreters.
build_root() {
    local name=$1 suite=$2 want=$3 skip=$4 pythons=$5 jit=${6:-} R="$CACHE/$1" py
    local recipe="$RECIPE $suite: $want; $pythons $jit"
    root_ready "$name" "$recipe" && return 0
    unpack_root "$name" "$suite" "$want" "$skip"
    # Checked (and byte-compiled) at the final path: the interpreter finds its prefix from it.
    for py in $pythons; do
        check_python "$R" "$py" "$jit"
        log "$name: $py $(guest "$R" "$py" -c 'import platform as p
print(p.python_version(), p.machine(), "glibc", p.libc_ver()[1])')"
    done
    stamp_root "$name" "$recipe"
}

# check_debugger ROOT CPU EXE PYTHON ARGS...: ROOT/EXE is arm64, runs under qemu (CPU: its
# -cpu) with ARGS (which make it print `PYTHON <its embedded Python's version>`), and embeds
# python PYTHON (3.X).
check_debugger() {
    local r=$1 cpu=$2 rel=$3 exe="$1/$3" want=$4 machine out
    shift 4
    [ -x "$exe" ] || die "$exe missing"
    machine=$(python3 -c 'import struct, sys
print(struct.unpack_from("<H", open(sys.argv[1], "rb").read(20), 18)[0])' "$exe")
    [ "$machine" = 183 ] || die "$exe is not an EM_AARCH64 (183) ELF file: e_machine $machine"
    out=$(env -u PYTHONHOME -u PYTHONPATH -u LD_LIBRARY_PATH -u LD_PRELOAD \
        qemu-aarch64 -cpu "$cpu" -L "$r" "$exe" "$@" 2>&1) \
        || die "$exe does not run under qemu-aarch64 -cpu $cpu -L $r:
$out"
    grep -q "^PYTHON $want\." <<<"$out" || die "$exe: its Python is not $want:
$out"
    log "$(basename "$r"): $rel embeds Python $(sed -n 's/^PYTHON //p' <<<"$out")"
}

# build_debuggers NAME SUITE "WANT" "SKIP" PYTHON CPU DEBUGGER...: a root of debuggers (paths in
# the root: usr/bin/gdb, usr/bin/lldb-N), each checked to run on qemu's CPU (-cpu CPU, which the
# tests read from the root's QEMU_CPU file) and to embed python PYTHON (3.X).
build_debuggers() {
    local name=$1 suite=$2 want=$3 skip=$4 python=$5 cpu=$6 R="$CACHE/$1" d
    shift 6
    local recipe="$RECIPE $suite: $want; debuggers $* $python $cpu"
    root_ready "$name" "$recipe" && return 0
    unpack_root "$name" "$suite" "$want" "$skip"
    for d in "$@"; do
        case "$d" in
        */gdb) check_debugger "$R" "$cpu" "$d" "$python" -nx -batch -iex 'set auto-load off' \
            -ex 'python import sys; print("PYTHON", sys.version.split()[0])' ;;
        */lldb-*) check_debugger "$R" "$cpu" "$d" "$python" -b --no-lldbinit \
            -o 'script import sys; print("PYTHON", sys.version.split()[0])' ;;
        *) die "$name: no check for $d" ;;
        esac
    done
    # Where the tests read the CPU to give qemu.
    echo "$cpu" >"$R/QEMU_CPU"
    stamp_root "$name" "$recipe"
}

# Data and tool packages the interpreters do not need to start and import threading, asyncio,
# json, ctypes (and what only they pull in).
SKIP="python3 python3-minimal libpython3-stdlib tzdata media-types mime-support netbase debconf
 perl-base dpkg readline-common libc-dev-bin libc6-dev linux-libc-dev libcrypt-dev
 libexpat1-dev zlib1g-dev rpcsvc-proto libtirpc-dev libnsl-dev gcc-12-base gcc-14-base
 gcc-15-base gcc-16-base libtcl8.6 libtk8.6"

host_deps
build_root bookworm bookworm "python3.11-minimal libpython3.11-stdlib" "$SKIP" "python3.11"
build_root sid sid \
    "python3.14-minimal libpython3.14-stdlib python3.15-minimal libpython3.15-stdlib" \
    "$SKIP" "python3.14 python3.15" jit
# The debuggers, each with the Python of an interpreter root. sid's lldb 22 runs on a Neoverse
# N1 (no pointer authentication): sid signs every return address, and qemu 7.2 computes the
# PAC of its default `max` CPU in software (`lldb-22 --version` takes 65 s there, 8 s on the
# N1).
build_debuggers bookworm-debuggers bookworm "gdb lldb-19 python3-lldb-19" "$SKIP" 3.11 max \
    usr/bin/gdb usr/bin/lldb-19
build_debuggers sid-debuggers sid "lldb-22 python3-lldb-22" "$SKIP" 3.14 neoverse-n1 usr/bin/lldb-22
log "qemu: $(qemu-aarch64 --version | head -n 1)"
echo "bookworm=$CACHE/bookworm"
echo "sid=$CACHE/sid"
echo "bookworm-debuggers=$CACHE/bookworm-debuggers"
echo "sid-debuggers=$CACHE/sid-debuggers"

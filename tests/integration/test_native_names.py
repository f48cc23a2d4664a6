"""Names of native functions (issue 39, docs/report.md "Names of native functions"): a C++
library (tests/scenarios/native_names.cpp: namespaces, a class, templates, a lambda, gcc's
`.isra`, `.constprop`, `.cold` and `.localalias` clones, an inlined template; built with -g
and without) and a Rust cdylib (tests/scenarios/native_names_rs: a module, a trait, generics, a
closure; built by `cargo build` with v0 mangling and with rustc's default, legacy), each called
through ctypes by tests/scenarios/native_names.py and stopped in a Python callback inside
them. Every frame of the library in `pyunwind pid|core --native --json` is checked, live and
from a gcore core of the same stop:

- against an exact list of names (hashes and disambiguators of Rust names by pattern: they
  depend on rustc and the crate's path);
- against gdb's on the same stop: the PCs, the symbol `info symbol` names (gdb's minimal
  symbol, what `bt` prints for a function without debug information, as for the Rust
  library and the C++ one built without -g), and gdb's own `bt` through pyunwind's frame
  filter, which must show gdb's names and none of the mangled ones;
- against pystack's `--native`: C++ names (and inlined calls) as pystack prints them; pystack
  shows v0 names mangled (our `symbol`) and reads legacy ones as C++ (`c++filt -s gnu-v3` of
  our `symbol`);
- in the text report and in `--group --native`'s `native_frames`, the same names.

The Python frames sit around the library's: the callback inside, `main` outside.
"""

import json
import os
import re
import shutil
import sys
import tempfile

import pytest

import harness

TIMEOUT = 120
BUILD_TIMEOUT = 300
PYSTACK = os.path.join(os.path.dirname(sys.executable), "pystack")
INTERP = harness.pick(("pyenv-3.12",))[0]
RUST_CRATE = harness.scenarios_dir() / "native_names_rs"
RUST_LIBRARY = "libpyunwind_names_rs.so"
CXX_FLAGS = ["-shared", "-fPIC", "-O2", "-fno-semantic-interposition"]

# The library's frames, innermost first: (function, inlined). `HASH` stands for a Rust hash
# or crate disambiguator (hex digits; a v0 crate's the same all through the library).
CXX = [
    ("work::scaled(int (*)(int), int, int) [clone .constprop.0] [clone .cold]", False),
    ("long work::hop<long>(int (*)(int), long)", True),
    ("work::dive(work::Big const&, int (*)(int)) [clone .isra.0]", False),
    ("work::Box<long>::apply(long) const [clone .isra.0]", False),
    ("work::Runner::run(int)::{lambda(int)#1}::operator()(int) const [clone .isra.0]", False),
    ("int work::invoke<work::Runner::run(int)::{lambda(int)#1}>"
     "(work::Runner::run(int)::{lambda(int)#1}, int)", False),
    # A global function called from inside the library through its `.localalias`: named by
    # the global name, as gdb and pystack name it.
    ("work::Runner::run(int)", False),
    ("work::park_caller(int (*)(int), int)", False),
    ("names_entry", False),
]
RUST_V0 = [
    ("<pyunwind_names_rs[HASH]::walk::Leaf as pyunwind_names_rs[HASH]::walk::Step>::step", False),
    ("<pyunwind_names_rs[HASH]::walk::Wrapper<pyunwind_names_rs[HASH]::walk::Leaf>>::descend",
     False),
    ("pyunwind_names_rs[HASH]::run::{closure#0}", False),
    ("pyunwind_names_rs[HASH]::walk::apply::<pyunwind_names_rs[HASH]::run::{closure#0}>", False),
    ("pyunwind_names_rs[HASH]::run", False),
    ("names_rs_entry", False),
]
RUST_LEGACY = [
    ("<pyunwind_names_rs::walk::Leaf as pyunwind_names_rs::walk::Step>::step::hHASH", False),
    ("pyunwind_names_rs::walk::Wrapper<S>::descend::hHASH", False),
    ("pyunwind_names_rs::run::{{closure}}::hHASH", False),
    ("pyunwind_names_rs::walk::apply::hHASH", False),
    ("pyunwind_names_rs::run::hHASH", False),
    ("names_rs_entry", False),
]

# id: (what is built, its expected frames, whether gdb has DWARF for the library's functions).
LIBRARIES = {
    "cxx": ("cxx -g", CXX, True),
    "cxx-nodebug": ("cxx", [f for f in CXX if not f[1]], False),
    "rust-v0": ("rust v0", RUST_V0, False),
    "rust-legacy": ("rust legacy", RUST_LEGACY, False),
}


def build_cxx(directory, debug):
    out = os.path.join(directory, "libpyunwind_names.so")
    cmd = ["g++"] + CXX_FLAGS + (["-g"] if debug else []) + [
        str(harness.scenarios_dir() / "native_names.cpp"), "-o", out]
    rc, stdout, err = harness.run(cmd, BUILD_TIMEOUT)
    assert rc == 0, "building the C++ library failed:\n%s%s" % (stdout, err)
    return out, "names_entry"


def build_rust(mangling):
    """The cdylib built by cargo into the test cache (one target directory per mangling, so
    that each is built once and then found up to date)."""
    target = harness.cache_dir() / "native-names-rs" / mangling
    env = dict(os.environ, RUSTFLAGS="-C symbol-mangling-version=v0" if mangling == "v0" else "")
    env.pop("CARGO_TARGET_DIR", None)
    assert shutil.which("cargo"), "cargo is needed to build tests/scenarios/native_names_rs"
    rc, out, err = harness.run(
        ["cargo", "build", "--release", "--offline", "--locked", "--target-dir", str(target),
         "--manifest-path", str(RUST_CRATE / "Cargo.toml")], BUILD_TIMEOUT, env=env)
    assert rc == 0, "cargo build of %s failed:\n%s%s" % (RUST_CRATE, out, err)
    library = str(target / "release" / RUST_LIBRARY)
    rc, symbols, err = harness.run(["nm", "--defined-only", library], TIMEOUT)
    assert rc == 0, err
    ours = [line.split()[-1] for line in symbols.splitlines() if "pyunwind_names_rs" in line]
    prefix = {"v0": "_R", "legacy": "_ZN"}[mangling]
    # rustc's default is legacy today; should it become v0, the legacy build needs
    # `-Z unstable-options -C symbol-mangling-version=legacy`.
    assert ours and all(s.startswith(prefix) for s in ours), (mangling, ours)
    return library, "names_rs_entry"


def cli(*args):
    rc, out, err = harness.run([str(harness.cli_path())] + [str(a) for a in args], TIMEOUT)
    assert rc == 0, "pyunwind %s failed:\n%s" % (" ".join(map(str, args)), err)
    harness.assert_no_panic(err, rc)
    return out


@pytest.fixture(scope="module", params=list(LIBRARIES), ids=lambda k: k)
def stop(request):
    what, expected, dwarf = LIBRARIES[request.param]
    directory = tempfile.mkdtemp(prefix="pyunwind-names-")
    try:
        if what.startswith("cxx"):
            library, entry = build_cxx(directory, debug=what.endswith("-g"))
        else:
            library, entry = build_rust(what.split()[1])
        env = {"PYUNWIND_NAMES_LIB": library, "PYUNWIND_NAMES_ENTRY": entry}
        with harness.Scenario(INTERP, "native_names", env=env) as sc:
            sc.library = library
            sc.expected = expected
            sc.dwarf = dwarf
            sc.core = sc.make_core()
            yield sc
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def source_args(sc, source):
    return ["pid", sc.pid] if source == "live" else ["core", sc.core]


def main_thread(report, sc):
    harness.check_report_schema(report)
    (t,) = [t for t in report["threads"] if t["native_id"] == sc.pid]
    return t


def library_frames(frames, sc):
    name = os.path.basename(sc.library)
    return [f for f in frames if f["kind"] == "native" and f.get("module") == name]


def matches(expected, names):
    """Whether `names` are `expected` ((function, inlined) pairs), each `HASH` one run of hex
    digits, the v0 crate disambiguators the same all through."""
    if len(expected) != len(names):
        return False
    hashes = set()
    for (want, inlined), (got, got_inlined) in zip(expected, names):
        pattern = "^" + re.escape(want).replace("HASH", "([0-9a-f]+)") + "$"
        m = re.match(pattern, got)
        if not m or inlined != got_inlined:
            return False
        if "[" in want:
            # v0: every crate disambiguator is the crate's own.
            hashes.update(m.groups())
    return len(hashes) <= 1


@pytest.mark.parametrize("source", ["live", "core"])
def test_names_are_exact(stop, source):
    report = json.loads(cli(*source_args(stop, source), "--native", "--json"))
    t = main_thread(report, stop)
    mine = library_frames(t["frames"], stop)
    names = [(f.get("function"), bool(f.get("inlined"))) for f in mine]
    assert matches(stop.expected, names), "\nours:     %s\nexpected: %s" % (
        "\n          ".join(map(str, names)), "\n          ".join(map(str, stop.expected)))
    for f in mine:
        # The raw name beside the demangled one: the symbol table's (DWARF's linkage name for
        # the inlined call); a C name's is itself.
        if f["function"] in ("names_entry", "names_rs_entry"):
            assert f["symbol"] == f["function"], f
        else:
            assert f["symbol"].startswith(("_Z", "_R")) and f["symbol"] != f["function"], f
    # Python frames on both sides: the callback inside, `main` outside.
    kinds = [f["kind"] if f not in mine else "library" for f in t["frames"]]
    first, last = kinds.index("library"), len(kinds) - 1 - kinds[::-1].index("library")
    inner = [f["function"] for f in t["frames"][:first] if f["kind"] == "python"]
    outer = [f["function"] for f in t["frames"][last:] if f["kind"] == "python"]
    assert inner == ["blocked"] and outer == ["main", "<module>"], (inner, outer)
    assert kinds[first:last + 1] == ["library"] * len(mine), kinds


@pytest.mark.parametrize("source", ["live", "core"])
def test_text_and_group_show_the_same_names(stop, source):
    args = source_args(stop, source)
    report = json.loads(cli(*args, "--native", "--json"))
    mine = library_frames(main_thread(report, stop)["frames"], stop)
    text = cli(*args, "--native")
    for f in mine:
        line = "(C) %#018x %s (%s+%#x)" % (f["address"], f["function"], f["module"], f["offset"])
        assert line in text, (line, text)
    groups = json.loads(cli(*args, "--native", "--group", "--json"))
    harness.check_report_schema(groups)
    (group,) = [g for g in groups["groups"]
                if any(m["native_id"] == stop.pid for m in g["threads"])]
    assert library_frames(group["native_frames"], stop) == mine


# Plain gdb's view of the main thread (pyunwind's script loaded, but its frame filter and
# unwinders name no native frame): each frame's pc, whether gdb shows it as an inlined call,
# its module, the name `bt` prints and the minimal symbol `info symbol` finds at the pc (the
# return address minus one for a caller's frame); then `bt` through pyunwind's filter.
GDB_SCRIPT = r"""
import os
import gdb
(main,) = [t for t in gdb.selected_inferior().threads() if t.ptid[1] == PID]
main.switch()
f = gdb.newest_frame()
exact = True
while f is not None:
    if f.type() != gdb.TAILCALL_FRAME:
        pc = f.pc()
        lib = os.path.basename(gdb.solib_name(pc) or "")
        look = pc if exact else pc - 1
        sym = gdb.execute("info symbol %#x" % look, to_string=True).strip()
        minimal = "" if sym.startswith("No symbol") else sym.split(" in section")[0]
        minimal = minimal.rsplit(" + ", 1)[0]
        print("FRAME|%#x|%d|%s|%s|%s" % (pc, f.type() == gdb.INLINE_FRAME, lib, f.name(), minimal))
        if f.type() != gdb.INLINE_FRAME:
            exact = f.type() == gdb.SIGTRAMP_FRAME
    try:
        f = f.older()
    except gdb.error:
        break
print("@@BT")
gdb.execute("bt")
"""


def gdb_view(sc, source):
    """[(pc, inlined, name bt prints, minimal symbol)] of the library's frames, innermost
    first, and the text of pyunwind's `bt`."""
    script = os.path.join(sc.tmpdir, "names-%s.py" % source)
    with open(script, "w") as f:
        f.write("PID = %d\n" % sc.pid + GDB_SCRIPT)
    cmd = [*harness.gdb_argv(), "-q", "-batch", "-nx", "-iex", "set auto-load off",
           "-iex", "set debuginfod enabled off",
           "-x", str(harness.repo_root() / "gdb-scripts" / "pyunwind-gdb.py"),
           "-ex", "set print frame-arguments none", "-ex", "source %s" % script]
    cmd += [INTERP.exe, sc.core] if source == "core" else ["-p", str(sc.pid)]
    rc, out, err = harness.run(cmd, TIMEOUT, env=harness.child_env(INTERP.env))
    assert rc == 0, "gdb failed (%d):\n%s\n%s" % (rc, out, err)
    assert "Traceback (most recent call last)" not in out + err, out + err
    frames, bt = out.split("@@BT\n", 1)
    name = os.path.basename(sc.library)
    rows = []
    for line in frames.splitlines():
        if line.startswith("FRAME|"):
            _, pc, inlined, lib, shown, minimal = line.split("|", 5)
            if lib == name:
                rows.append((int(pc, 16), inlined == "1", shown, minimal))
    return rows, bt


@pytest.mark.parametrize("source", ["live", "core"])
def test_names_are_gdbs(stop, source):
    report = json.loads(cli(*source_args(stop, source), "--native", "--json"))
    mine = library_frames(main_thread(report, stop)["frames"], stop)
    theirs, bt = gdb_view(stop, source)
    assert len(mine) == len(theirs), "\nours: %s\ngdb:  %s" % (
        [(hex(f["address"]), f["function"]) for f in mine], theirs)
    for f, (pc, inlined, shown, minimal) in zip(mine, theirs):
        assert (f["address"], bool(f.get("inlined"))) == (pc, inlined), (f, theirs)
        if inlined:
            # gdb names an inlined call from DWARF, without parameters (`work::hop<long>`);
            # ours is its linkage name demangled, as pystack shows it.
            assert (shown + "(") in f["function"], (f, shown)
            continue
        assert f["function"] == minimal, (f, minimal)
        if not stop.dwarf:
            # Without DWARF, `bt` prints the minimal symbol.
            assert f["function"] == shown, (f, shown)
    # pyunwind's bt shows gdb's names, none mangled.
    for pc, inlined, shown, minimal in theirs:
        assert shown in bt, (shown, bt)
    for f in mine:
        if f["symbol"] != f["function"]:
            assert f["symbol"] not in bt, (f["symbol"], bt)


def pystack_view(sc, source):
    """pystack --native's names of the library's frames of the main thread, innermost first:
    [(name, inlined)]."""
    assert os.access(PYSTACK, os.X_OK), "pystack missing from the test venv (tools/test-env.sh)"
    if source == "core":
        cmd = [PYSTACK, "core", sc.core, INTERP.exe, "--native"]
    else:
        cmd = [PYSTACK, "remote", str(sc.pid), "--native"]
    rc, out, err = harness.run(cmd, TIMEOUT)
    assert rc == 0, "pystack failed:\n%s\n%s" % (out, err)
    name = os.path.basename(sc.library)
    rows, current = [], None
    for line in out.splitlines():
        m = re.match(r"Traceback for thread (\d+)", line)
        if m:
            current = int(m.group(1))
            continue
        # `(C) File "x.cpp", line 25, in work::scaled(int) [clone .cold] (inlined) (/x/lib.so)`
        m = re.match(r'\s+\(C\) File "[^"]*", line \d+, in (.*?)( \(inlined\))? \(([^()]*)\)$',
                     line)
        if m and current == sc.pid and os.path.basename(m.group(3)) == name:
            rows.append((m.group(1), bool(m.group(2))))
    return rows[::-1]


def cxx_demangled(symbol):
    """`symbol` demangled as C++ alone (binutils' c++filt, GNU v3 style)."""
    rc, out, err = harness.run(["c++filt", "-s", "gnu-v3", symbol], TIMEOUT)
    assert rc == 0, err
    return out.strip()


@pytest.mark.parametrize("source", ["live", "core"])
def test_names_are_pystacks(stop, source):
    report = json.loads(cli(*source_args(stop, source), "--native", "--json"))
    mine = library_frames(main_thread(report, stop)["frames"], stop)
    if stop.expected is RUST_V0:
        # pystack demangles `_Z` names only.
        want = [(f["symbol"], bool(f.get("inlined"))) for f in mine]
    elif stop.expected is RUST_LEGACY:
        # ... and reads a legacy Rust name as C++ (`Wrapper$LT$S$GT$`).
        want = [(cxx_demangled(f["symbol"]), bool(f.get("inlined"))) for f in mine]
    else:
        want = [(f["function"], bool(f.get("inlined"))) for f in mine]
    assert pystack_view(stop, source) == want

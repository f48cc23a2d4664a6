"""Launch scenario programs under every test interpreter, and make core files of them.

Standard library only; no pytest in here (conftest.py adds the pytest glue).

    for interp in harness.interpreters():
        with harness.Scenario(interp, "threads") as s:
            s.pid, s.truth, s.exe
            core = s.make_core()          # gcore; one core per scenario, reused

A scenario that stops more than once (why_handover.py): ``s.next_stop()`` waits for its next
ready and reads its new truth; ``s.make_core_named("stop2")`` makes a new core at each call.

Environment:
    PYUNWIND_CACHE  cache directory (default ~/.cache/pyunwind): stripped libpython copies
    PYUNWIND_CLI    the command-line tool to test (default target/release/pyunwind)
    PYUNWIND_KEEP=1 keep each scenario's temp dir (truth, logs, core) and print where it is

Run ``python tests/integration/harness.py`` to start every scenario under every interpreter,
check its truth, make a core and print a table with the timings.
"""

import dataclasses
import functools
import json
import os
import pathlib
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

READY_TIMEOUT_SECONDS = 30.0
GCORE_TIMEOUT_SECONDS = 120.0
KILL_WAIT_SECONDS = 10.0

# pyenv builds in the matrix: minor -> exact version directory under $(pyenv root)/versions.
PYENV_VERSIONS = {10: "3.10.13", 11: "3.11.7", 12: "3.12.1", 13: "3.13.0"}
# pyenv builds that are also run with a `strip --strip-all` copy of their libpython.
STRIPPED_MINORS = (10, 12)
DEBIAN_PYTHON311 = "/usr/bin/python3.11"

# Environment variables that would change which interpreter, library or modules a child uses.
SCRUBBED_ENV = ("PYTHONHOME", "PYTHONPATH", "PYTHONSTARTUP", "PYTHONUSERBASE", "PYTHONSAFEPATH",
                "PYTHONINSPECT", "PYTHONEXECUTABLE", "PYTHONBREAKPOINT", "LD_LIBRARY_PATH",
                "LD_PRELOAD")


class HarnessError(Exception):
    """The test setup itself is broken: missing interpreter, scenario died, gcore failed..."""


@dataclasses.dataclass(frozen=True)
class Interp:
    id: str  # readable test id: "pyenv-3.12", "pyenv-3.12-stripped", "debian-3.11"
    exe: str  # interpreter to run
    env: dict  # extra environment for it (LD_LIBRARY_PATH for stripped copies)
    minor: int  # 3.<minor>
    stripped: bool  # libpython (or the executable holding it) has no .symtab / DWARF
    # the libpython .so the process must map; None when libpython is linked into `exe`
    libpython: str = None
    # where gdb finds separate debug info for it (None: nowhere, as for a user without -dbg)
    debug_dir: str = None

    def __hash__(self):
        return hash(self.id)


def repo_root():
    return pathlib.Path(__file__).resolve().parents[2]


def scenarios_dir():
    return repo_root() / "tests" / "scenarios"


def scenario_names():
    """Every scenario program (tests/scenarios/*.py that is not a helper)."""
    return sorted(p.stem for p in scenarios_dir().glob("*.py") if _is_scenario(p))


def _is_scenario(path):
    with open(path, encoding="utf-8") as f:
        return 'if __name__ == "__main__":' in f.read()


def cache_dir():
    default = pathlib.Path.home() / ".cache" / "pyunwind"
    path = pathlib.Path(os.environ.get("PYUNWIND_CACHE") or default)
    path.mkdir(parents=True, exist_ok=True)
    return path


def gdb_argv():
    """`gdb` with its index cache in the project's cache: gdb builds the index of a binary's
    DWARF at every start otherwise (pyenv's -g builds, sid's -dbgsym files), about 0.2 s of
    CPU per run, and the suite starts gdb thousands of times. The index changes no answer."""
    index = cache_dir() / "gdb-index-cache"
    index.mkdir(parents=True, exist_ok=True)
    return ["gdb", "-iex", "set index-cache directory %s" % index,
            "-iex", "set index-cache enabled on"]


def cli_path():
    """The release build of the command-line tool ($PYUNWIND_CLI overrides)."""
    override = os.environ.get("PYUNWIND_CLI")
    return pathlib.Path(override) if override else repo_root() / "target" / "release" / "pyunwind"


def pyenv_root():
    try:
        rc, out, err = run(["pyenv", "root"], timeout=30)
    except FileNotFoundError:
        rc, out = 1, ""
    if rc == 0 and out.strip():
        return pathlib.Path(out.strip())
    return pathlib.Path(os.environ.get("PYENV_ROOT") or pathlib.Path.home() / ".pyenv")


def keep_files():
    return os.environ.get("PYUNWIND_KEEP") == "1"


def child_env(extra=None):
    """os.environ without the variables in SCRUBBED_ENV, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    # One malloc arena: otherwise gcore writes each thread's 64 MiB PROT_NONE arena
    # reservation into the core as zeros (a 3-thread core grows from ~30 to ~220 MiB).
    env["MALLOC_ARENA_MAX"] = "1"
    env.update(extra or {})
    return env


# --- interpreters ---------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def interpreters():
    """The test matrix. Raises HarnessError when any interpreter is missing: never skip one."""
    root = pyenv_root()
    found, missing = [], []
    for minor, version in PYENV_VERSIONS.items():
        exe = root / "versions" / version / "bin" / "python3"
        if not os.access(exe, os.X_OK):
            missing.append(str(exe))
            continue
        lib = root / "versions" / version / "lib" / ("libpython3.%d.so.1.0" % minor)
        found.append(Interp("pyenv-3.%d" % minor, str(exe), {}, minor, False, str(lib)))
    if os.access(DEBIAN_PYTHON311, os.X_OK):
        found.append(Interp("debian-3.11", DEBIAN_PYTHON311, {}, 11, True, None))
    else:
        missing.append(DEBIAN_PYTHON311)
    if missing:
        raise HarnessError(
            "missing test interpreters (run tools/test-env.sh; pyenv builds come from "
            "`pyenv install`): " + ", ".join(missing)
        )
    by_id = {i.id: i for i in found}
    for minor in STRIPPED_MINORS:
        base = by_id["pyenv-3.%d" % minor]
        lib = stripped_libpython(pathlib.Path(base.libpython), "3.%d" % minor)
        found.append(Interp(base.id + "-stripped", base.exe, {"LD_LIBRARY_PATH": str(lib.parent)},
                            minor, True, str(lib)))
    return tuple(found)


def pick(ids, among=None):
    """The interpreters with these ids, in this order, from ``among`` (default: the whole
    matrix, provisioned interpreters included). An id that names none is a HarnessError: a
    renamed interpreter must not quietly shrink a test's parametrization."""
    pool = {i.id: i for i in (among if among is not None
                              else interpreters() + provisioned_interpreters())}
    unknown = [i for i in ids if i not in pool]
    if unknown:
        raise HarnessError("no interpreter %s among %s" % (", ".join(unknown), sorted(pool)))
    return [pool[i] for i in ids]


def pythons_dir():
    """Where `make pythons` (tools/pythons.sh) puts Debian sid's 3.14/3.15 and the
    free-threaded 3.13."""
    return cache_dir() / "pythons"


@functools.lru_cache(maxsize=None)
def provisioned_interpreters():
    """Debian sid's stripped python3.14 and python3.15 (JIT compiled in, off), each also with
    its detached debug info visible to gdb, and the free-threaded 3.13. Raises HarnessError when
    one is missing (run `make pythons`): never skip one."""
    root = pythons_dir()
    sid = root / "debian-sid"
    found, missing = [], []
    for minor in (14, 15):
        exe = sid / "usr" / "bin" / ("python3.%d" % minor)
        if not (sid / "STAMP").exists() or not os.access(exe, os.X_OK):
            missing.append(str(exe))
            continue
        found.append(Interp("debian-3.%d" % minor, str(exe), {}, minor, True, None))
        found.append(Interp("debian-3.%d-dbgsym" % minor, str(exe), {}, minor, True, None,
                            str(sid / "usr" / "lib" / "debug")))
    ft = root / "3.13t"
    exe = ft / "bin" / "python3.13t"
    if (ft / "STAMP").exists() and os.access(exe, os.X_OK):
        found.append(Interp("ft-3.13t", str(exe), {}, 13, False,
                            str(ft / "lib" / "libpython3.13t.so.1.0")))
    else:
        missing.append(str(exe))
    if missing:
        raise HarnessError("missing test interpreters (run `make pythons`): " + ", ".join(missing))
    return tuple(found)


def stripped_libpython(source, version):
    """A `strip --strip-all` copy of ``source`` in <cache>/stripped/<version>/, made when
    missing or older than ``source``. Returns its path."""
    dest_dir = cache_dir() / "stripped" / version
    dest_dir.mkdir(parents=True, exist_ok=True)
    dest = dest_dir / source.name
    if not source.is_file():
        raise HarnessError("libpython to strip is missing: %s" % source)
    if dest.exists() and dest.stat().st_mtime >= source.stat().st_mtime and not _has_symtab(dest):
        return dest
    tmp = dest_dir / (".%s.%d.tmp" % (source.name, os.getpid()))
    try:
        shutil.copyfile(source, tmp)
        rc, out, err = run(["strip", "--strip-all", str(tmp)], timeout=120)
        if rc != 0:
            raise HarnessError("strip --strip-all %s failed (%d): %s" % (tmp, rc, err))
        if _has_symtab(tmp):
            raise HarnessError("%s still has .symtab or DWARF after strip" % tmp)
        os.chmod(tmp, 0o755)
        os.replace(tmp, dest)  # atomic: parallel test runs see the old copy or the new one
    finally:
        if tmp.exists():
            tmp.unlink()
    return dest


def elf_sections(path):
    """{name: (file offset, size)} of the sections of a 64-bit little-endian ELF file."""
    with open(path, "rb") as f:
        ident = f.read(64)
        if ident[:4] != b"\x7fELF" or ident[4] != 2 or ident[5] != 1:
            raise HarnessError("%s is not a 64-bit little-endian ELF file" % path)
        shoff, = struct.unpack_from("<Q", ident, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", ident, 0x3A)
        f.seek(shoff)
        table = f.read(shentsize * shnum)
        headers = [struct.unpack_from("<IIQQQQ", table, i * shentsize) for i in range(shnum)]
        _, _, _, _, str_off, str_size = headers[shstrndx]
        f.seek(str_off)
        strtab = f.read(str_size)
    return {strtab[h[0]:strtab.index(b"\0", h[0])].decode(): (h[4], h[5]) for h in headers}


def elf_section_names(path):
    return list(elf_sections(path))


def build_id(path):
    """The GNU build id of an ELF file as hex, or None."""
    where = elf_sections(path).get(".note.gnu.build-id")
    if where is None:
        return None
    with open(path, "rb") as f:
        f.seek(where[0])
        note = f.read(where[1])
    namesz, descsz, _ = struct.unpack_from("<III", note)
    start = 12 + (namesz + 3) // 4 * 4
    return note[start:start + descsz].hex()


def separate_debug_file(path):
    """The /usr/lib/debug/.build-id file gdb would load for ``path``, or None if absent.
    (On Debian, python3.11-dbg provides one for /usr/bin/python3.11 only when its version
    matches python3.11's exactly.)"""
    bid = build_id(path)
    if not bid:
        return None
    debug = pathlib.Path("/usr/lib/debug/.build-id") / bid[:2] / (bid[2:] + ".debug")
    return str(debug) if debug.exists() else None


def _has_symtab(path):
    return any(n == ".symtab" or n.startswith(".debug_") for n in elf_section_names(path))


def guarded_mappings(pid):
    """(start, end) of the mappings of process ``pid`` that hold guard pages installed with
    MADV_GUARD_INSTALL (VmFlags `gu`; glibc 2.41+ makes thread stacks so, as Debian sid's does)."""
    out, cur = [], None
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            head = line.split(maxsplit=1)[0]
            if "-" in head and not head.endswith(":"):
                start, end = head.split("-")
                cur = (int(start, 16), int(end, 16))
            elif head == "VmFlags:" and " gu" in line and cur:
                out.append(cur)
    return out


def refill_guarded_mappings(core, pid):
    """gdb 13's gcore reads a mapping in large chunks, and a chunk that starts on a guard page
    fails with EIO and is written as zeros: a thread stack of sid's glibc comes out empty, though
    the kernel's own core dump has it. Re-read such mappings page by page from /proc/PID/mem
    (guard pages stay zero) and write them where gcore put them in ``core``."""
    guarded = guarded_mappings(pid)
    if not guarded:
        return
    with open(core, "r+b") as c, open("/proc/%d/mem" % pid, "rb", buffering=0) as mem:
        ident = c.read(64)
        phoff, = struct.unpack_from("<Q", ident, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", ident, 0x36)
        c.seek(phoff)
        table = c.read(phentsize * phnum)
        for i in range(phnum):
            ptype, _, offset, vaddr, _, filesz, _, _ = struct.unpack_from("<IIQQQQQQ", table,
                                                                          i * phentsize)
            if ptype != 1 or filesz == 0:
                continue
            for start, end in guarded:
                lo, hi = max(start, vaddr), min(end, vaddr + filesz)
                for page in range(lo, hi, 4096):
                    try:
                        mem.seek(page)
                        data = mem.read(min(4096, hi - page))
                    except OSError:
                        continue  # the guard page itself
                    c.seek(offset + page - vaddr)
                    c.write(data)


def mapped_files(pid):
    """Paths of the files mapped into process ``pid`` (from /proc/PID/maps)."""
    paths = set()
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and fields[5].startswith("/"):
                paths.add(fields[5].rstrip("\n"))
    return paths


def check_libpython_mapping(interp, pid):
    """Raise unless process ``pid`` mapped exactly the libpython ``interp`` says it uses."""
    libs = {p for p in mapped_files(pid) if "libpython" in os.path.basename(p)}
    want = {os.path.realpath(interp.libpython)} if interp.libpython else set()
    if {os.path.realpath(p) for p in libs} != want:
        raise HarnessError(
            "%s: pid %d maps libpython %s, expected %s (env %r)"
            % (interp.id, pid, sorted(libs) or "none", sorted(want) or "none", interp.env)
        )


# --- processes ------------------------------------------------------------------------------


def run(cmd, timeout, *, env=None, cwd=None, input=None, text=True):
    """Run ``cmd``; return (rc, stdout, stderr). On timeout kill its whole process group and
    raise HarnessError with what it printed."""
    proc = subprocess.Popen(
        [str(c) for c in cmd], stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd, start_new_session=True,
    )
    data = input.encode() if text and isinstance(input, str) else input
    try:
        out, err = proc.communicate(data, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        out, err = proc.communicate()
        raise HarnessError(
            "timed out after %.0f s: %s\n--- stdout\n%s\n--- stderr\n%s"
            % (timeout, " ".join(map(str, cmd)), _text(out), _text(err))
        ) from None
    finally:
        if proc.returncode is None:
            _kill_group(proc.pid)
            proc.wait()
    if text:
        out, err = _text(out), _text(err)
        if proc.returncode == 0 and "--json" in map(str, cmd) and _is_cli(cmd[0]):
            check_report_schema(json.loads(out))
    return proc.returncode, out, err


_WHEELS_READY = set()


def wait_for_wheels(arch="x86_64"):
    """The pip package of `arch` (x86_64 or aarch64) is built by tools/wheel-ARCH.sh, which
    `make integration` runs in the background while the files that do not need it run: wait
    until it ended (HarnessError, with its log, if it failed). Where it was not started (a plain
    pytest run), nothing to wait for: the tests then find the builds of `make wheel`."""
    if arch in _WHEELS_READY:
        return
    job = "wheel-" + arch
    rc, out, err = run(["bash", repo_root() / "tools" / "prefetch.sh", "wait", job], 3600)
    if rc != 0:
        raise HarnessError("the background build of the %s wheel failed (tools/%s.sh):\n%s%s"
                           % (arch, job, out, err))
    _WHEELS_READY.add(arch)


def payload_core(exe, script, prefix, env=None):
    """Runs ``script`` (which prints ``ready`` when it has reached its state) under ``exe``,
    gcores it to ``<prefix>.<pid>`` and kills it; returns the core's path."""
    proc = subprocess.Popen([exe, str(script)], stdout=subprocess.PIPE, env=child_env(env),
                            start_new_session=True)
    try:
        if proc.stdout.readline() != b"ready\n":
            raise HarnessError("%s did not get ready" % script)
        rc, out, err = run(["gcore", "-o", prefix, proc.pid], 300)
        if rc != 0:
            raise HarnessError("gcore failed: %s" % err)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return pathlib.Path("%s.%d" % (prefix, proc.pid))


# Runs argv[1:] from a small parent and prints the child's peak RSS: a process's peak survives
# exec, so the CLI must not be forked from the test run, whose memory grows over the session.
RSS_PROBE = """\
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
sys.stderr.write("peak rss KiB %d\\n" % usage.ru_maxrss)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def cli_peak_rss(args, workdir):
    """Runs the CLI with ``args``; returns (peak RSS in bytes, stdout bytes). Fails unless it
    exits 0."""
    out_path, err_path = pathlib.Path(workdir) / "cli.out", pathlib.Path(workdir) / "cli.err"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        probe = subprocess.run([sys.executable, "-c", RSS_PROBE, str(cli_path()), *map(str, args)],
                               stdout=out, stderr=err, timeout=300)
    errors = err_path.read_text()
    if probe.returncode != 0:
        raise HarnessError("CLI failed (%d): %s" % (probe.returncode, errors))
    return int(errors.splitlines()[-1].split()[-1]) * 1024, out_path.read_bytes()


def _is_cli(path):
    return os.path.basename(str(path)) == "pyunwind"


# --- panics --------------------------------------------------------------------------------

# Where the build may put the pyo3 extension module `_pyunwind` (cargo feature "python"), in
# order of preference; the environment variable PYUNWIND_MODULE overrides. A candidate counts
# only if it exports PyInit__pyunwind: the cdylib is also built without the feature.
MODULE_CANDIDATES = (
    "target/release/_pyunwind.so",
    "target/release/libpyunwind.so",
)
MODULE_INIT_SYMBOL = b"PyInit__pyunwind"


def module_path():
    """Path of the built Python extension module, or None when it is not there."""
    override = os.environ.get("PYUNWIND_MODULE")
    candidates = [override] if override else [repo_root() / c for c in MODULE_CANDIDATES]
    for candidate in map(pathlib.Path, candidates):
        if candidate.is_file() and candidate.stat().st_size and _exports_module_init(candidate):
            return candidate
    return None


def _exports_module_init(path):
    import mmap

    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        return data.find(MODULE_INIT_SYMBOL) != -1


@functools.lru_cache(maxsize=None)
def core_module():
    """The built `_pyunwind` module, loaded into this process (abi3: any Python >= 3.8)."""
    import importlib.util

    path = module_path()
    if path is None:
        raise HarnessError("the _pyunwind module is not built (run `make build`)")
    spec = importlib.util.spec_from_file_location("_pyunwind", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# What a panic the boundary missed looks like: Rust's default hook, pyo3's PanicException.
UNCAUGHT_PANIC_SIGNS = ("panicked at", "PanicException", "RUST_BACKTRACE")


def panic_in(text, rc=None):
    """The line of ``text`` (a run's output) that shows a panic of pyunwind, or None. A caught
    panic carries the panic boundary's one marker (src/panic.rs, read from the built module, so
    no wording is copied here; the CLI also exits with its own status for it); an uncaught one
    Rust's or pyo3's own words. A caught panic is a panic: it lost the whole report."""
    m = core_module()
    text = text.decode("utf-8", "replace") if isinstance(text, bytes) else (text or "")
    for line in text.splitlines():
        if m.PANIC_MARKER in line or any(s in line for s in UNCAUGHT_PANIC_SIGNS):
            return line
    if rc == m.PANIC_EXIT_STATUS or rc == 101:  # 101: Rust's own exit status for a panic
        return "exit status %d" % rc
    return None


def cli_checked(*args, timeout=120):
    """Runs the CLI, which must exit 0 without a panic; returns its JSON (with `--json`) or its
    text."""
    rc, out, err = run([cli_path(), *map(str, args)], timeout)
    assert_no_panic(err, rc)
    assert rc == 0, "pyunwind %s failed:\n%s" % (" ".join(map(str, args)), err)
    return json.loads(out) if "--json" in args else out


def assert_no_panic(text, rc=None):
    line = panic_in(text, rc)
    assert line is None, "pyunwind panicked: %s\n%s" % (line, (text or "")[-3000:])


# --- the JSON report's schema ----------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _report_validator():
    import jsonschema  # installed into the test venv by tools/test-env.sh

    with open(repo_root() / "docs" / "report.schema.json", encoding="utf-8") as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def check_report_schema(report):
    """Raise HarnessError unless ``report`` (a parsed --json output) matches
    docs/report.schema.json; return it. ``run`` checks every CLI --json output with it."""
    errors = sorted(_report_validator().iter_errors(report), key=lambda e: list(e.absolute_path))
    if errors:
        e = errors[0]
        raise HarnessError("--json output does not match docs/report.schema.json at %s: %s"
                           % ("/".join(map(str, e.absolute_path)) or "top", e.message))
    return report


def _text(data):
    return data.decode("utf-8", "replace") if isinstance(data, bytes) else (data or "")


def _kill_group(pgid):
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def wait_off_the_fifo(pid, tid):
    """The recording thread signals ready and then returns to its blocking line: wait until it
    is blocked in a system call other than the FIFO's open/write/close, so that a reader cannot
    catch it still inside the signalling function."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            with open("/proc/%d/task/%d/syscall" % (pid, tid)) as f:
                call = f.read().split()[0]
        except (OSError, IndexError):
            return
        if call not in ("running", "0", "1", "3", "257"):
            return
        time.sleep(0.002)


def wait_on_cpu(pid, tid, reads=3, timeout=10):
    """Wait until thread `tid` of `pid` is in no system call `reads` times in a row, 10 ms
    apart: a thread the scenario says spins is back on CPU after whatever stopped it last (a
    free-threaded build's stop-the-world for `sys._current_frames()`, the GIL the recording
    thread took), not in the futex it was woken from or still re-attaching."""
    deadline = time.monotonic() + timeout
    seen = 0
    while seen < reads:
        if time.monotonic() > deadline:
            raise HarnessError("thread %d of %d never settled on CPU" % (tid, pid))
        with open("/proc/%d/task/%d/syscall" % (pid, tid)) as f:
            seen = seen + 1 if f.read().split()[0] == "running" else 0
        time.sleep(0.01)


def syscalls(pid, tids):
    """What /proc/PID/task/TID/syscall starts with for each thread: a system call's number,
    `running`, or -1 (stopped outside a system call); None when unreadable."""
    out = []
    for tid in tids:
        try:
            with open("/proc/%d/task/%d/syscall" % (pid, tid), encoding="ascii") as f:
                out.append(f.read().split()[0])
        except (OSError, IndexError):
            out.append(None)
    return out


def all_stopped(pid, tids):
    for tid in tids:
        with open("/proc/%d/task/%d/stat" % (pid, tid), encoding="ascii") as f:
            if f.read().rsplit(")", 1)[1].split()[0] != "T":
                return False
    return True


STOP_TRIES = 50
STOP_POLL_SECONDS = 0.01


def stop_idle(pid, tids, timeout=120):
    """SIGSTOP process `pid` with each of its threads `tids` in the system call it idles in
    (the same over two looks a while apart), for a process that wakes now and then (gunicorn's
    arbiter every second, a gevent worker's loop): read while awake, it is not idle. A stop
    that catches a thread elsewhere is undone and tried again."""
    for _ in range(STOP_TRIES):
        idle = syscalls(pid, tids)
        time.sleep(STOP_POLL_SECONDS)
        if syscalls(pid, tids) != idle or any(c in (None, "running", "-1") for c in idle):
            continue
        os.kill(pid, signal.SIGSTOP)
        deadline = time.monotonic() + timeout
        while not all_stopped(pid, tids):
            assert time.monotonic() < deadline, "process %d does not stop" % pid
            time.sleep(STOP_POLL_SECONDS)
        if syscalls(pid, tids) == idle:
            return
        os.kill(pid, signal.SIGCONT)
    raise AssertionError("process %d: not stopped where it idles in %d tries: %r, then %r"
                         % (pid, STOP_TRIES, idle, syscalls(pid, tids)))


def signalling_thread(truth):
    """The native id of the thread that wrote `ready` to the FIFO: the `ready-signal` thread of
    `_truth.signal_when_blocked` (it adds itself last), else the recording thread (first)."""
    threads = truth.get("threads") or [{}]
    signaller = [t for t in threads if t.get("name") == "ready-signal"]
    return (signaller or threads)[0].get("native_id")


def wait_ready(reader, truth_path, timeout):
    """For a scenario a debugger started (Scenario starts its own): wait for `ready` on the
    FIFO's reader end, and return the truth once its thread is back on its blocking line."""
    deadline = time.monotonic() + timeout
    got = b""
    while b"ready\n" not in got:
        left = deadline - time.monotonic()
        if left <= 0:
            raise HarnessError("scenario not ready after %.0f s" % timeout)
        if select.select([reader], [], [], min(left, 0.05))[0]:
            got += os.read(reader, 64)
    with open(truth_path, encoding="utf-8") as f:
        truth = json.load(f)
    tid = signalling_thread(truth)
    if tid:
        wait_off_the_fifo(truth["pid"], tid)
    return truth


class Scenario:
    """One scenario program, running and stopped at its known point.

    Starts at construction and waits until the program says ready; use it as a context
    manager so the process (group) is killed and the temp dir removed at the end.

    Attributes: interp, name, exe, pid, truth (the parsed truth JSON), tmpdir, script,
    start_seconds (launch to ready).
    """

    def __init__(self, interp, name, timeout=READY_TIMEOUT_SECONDS, script=None, args=(),
                 env=None):
        self.interp = interp
        self.name = name
        self.exe = interp.exe
        self.args = [str(a) for a in args]
        self.env = dict(interp.env, **(env or {}))
        self.script = pathlib.Path(script) if script else scenarios_dir() / (name + ".py")
        if not self.script.is_file():
            raise HarnessError("no scenario %s" % self.script)
        self.tmpdir = pathlib.Path(tempfile.mkdtemp(prefix="pyunwind-%s-%s-" % (name, interp.id)))
        self._proc = None
        self._reaped = False
        self._closed = False
        self._core = None
        self.core_seconds = None
        try:
            self._start(timeout)
        except BaseException:
            self.close()
            raise

    def _start(self, timeout):
        fifo = self.tmpdir / "ready.fifo"
        truth_path = self.tmpdir / "truth.json"
        os.mkfifo(fifo)
        # Our own reader and writer: the child's open() never blocks, and our read never
        # sees end-of-file before the child has written.
        reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        writer = os.open(fifo, os.O_WRONLY)
        try:
            started = time.monotonic()
            with open(self.tmpdir / "stdout.log", "wb") as out, \
                    open(self.tmpdir / "stderr.log", "wb") as err:
                self._proc = subprocess.Popen(
                    [self.exe, str(self.script), str(truth_path), str(fifo)] + self.args,
                    stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                    env=child_env(self.env), cwd=self.tmpdir, start_new_session=True,
                )
            self.pid = self._proc.pid
            self._wait_ready(reader, started + timeout, timeout)
            self.start_seconds = time.monotonic() - started
        finally:
            os.close(reader)
            os.close(writer)
        with open(truth_path, encoding="utf-8") as f:
            self.truth = json.load(f)
        if self.truth.get("pid") != self.pid:
            raise HarnessError("%s: truth pid %r is not the child's %d"
                               % (self, self.truth.get("pid"), self.pid))
        check_libpython_mapping(self.interp, self.pid)
        tid = signalling_thread(self.truth)
        if tid:
            self._wait_off_the_fifo(tid)

    def _wait_off_the_fifo(self, tid):
        wait_off_the_fifo(self.pid, tid)

    def _wait_ready(self, reader, deadline, timeout):
        got = b""
        while b"ready\n" not in got:
            if self._exited():
                raise HarnessError("%s exited before ready:\n%s" % (self, self.stderr_text()))
            left = deadline - time.monotonic()
            if left <= 0:
                raise HarnessError("%s not ready after %.0f s:\n%s"
                                   % (self, timeout, self.stderr_text()))
            if select.select([reader], [], [], min(left, 0.05))[0]:
                got += os.read(reader, 64)

    def _exited(self):
        # WNOWAIT leaves the zombie in place, so its pid (= process group id) stays ours
        # until close() has killed the group.
        info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        return info is not None and info.si_pid == self.pid

    def stderr_text(self):
        try:
            return (self.tmpdir / "stderr.log").read_text("utf-8", "replace")
        except OSError:
            return ""

    def make_core(self):
        """A gcore core file of the process (``<tmpdir>/core.<pid>``), made once."""
        if self._core is None:
            started = time.monotonic()
            prefix = self.tmpdir / "core"
            # No debuginfod: with no network, lookups would only add delays.
            env = {k: v for k, v in os.environ.items() if k != "DEBUGINFOD_URLS"}
            rc, out, err = run(["gcore", "-o", prefix, self.pid], timeout=GCORE_TIMEOUT_SECONDS,
                               env=env)
            path = self.tmpdir / ("core.%d" % self.pid)
            if rc != 0 or not path.is_file():
                raise HarnessError("gcore of %s failed (rc %d):\n%s\n%s" % (self, rc, out, err))
            refill_guarded_mappings(path, self.pid)
            self.core_seconds = time.monotonic() - started
            self._core = path
        return str(self._core)

    def make_core_named(self, stem):
        """A new gcore core file of the process, ``<tmpdir>/<stem>.<pid>``, made at every call
        (make_core makes one per scenario): one per stop of a scenario that stops twice."""
        prefix = self.tmpdir / stem
        env = {k: v for k, v in os.environ.items() if k != "DEBUGINFOD_URLS"}
        rc, out, err = run(["gcore", "-o", prefix, self.pid], timeout=GCORE_TIMEOUT_SECONDS,
                           env=env)
        path = self.tmpdir / ("%s.%d" % (stem, self.pid))
        if rc != 0 or not path.is_file():
            raise HarnessError("gcore of %s failed (rc %d):\n%s\n%s" % (self, rc, out, err))
        refill_guarded_mappings(path, self.pid)
        return str(path)

    def next_stop(self, timeout=READY_TIMEOUT_SECONDS):
        """Wait for the scenario's next ``ready`` on the FIFO (a scenario that stops more than
        once: the harness made it move on, by a signal for example), then read its truth again
        into ``truth`` and wait until the signalling thread is back on its blocking line.
        Returns the new truth. Cores made before keep their files."""
        fifo = self.tmpdir / "ready.fifo"
        # As in _start: our own writer, so the reader never sees end-of-file.
        reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        writer = os.open(fifo, os.O_WRONLY)
        try:
            self._wait_ready(reader, time.monotonic() + timeout, timeout)
        finally:
            os.close(reader)
            os.close(writer)
        with open(self.tmpdir / "truth.json", encoding="utf-8") as f:
            self.truth = json.load(f)
        if self.truth.get("pid") != self.pid:
            raise HarnessError("%s: truth pid %r is not the child's %d"
                               % (self, self.truth.get("pid"), self.pid))
        tid = signalling_thread(self.truth)
        if tid:
            self._wait_off_the_fifo(tid)
        return self.truth

    def close(self):
        """Kill the process group and remove the temp dir (unless PYUNWIND_KEEP=1)."""
        if getattr(self, "_closed", True):
            return
        proc = getattr(self, "_proc", None)
        if proc is not None and not self._reaped:
            _kill_group(proc.pid)
            try:
                proc.wait(KILL_WAIT_SECONDS)
            except subprocess.TimeoutExpired:
                raise HarnessError("%s survived SIGKILL" % self)
            self._reaped = True
        tmpdir = getattr(self, "tmpdir", None)
        if tmpdir is not None and tmpdir.exists():
            if keep_files():
                sys.stderr.write("PYUNWIND_KEEP: %s kept in %s\n" % (self, tmpdir))
            else:
                shutil.rmtree(tmpdir, ignore_errors=True)
        self._closed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __str__(self):
        return "scenario %s on %s (pid %s)" % (self.name, self.interp.id, getattr(self, "pid", "?"))


# --- self-check -----------------------------------------------------------------------------


def check_truth(name, truth):
    """Problems with a scenario's truth, as a list of strings (empty when it looks sane)."""
    problems = []
    threads = truth.get("threads", [])
    if not threads or not threads[0]["frames"]:
        return ["no main thread frames"]
    main = threads[0]
    if main["name"] != "MainThread":
        problems.append("first thread is %r" % main["name"])
    functions = [f["function"] for f in main["frames"]]
    if functions[-1] != "<module>":
        problems.append("outermost frame is %r" % functions[-1])
    expect_innermost = {"recursion": "descend", "shapes": "leaf", "unicode_names": "𠀋",
                        "multiline": "wait_here", "locals": "inspect_me", "busy": "spin",
                        "threads": "wait_for_workers"}
    want = expect_innermost.get(name)
    if want and functions[0] != want:
        problems.append("innermost frame is %r, expected %r" % (functions[0], want))
    if name == "recursion" and len(functions) < 2 * truth["levels"]:
        problems.append("only %d frames for %d levels" % (len(functions), truth["levels"]))
    if name == "threads":
        names = sorted(t["name"] for t in threads)
        if names != ["MainThread", "worker-a", "worker-b", "worker-c"]:
            problems.append("threads %r" % names)
        innermost = {t["frames"][0]["function"] for t in threads}
        if len(innermost) != 4:
            problems.append("threads stop in %r, not 4 different functions" % innermost)
    if name == "locals":
        local_names = set(main["frames"][0].get("locals", {}))
        if not {"big", "ucs4_text", "thing", "counter", "bump"} <= local_names:
            problems.append("locals %r" % sorted(local_names))
    if name == "multiline":
        line = main["frames"][1]["line"]
        if _version(truth) >= (3, 11) and line != truth["middle_line"]:
            problems.append("compose at line %d, not %d" % (line, truth["middle_line"]))
    return problems


def _version(truth):
    return tuple(int(part) for part in truth["python"].split(".")[:2])


def _self_check():
    rows = []
    failed = False
    for interp in interpreters():
        for name in scenario_names():
            try:
                with Scenario(interp, name) as s:
                    problems = check_truth(name, s.truth)
                    core = s.make_core()
                    size = os.path.getsize(core)
                    frames = sum(len(t["frames"]) for t in s.truth["threads"])
                    rows.append((interp.id, name, "%.2f" % s.start_seconds,
                                 "%.2f" % s.core_seconds, "%d" % (size >> 20),
                                 "%d" % len(s.truth["threads"]), "%d" % frames,
                                 "; ".join(problems) or "ok"))
                    failed |= bool(problems)
            except HarnessError as e:
                rows.append((interp.id, name, "-", "-", "-", "-", "-", str(e).splitlines()[0]))
                failed = True
    header = ("interpreter", "scenario", "ready s", "gcore s", "core MiB", "threads", "frames",
              "check")
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    for row in [header] + rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(_self_check())

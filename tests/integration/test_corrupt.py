"""Corrupt, truncated and wrong inputs give partial results and clear errors, in bounded time.

DESIGN.md principle 2: the target is untrusted data. Each test takes a real core of a scenario
(`threads` or `recursion`) under every test interpreter, finds the real addresses in our own
JSON report of the untouched core (`thread_state`, each frame's `address`), corrupts a copy of
the core at exactly those addresses (corefile.py maps an address to its file offset through the
PT_LOAD headers) and checks what the CLI, and gdb with our script, make of it:

- a frame whose `previous` points to itself (or back to a newer frame): the frames up to it,
  then one unreadable frame whose reason says "cycle";
- a code pointer into garbage: that frame is unreadable, the frames before and after it are
  still decoded (the walk goes on through `previous`);
- a str length of 2**40 in a code object's name: the frames running that code are unreadable
  with a reason about the size limit, every other frame is fine;
- one thread's current-frame pointer into garbage: that thread shows an unreadable frame (or
  no frames) and an error, every other thread still equals the truth;
- truncated cores: gcore's layout (notes at the end) cut anywhere is refused with one clean
  error line about its missing NT_FILE note; the kernel's (notes first) gives a partial report;
  broken ELF headers: each break has its one outcome (ELF_BREAKS);
- not-a-core files, missing paths, the wrong `--exe`, pids without Python: exit 1 with exactly
  one line `pyunwind: ...` on stderr.

"Partial" is checked exactly: every Python frame in a report is the frame at the same position
in the truth; a thread that is not expected to be damaged equals the truth frame for frame.
Every run has a timeout; a hang is a failure. PYUNWIND_KEEP=1 keeps the corrupted cores.
"""

import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

import pytest

import harness
from corefile import program_headers
from corefile import CoreFile, u64

CLI_TIMEOUT_SECONDS = 20.0
GDB_TIMEOUT_SECONDS = 90.0

GDB_SCRIPT = harness.repo_root() / "gdb-scripts" / "pyunwind-gdb.py"

# --- CPython layouts (see src/cpython/layout/v3_1X.rs) ---------------------------------------
# `previous` of `_PyInterpreterFrame` (3.11+), `f_back` of `PyFrameObject` (3.10).
FRAME_PREVIOUS = {10: 24, 11: 48, 12: 8, 13: 8}
# `f_code` (3.10 PyFrameObject, 3.11/3.12 _PyInterpreterFrame), `f_executable` (3.13).
FRAME_CODE = {10: 32, 11: 32, 12: 0, 13: 0}
# str fields of PyCodeObject that name a frame: co_filename, co_name (, co_qualname).
CODE_STRINGS = {10: (104, 112), 11: (112, 120, 128), 12: (112, 120, 128), 13: (112, 120, 128)}
# The name a frame is shown with: co_name (3.10), co_qualname (3.11+).
CODE_SHOWN_NAME = {10: 112, 11: 128, 12: 128, 13: 128}
# `PyASCIIObject.length`.
STR_LENGTH = 16
# Where PyThreadState keeps the innermost frame: ("direct", offset) or
# ("cframe", offset of tstate->cframe, offset of _PyCFrame.current_frame).
TSTATE_FRAME = {10: ("direct", 24), 11: ("cframe", 56, 8), 12: ("cframe", 56, 0),
                13: ("direct", 72)}
# Bytes of PyThreadState the thread walk reads (up to the end of thread_id / native_thread_id).
TSTATE_READ_SIZE = {10: 184, 11: 168, 12: 152, 13: 168}
# Where the thread walk starts: `_PyRuntimeState.interpreters.head`, then the interpreter's
# `next` (at 0 in every version) and `threads.head` (3.10: `tstate_head`).
RUNTIME_INTERPRETERS_HEAD = {10: 32, 11: 40, 12: 40, 13: 632}
INTERP_THREADS_HEAD = {10: 8, 11: 16, 12: 72, 13: 7344}

HUGE_STR_LENGTH = 1 << 40
UNMAPPED_ADDRESS = 0x10  # never mapped: reads of it fail

SCENARIOS = ("threads", "recursion")


# --- running the CLI and gdb --------------------------------------------------------------


def cli(*args, timeout=CLI_TIMEOUT_SECONDS):
    """(rc, stdout, stderr) of the CLI; a run over ``timeout`` raises HarnessError (fails)."""
    return harness.run([harness.cli_path(), *args], timeout=timeout)


def describe_run(cmd, rc, out, err):
    return "%s\nrc %d\n--- stdout (%d chars)\n%s\n--- stderr\n%s" % (
        " ".join(map(str, cmd)), rc, len(out), out[:3000], err[:3000])


def assert_no_panic(text, rc=None):
    harness.assert_no_panic(text, rc)
    assert "stack backtrace" not in text, text


def assert_clean_failure(rc, out, err, what):
    """Exit status 1, nothing on stdout, exactly one line on stderr: ``pyunwind: ...``, which
    is not a caught panic (the panic boundary's line is one line too)."""
    assert_no_panic(err, rc)
    lines = err.splitlines()
    assert rc == 1 and len(lines) == 1 and lines[0].startswith("pyunwind: ") and not out, (
        "%s: want exit 1 and one `pyunwind: ` line on stderr, got\n%s"
        % (what, describe_run(["pyunwind"], rc, out, err)))


def cli_report(path, *extra):
    """The CLI's JSON report of the core at ``path``; it must exit 0 without a panic."""
    cmd = ["core", str(path), "--json", *extra]
    rc, out, err = cli(*cmd)
    assert_no_panic(err, rc)
    assert rc == 0, describe_run(["pyunwind"] + cmd, rc, out, err)
    return json.loads(out)


NO_NOTES = "core file has no NT_FILE note"
NO_HEADERS = "unreadable program headers"


def cli_outcome(path, what, failure=None, extra=()):
    """The one outcome the CLI (with the options ``extra``) must give for the core at
    ``path``: with ``failure`` None, a JSON report (exit 0), returned; else a clean failure
    (exit 1, one `pyunwind: ` line) whose line holds ``failure``, returned."""
    if failure is None:
        return cli_report(path, *extra)
    rc, out, err = cli("core", str(path), "--json", *extra)
    assert_clean_failure(rc, out, err, what)
    assert failure in err, "%s: want an error about %r, got %r" % (what, failure, err)
    return err


def gdb_env():
    # No debuginfod: with no network, lookups would only add delays.
    return harness.child_env({"DEBUGINFOD_URLS": ""})


def run_gdb(exe, core, commands):
    """Run gdb in batch mode with our script on ``core``; return (rc, output)."""
    cmd = [*harness.gdb_argv(), "-q", "-batch", "-nx", "-iex", "set auto-load off",
           "-iex", "set debuginfod enabled off", "-x", GDB_SCRIPT]
    for c in commands:
        cmd += ["-ex", c]
    cmd += [exe, core]
    rc, out, err = harness.run(cmd, timeout=GDB_TIMEOUT_SECONDS, env=gdb_env())
    return rc, out + err, cmd


def assert_no_traceback(output, cmd):
    """No Python exception escaped our gdb commands: each ended in one `pyunwind: ` line."""
    for bad in ("Traceback (most recent call last)", "Python Exception", "Error occurred in Python"):
        assert bad not in output, "%r in gdb output\n%s\n%s" % (bad, " ".join(map(str, cmd)),
                                                                  output[-6000:])


def assert_no_python_error(output, cmd):
    """No Python exception escaped our gdb commands, and none of their `pyunwind: ` error lines
    is a caught panic."""
    assert_no_traceback(output, cmd)
    assert_no_panic(output)


def gdb_json_report(output):
    """The report printed by `py-bt -a --json` (the one line of gdb's output that is JSON)."""
    found = [line for line in output.splitlines()
             if line.startswith('{"') and '"python":{' in line and line.endswith("}")]
    assert len(found) == 1, "no single JSON report in gdb output:\n%s" % output[-6000:]
    return json.loads(found[0])


# --- reports against the truth -----------------------------------------------------------


def truth_frames(truth_thread):
    return [(f["function"], f["file"], f["line"]) for f in truth_thread["frames"]]


# The reason of the unreadable frame that ends a native walk cut short (src/session/native_stacks.rs).
NATIVE_LOST = "native frames: "


def is_native_loss(frame):
    return frame["kind"] == "unreadable" and (frame.get("reason") or "").startswith(NATIVE_LOST)


def stack(report_thread):
    """A report thread's Python-level frames: (function, file, line) for a Python frame,
    ("unreadable", address, reason) for an unreadable one. Native frames, and the unreadable
    frame that ends a cut native walk, are left out (native_walk)."""
    out = []
    for f in report_thread["frames"]:
        if f["kind"] == "python":
            out.append((f["function"], f["file"], f["line"]))
        elif f["kind"] == "unreadable" and not is_native_loss(f):
            out.append(("unreadable", f.get("address"), f.get("reason")))
    return out


def native_walk(report_thread):
    """(PCs of the native and JIT frames, reasons of the native walk's error frames)."""
    pcs = [f["address"] for f in report_thread["frames"] if f["kind"] in ("native", "jit")]
    return pcs, [f["reason"] for f in report_thread["frames"] if is_native_loss(f)]


def is_unreadable(item):
    return item[0] == "unreadable" and len(item) == 3


def report_threads(report):
    """{thread_id: report thread}."""
    return {t["thread_id"]: t for t in report["threads"]}


def thread_label(truth_thread):
    return "%s (native id %s)" % (truth_thread["name"], truth_thread["native_id"])


def assert_consistent(report, truth):
    """What a report shows is right, however little it shows: every Python frame is the truth's
    frame at the same position, every unreadable frame has an address and a reason, and each
    unreadable frame is also an entry of `errors`."""
    truths = {t["thread_id"]: t for t in truth["threads"]}
    error_addresses = {e["address"] for e in report["errors"]}
    for t in report["threads"]:
        assert t["thread_id"] in truths, "thread %r is not in the truth" % t
        want = truth_frames(truths[t["thread_id"]])
        for i, item in enumerate(stack(t)):
            if is_unreadable(item):
                assert item[1] is not None and item[2], "unreadable frame without address or "\
                    "reason in %s: %r" % (thread_label(truths[t["thread_id"]]), item)
                assert item[1] in error_addresses, \
                    "unreadable frame %r has no entry in errors %r" % (item, report["errors"])
            else:
                assert i < len(want) and item == want[i], (
                    "%s frame #%d is %r, truth has %r"
                    % (thread_label(truths[t["thread_id"]]), i, item,
                       want[i] if i < len(want) else "no frame"))


def assert_intact(report, truth, skip=()):
    """Every truth thread (but the thread ids in ``skip``) is in the report, all its frames
    readable and equal to the truth."""
    threads = report_threads(report)
    for tt in truth["threads"]:
        if tt["thread_id"] in skip:
            continue
        t = threads.get(tt["thread_id"])
        assert t is not None, "%s is missing from the report; errors %r" % (
            thread_label(tt), report["errors"])
        got = stack(t)
        assert got == truth_frames(tt), "%s differs from the truth:\n got %r\nwant %r" % (
            thread_label(tt), got, truth_frames(tt))
        assert not t.get("truncated"), thread_label(tt)


def main_thread(truth):
    assert truth["threads"][0]["name"] == "MainThread"
    return truth["threads"][0]


# --- real cores, made once per (interpreter, scenario) -----------------------------------


def dynamic_symbol(path, name):
    """The value of the dynamic symbol ``name`` of the ELF file at ``path`` (stripped builds
    keep their .dynsym)."""
    sections = harness.elf_sections(path)
    with open(path, "rb") as f:
        f.seek(sections[".dynsym"][0])
        symbols = f.read(sections[".dynsym"][1])
        f.seek(sections[".dynstr"][0])
        strings = f.read(sections[".dynstr"][1])
    want = name.encode() + b"\0"
    found = [struct.unpack_from("<Q", symbols, i + 8)[0] for i in range(0, len(symbols), 24)
             if strings[struct.unpack_from("<I", symbols, i)[0]:].startswith(want)]
    assert len(found) == 1, "%s: %d dynamic symbols %s" % (path, len(found), name)
    return found[0]


def first_load_vaddr(path):
    """p_vaddr of the ELF file's PT_LOAD at file offset 0 (where its mapping of offset 0 is
    placed, relative to the load bias)."""
    found = [vaddr for p_type, _, offset, vaddr, _, _ in program_headers(path)[1]
             if p_type == 1 and offset == 0]
    assert len(found) == 1, path
    return found[0]


class RealCore:
    """A gcore core of a scenario, its truth and our report of the untouched core."""

    def __init__(self, interp, name, path, truth, report):
        self.interp = interp
        self.name = name
        self.core = CoreFile(path)
        self.truth = truth
        self.report = report
        self.minor = interp.minor
        self._native_report = None

    def report_thread(self, truth_thread):
        t = report_threads(self.report).get(truth_thread["thread_id"])
        assert t is not None, "%s not in the report of the untouched core" % thread_label(
            truth_thread)
        return t

    def frame_addresses(self, truth_thread):
        """Addresses of the thread's frames, innermost first (from the untouched report)."""
        frames = [f for f in self.report_thread(truth_thread)["frames"] if f["kind"] == "python"]
        assert len(frames) == len(truth_thread["frames"])
        return [f["address"] for f in frames]

    def truth_thread(self, name):
        found = [t for t in self.truth["threads"] if t["name"] == name]
        assert len(found) == 1, name
        return found[0]

    def runtime(self):
        """`_PyRuntime` in the core: the symbol of the interpreter's libpython (or of its
        executable, which then holds libpython), where the core maps that file."""
        module = os.path.realpath(self.interp.libpython or self.interp.exe)
        starts = [start for start, _, offset, path in self.core.mapped_files()
                  if offset == 0 and path == module]
        assert len(starts) == 1, "%s mapped %d times at offset 0" % (module, len(starts))
        return starts[0] - first_load_vaddr(module) + dynamic_symbol(module, "_PyRuntime")

    def native_report(self):
        """`--native` on the untouched core, made once."""
        if self._native_report is None:
            self._native_report = cli_report(self.core.path, "--native")
        return self._native_report


class Workdir:
    """Where the corrupted copies go; each test removes its own unless PYUNWIND_KEEP=1."""

    def __init__(self, root, label):
        self.path = tempfile.mkdtemp(prefix=label + "-", dir=root)

    def file(self, name):
        return os.path.join(self.path, name)

    def close(self):
        if harness.keep_files():
            sys.stderr.write("PYUNWIND_KEEP: corrupted cores kept in %s\n" % self.path)
        else:
            shutil.rmtree(self.path, ignore_errors=True)


@pytest.fixture(scope="module")
def cores_root():
    root = tempfile.mkdtemp(prefix="pyunwind-corrupt-")
    yield root
    if harness.keep_files():
        sys.stderr.write("PYUNWIND_KEEP: cores kept in %s\n" % root)
    else:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def real_core(cores_root):
    """``real_core(interp, name)`` -> RealCore; one gcore per (interpreter, scenario) per
    module, kept until the module is done."""
    cache = {}

    def get(interp, name):
        key = (interp.id, name)
        if key not in cache:
            with harness.Scenario(interp, name) as s:
                src = s.make_core()
                dest = os.path.join(cores_root, "core.%s.%s" % (name, interp.id))
                shutil.move(src, dest)
                truth = s.truth
            report = cli_report(dest)
            cache[key] = RealCore(interp, name, dest, truth, report)
        return cache[key]

    return get


@pytest.fixture
def workdir(cores_root, request):
    w = Workdir(cores_root, request.node.name.replace("/", "_")[:80])
    yield w
    w.close()


# --- the corruptions ------------------------------------------------------------------------
# Each builder takes a RealCore and a Workdir, writes a corrupted copy and returns
# (path, check): check(report) asserts what the report of that copy must show. The same check
# is applied to the CLI's report and to gdb's `py-bt -a --json`.


def frame_cycle(rc, w, index, back_to):
    """The main thread's frame #index gets `previous` = frame #back_to (back_to <= index)."""
    mt = main_thread(rc.truth)
    addrs = rc.frame_addresses(mt)
    assert back_to <= index < len(addrs)
    path = rc.core.patched_copy(w.file("core.cycle"), {
        addrs[index] + FRAME_PREVIOUS[rc.minor]: u64(addrs[back_to])})

    def check(report):
        assert_consistent(report, rc.truth)
        assert_intact(report, rc.truth, skip={mt["thread_id"]})
        got = stack(report_threads(report)[mt["thread_id"]])
        want = truth_frames(mt)[:index + 1]
        assert got[:index + 1] == want, got
        assert len(got) == index + 2, "want %d frames then one unreadable, got %r" % (
            index + 1, got[index:])
        assert is_unreadable(got[-1]) and "cycle" in got[-1][2], got[-1]
        assert got[-1][1] == addrs[back_to], got[-1]
        assert any("cycle" in e["what"] for e in report["errors"]), report["errors"]

    return path, check


def junk_value(rc, junk):
    if junk == "unmapped":
        return UNMAPPED_ADDRESS
    if junk == "all-ones":
        # Address arithmetic on it overflows: a read error, not a panic (exit 101).
        return 0xFFFFFFFFFFFFFFFF
    # Mapped memory that is no object: one byte into the main thread's PyThreadState.
    return rc.report_thread(main_thread(rc.truth))["thread_state"] + 1


def code_pointer_garbage(rc, w, index, junk):
    """The main thread's frame #index gets a code pointer to junk."""
    mt = main_thread(rc.truth)
    addrs = rc.frame_addresses(mt)
    path = rc.core.patched_copy(w.file("core.code"), {
        addrs[index] + FRAME_CODE[rc.minor]: u64(junk_value(rc, junk))})

    def check(report):
        assert_consistent(report, rc.truth)
        assert_intact(report, rc.truth, skip={mt["thread_id"]})
        got = stack(report_threads(report)[mt["thread_id"]])
        want = truth_frames(mt)
        assert len(got) == len(want), "the walk did not go on past the broken frame: %r" % (
            got[index:index + 5],)
        assert is_unreadable(got[index]) and got[index][1] == addrs[index], got[index]
        assert got[:index] == want[:index]
        assert got[index + 1:] == want[index + 1:]
        assert addrs[index] in {e["address"] for e in report["errors"]}, report["errors"]

    return path, check


def huge_string_length(rc, w):
    """The str naming the main thread's innermost code object gets a length of 2**40. Every
    frame whose code object names itself with that str must become unreadable."""
    mt = main_thread(rc.truth)
    addrs = rc.frame_addresses(mt)
    code = rc.core.read_u64(addrs[0] + FRAME_CODE[rc.minor])
    name = rc.core.read_u64(code + CODE_SHOWN_NAME[rc.minor])
    assert rc.core.read_i64(name + STR_LENGTH) == len(mt["frames"][0]["function"])
    path = rc.core.patched_copy(w.file("core.strlen"), {name + STR_LENGTH: u64(HUGE_STR_LENGTH)})

    def uses_name(frame_addr):
        c = rc.core.read_u64(frame_addr + FRAME_CODE[rc.minor])
        return any(rc.core.read_u64(c + off) == name for off in CODE_STRINGS[rc.minor])

    broken = [uses_name(a) for a in addrs]

    def check(report):
        assert_consistent(report, rc.truth)
        assert_intact(report, rc.truth, skip={mt["thread_id"]})
        got = stack(report_threads(report)[mt["thread_id"]])
        want = truth_frames(mt)
        assert len(got) == len(want), got[:10]
        for i, (g, w_, b) in enumerate(zip(got, want, broken)):
            if b:
                assert is_unreadable(g) and "limit" in g[2] and g[1] == addrs[i], (i, g)
            else:
                assert g == w_, (i, g, w_)
        assert any("limit" in e["what"] for e in report["errors"]), report["errors"]

    return path, check


def thread_frame_pointer(rc, w, variant):
    """worker-b's innermost-frame pointer (or, 3.11/3.12, its cframe pointer) into garbage."""
    victim = rc.truth_thread("worker-b")
    ts = rc.report_thread(victim)["thread_state"]
    how = TSTATE_FRAME[rc.minor]
    if variant == "cframe-unmapped":
        assert how[0] == "cframe"
        where, value = ts + how[1], UNMAPPED_ADDRESS
    else:
        if how[0] == "direct":
            where = ts + how[1]
        else:
            where = rc.core.read_u64(ts + how[1]) + how[2]
        value = UNMAPPED_ADDRESS if variant == "frame-unmapped" else ts + 1
    path = rc.core.patched_copy(w.file("core.thread"), {where: u64(value)})

    def check(report):
        assert_consistent(report, rc.truth)
        assert_intact(report, rc.truth, skip={victim["thread_id"]})
        t = report_threads(report).get(victim["thread_id"])
        assert t is not None, "%s vanished from the report (errors %r); it should be listed "\
            "with an unreadable frame or no frames" % (thread_label(victim), report["errors"])
        got = stack(t)
        assert all(is_unreadable(g) for g in got), got
        assert report["errors"], "no error for %s" % thread_label(victim)

    return path, check


def tstate_variants(interp):
    out = ["frame-unmapped", "frame-junk"]
    if TSTATE_FRAME[interp.minor][0] == "cframe":
        out.append("cframe-unmapped")
    return out


# --- 1. a frame whose previous points to itself (or to a newer frame) --------------------

CYCLES = [("threads", 2, 2), ("recursion", 2, 2), ("recursion", 5, 1)]


@pytest.mark.parametrize("name,index,back_to", CYCLES,
                         ids=["%s-frame%d-to-frame%d" % c for c in CYCLES])
def test_frame_cycle(interp, name, index, back_to, real_core, workdir):
    rc = real_core(interp, name)
    path, check = frame_cycle(rc, workdir, index, back_to)
    check(cli_report(path))


# --- 2. a code pointer into garbage ---------------------------------------------------------

CODE_CASES = [("threads", 1, "unmapped"), ("threads", 1, "junk"), ("recursion", 1, "unmapped"),
              ("recursion", 501, "junk"), ("threads", 1, "all-ones")]


@pytest.mark.parametrize("name,index,junk", CODE_CASES,
                         ids=["%s-frame%d-%s" % c for c in CODE_CASES])
def test_code_pointer_into_garbage(interp, name, index, junk, real_core, workdir):
    rc = real_core(interp, name)
    path, check = code_pointer_garbage(rc, workdir, index, junk)
    check(cli_report(path))


# --- 4. a string length of 2**40 ------------------------------------------------------------


@pytest.mark.parametrize("name", SCENARIOS)
def test_huge_string_length(interp, name, real_core, workdir):
    rc = real_core(interp, name)
    path, check = huge_string_length(rc, workdir)
    check(cli_report(path))


# --- 5. one unreadable thread does not hide the others --------------------------------------


def _tstate_params():
    return [pytest.param(i, v, id="%s-%s" % (i.id, v))
            for i in harness.interpreters() for v in tstate_variants(i)]


@pytest.mark.parametrize("interp,variant", _tstate_params())
def test_unreadable_thread(interp, variant, real_core, workdir):
    rc = real_core(interp, "threads")
    path, check = thread_frame_pointer(rc, workdir, variant)
    check(cli_report(path))


# --- the untouched cores, and the kernel-layout copy used for truncation --------------------


@pytest.mark.parametrize("name", SCENARIOS)
def test_untouched_core_matches_truth(interp, name, real_core):
    """The base of every test above: the untouched core gives the truth, no errors."""
    rc = real_core(interp, name)
    assert_intact(rc.report, rc.truth)
    assert rc.report["errors"] == []


def test_kernel_layout_copy_matches_truth(interp, real_core, workdir):
    """The notes-first rewrite of a gcore core (corefile.notes_first_copy) is a good core."""
    rc = real_core(interp, "threads")
    nf = rc.core.notes_first_copy(workdir.file("core.kernel"))
    report = cli_report(nf.path)
    assert_intact(report, rc.truth)
    assert report["errors"] == []


# --- 3. truncated cores -----------------------------------------------------------------------
# gcore writes the PT_NOTE segment at the end of the file, so any cut of a gcore core loses the
# notes (threads, registers, NT_FILE); the kernel writes notes first and loses memory when cut.

# gcore's cuts lose the notes: the CLI refuses the core (NO_NOTES); the kernel's keep them and
# give a partial report.
TRUNCATIONS = [
    ("gcore", 0.6), ("gcore", 0.2),
    ("kernel", 0.9), ("kernel", 0.6), ("kernel", 0.2), ("kernel", 0.01),
    ("kernel", "main-frame0"), ("kernel", "worker-frame0"),
]
TRUNCATION_IDS = ["%s-%s" % (l, "%d%%" % (c * 100) if isinstance(c, float) else c)
                  for l, c in TRUNCATIONS]


def truncated_core(rc, w, layout, cut):
    """A cut copy of the core (gcore's layout or the kernel's); returns a CoreFile."""
    core = rc.core if layout == "gcore" else rc.core.notes_first_copy(w.file("core.kernel"))
    if isinstance(cut, float):
        size = int(core.size * cut)
    else:
        # Cut at the innermost frame of a thread: the bytes of that frame are gone.
        who = main_thread(rc.truth) if cut == "main-frame0" else rc.truth_thread("worker-c")
        size = core.offset_of(rc.frame_addresses(who)[0])
    path = core.truncated_copy(w.file("core.cut"), size)
    if core is not rc.core:
        os.unlink(core.path)
    return CoreFile(path)  # its headers are intact: only segment data is cut off


def check_truncated(rc, report, cut_core=None):
    """What a report of a damaged core shows is right; whatever is missing has an error; and
    (with ``cut_core``, the damaged core) a thread whose PyThreadState is still in the core
    is listed when the heads of the runtime's and the interpreter's lists, and every thread
    state before it in the interpreter's list, are there too: also when the report lists no
    thread at all."""
    assert_consistent(report, rc.truth)
    threads = report_threads(report)
    complete = [tt for tt in rc.truth["threads"] if tt["thread_id"] in threads
                and stack(threads[tt["thread_id"]]) == truth_frames(tt)]
    if len(complete) < len(rc.truth["threads"]):
        assert report["errors"], "threads are missing or incomplete and no error says why"
    if cut_core is None:
        return
    interps = {t["interpreter"] for t in rc.report["threads"]}
    assert len(interps) == 1, interps
    interp = interps.pop()
    heads = [rc.runtime() + RUNTIME_INTERPRETERS_HEAD[rc.minor], interp,
             interp + INTERP_THREADS_HEAD[rc.minor]]
    reachable = all(cut_core.has(a, 8) for a in heads)
    # The report lists threads oldest first; CPython links them newest first.
    for t in reversed(rc.report["threads"]):
        reachable = reachable and cut_core.has(t["thread_state"], TSTATE_READ_SIZE[rc.minor])
        if reachable:
            assert t["thread_id"] in threads, (
                "thread %s (native id %s) is missing although the list heads %s, its "
                "PyThreadState %#x and every newer one are in the core; errors %r"
                % (t["name"], t["native_id"], ", ".join("%#x" % a for a in heads),
                   t["thread_state"], report["errors"]))


@pytest.mark.parametrize("layout,cut", TRUNCATIONS, ids=TRUNCATION_IDS)
def test_truncated_core(interp, layout, cut, real_core, workdir):
    rc = real_core(interp, "threads")
    cut_core = truncated_core(rc, workdir, layout, cut)
    what = "%s core cut at %s" % (layout, cut)
    if layout == "gcore":
        cli_outcome(cut_core.path, what, NO_NOTES)
    else:
        check_truncated(rc, cli_outcome(cut_core.path, what), cut_core)


def main_stack_address(rc, core):
    """An address in the main thread's C stack: its _PyCFrame (3.11/3.12), else the
    highest user-space segment of the core ([stack])."""
    how = TSTATE_FRAME[rc.minor]
    if how[0] == "cframe":
        return rc.core.read_u64(rc.report_thread(main_thread(rc.truth))["thread_state"] + how[1])
    return max(vaddr for vaddr, _, _, _ in core.loads if vaddr < 1 << 47)


def test_main_thread_stack_lost(interp, real_core, workdir):
    """A kernel-layout core cut where the main thread's C stack starts (the top of the address
    space: the first thing a cut core loses). On 3.11/3.12 the main thread's current frame is
    reached through a _PyCFrame on that stack: the main thread must still be listed (with what
    could be read and an error); every other thread is intact."""
    rc = real_core(interp, "threads")
    core = rc.core.notes_first_copy(workdir.file("core.kernel"))
    _, offset, _ = core.segment_of(main_stack_address(rc, core))
    cut_core = CoreFile(core.truncated_copy(workdir.file("core.cut"), offset))
    os.unlink(core.path)
    report = cli_report(cut_core.path)
    mt = main_thread(rc.truth)
    assert_intact(report, rc.truth, skip={mt["thread_id"]})
    check_truncated(rc, report, cut_core)
    t = report_threads(report).get(mt["thread_id"])
    assert t is not None, "the main thread vanished; errors %r" % report["errors"]
    # What is shown is right (assert_consistent in check_truncated); on 3.12+ the walk may
    # end in an unreadable item: the eval loop's entry frame is a C local on that stack.
    if stack(t) != truth_frames(mt):
        assert report["errors"], stack(t)


@pytest.mark.parametrize("fraction", [0.5, 0.05])
def test_truncated_recursion_core(interp, fraction, real_core, workdir):
    """A deep stack in a cut kernel-layout core: bounded, and what is shown is right."""
    rc = real_core(interp, "recursion")
    cut_core = truncated_core(rc, workdir, "kernel", fraction)
    report = cli_outcome(cut_core.path, "recursion core cut to %d%%" % (fraction * 100))
    check_truncated(rc, report, cut_core)


# --- broken ELF headers ---------------------------------------------------------------------

# How each break must end: a clean failure naming what is missing, or (None) a partial report
# (a PT_LOAD whose size runs past the file loses only its own bytes).
ELF_BREAKS = {"header-only": NO_HEADERS, "headers-only": NO_NOTES, "phnum-65535": NO_NOTES,
              "phoff-past-end": NO_HEADERS, "load-filesz-2**62": None,
              "note-filesz-2**40": NO_NOTES, "note-namesz-2**31": NO_NOTES}


def broken_elf(rc, w, how):
    src = rc.core
    dest = w.file("core.elf")
    with open(src.path, "rb") as f:
        header = bytearray(f.read(64))
    phoff, = struct.unpack_from("<Q", header, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", header, 0x36)
    if how == "header-only":
        return src.truncated_copy(dest, 64)
    if how == "headers-only":
        return src.truncated_copy(dest, phoff + phentsize * phnum)
    shutil.copyfile(src.path, dest)
    with open(dest, "r+b") as f:
        if how == "phnum-65535":
            f.seek(0x38)
            f.write(struct.pack("<H", 0xFFFF))
        elif how == "phoff-past-end":
            f.seek(0x20)
            f.write(struct.pack("<Q", src.size + (1 << 30)))
        else:
            f.seek(phoff)
            table = f.read(phentsize * phnum)
            want = 1 if how.startswith("load") else 4  # PT_LOAD, PT_NOTE
            index = next(i for i in range(phnum)
                         if struct.unpack_from("<I", table, i * phentsize)[0] == want)
            at = phoff + index * phentsize
            if how == "note-namesz-2**31":
                note_offset, = struct.unpack_from("<Q", table, index * phentsize + 8)
                f.seek(note_offset)
                f.write(struct.pack("<I", 1 << 31))
            else:
                f.seek(at + 32)  # p_filesz
                f.write(struct.pack("<Q", 1 << 62 if how.startswith("load") else 1 << 40))
    return dest


@pytest.mark.parametrize("how", ELF_BREAKS)
def test_broken_elf_headers(interp, how, real_core, workdir):
    rc = real_core(interp, "threads")
    path = broken_elf(rc, workdir, how)
    outcome = cli_outcome(path, "core with %s" % how, ELF_BREAKS[how])
    if ELF_BREAKS[how] is None:
        check_truncated(rc, outcome)


# --- 6. not a core, no such file, wrong executable, no Python ------------------------------


def _not_core_cases():
    return ["python-executable", "etc-passwd", "empty-file", "directory", "nonexistent"]


@pytest.mark.parametrize("what", _not_core_cases())
def test_not_a_core(what, tmp_path):
    path = {
        "python-executable": harness.interpreters()[0].exe,
        "etc-passwd": "/etc/passwd",
        "empty-file": str(tmp_path / "empty"),
        "directory": str(tmp_path),
        "nonexistent": str(tmp_path / "no" / "such" / "core"),
    }[what]
    if what == "empty-file":
        open(path, "wb").close()
    for args in (["core", path], ["core", path, "--json"]):
        rc, out, err = cli(*args)
        assert_clean_failure(rc, out, err, " ".join(args))


def _other_python(interp):
    """An interpreter executable of the matrix that is not ``interp``'s."""
    mine = os.path.realpath(interp.exe)
    for other in harness.interpreters():
        if os.path.realpath(other.exe) != mine:
            return other.exe
    raise harness.HarnessError("no second interpreter executable")


@pytest.mark.parametrize("exe", ["bin-ls", "nonexistent", "etc-passwd"])
def test_wrong_exe(interp, exe, real_core, tmp_path):
    rc = real_core(interp, "threads")
    path = {"bin-ls": "/bin/ls", "nonexistent": str(tmp_path / "nothing"),
            "etc-passwd": "/etc/passwd"}[exe]
    for args in (["core", rc.core.path, "--exe", path],
                 ["core", rc.core.path, "--exe", path, "--json"]):
        r, out, err = cli(*args)
        assert_clean_failure(r, out, err, " ".join(args))


def test_other_python_as_exe(interp, real_core):
    """`--exe` naming another interpreter's executable is refused, naming both build-ids: even
    pyenv's 3.10 and 3.11 `python3` launchers, whose first 64 bytes are the same."""
    rc = real_core(interp, "threads")
    other = _other_python(interp)
    args = ["core", rc.core.path, "--exe", other, "--json"]
    r, out, err = cli(*args)
    assert_clean_failure(r, out, err, " ".join(args))
    assert err.startswith("pyunwind: %s: does not match the executable of this core (" % other), err
    assert re.search(r"build-id [0-9a-f]{40} here, [0-9a-f]{40} in the core", err), err


@pytest.fixture
def sleeper():
    """A running process without Python (sleep), killed after the test."""
    proc = subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    yield proc.pid
    proc.kill()
    proc.wait()


@pytest.mark.parametrize("which", ["999999999", "sleep", "0"])
def test_pid_without_python(which, sleeper):
    pid = str(sleeper) if which == "sleep" else which
    for args in (["pid", pid], ["pid", pid, "--json"]):
        rc, out, err = cli(*args)
        assert_clean_failure(rc, out, err, " ".join(args))


# --- 7. the same corrupted cores in gdb -------------------------------------------------------

GDB_CASES = ["cycle", "code-junk", "huge-string", "thread-frame-unmapped", "kernel-cut-60%",
             "gcore-cut-60%"]


def gdb_case(rc, w, case):
    """(core path, check or None): None when gdb itself cannot open the core."""
    if case == "cycle":
        return frame_cycle(rc, w, 2, 2)
    if case == "code-junk":
        return code_pointer_garbage(rc, w, 1, "junk")
    if case == "huge-string":
        return huge_string_length(rc, w)
    if case == "thread-frame-unmapped":
        return thread_frame_pointer(rc, w, "frame-unmapped")
    if case == "kernel-cut-60%":
        cut_core = truncated_core(rc, w, "kernel", 0.6)
        return cut_core.path, lambda report: check_truncated(rc, report, cut_core)
    if case == "gcore-cut-60%":
        return truncated_core(rc, w, "gcore", 0.6).path, None
    raise ValueError(case)


@pytest.mark.parametrize("case", GDB_CASES)
def test_gdb_corrupt_core(interp, case, real_core, workdir):
    rc = real_core(interp, "threads")
    path, check = gdb_case(rc, workdir, case)
    _, output, cmd = run_gdb(interp.exe, path, ["py-bt -a", "py-bt -a --json"])
    assert_no_python_error(output, cmd)
    if check is None:
        # gdb could not load the core: our commands say so in one `pyunwind:` line each.
        errors = [l for l in output.splitlines() if l.startswith("pyunwind:")]
        assert len(errors) == 2, "want one `pyunwind:` line per command:\n%s" % output[-4000:]
        return
    report = gdb_json_report(output)
    check(report)
    # The text listing shows the same partial stacks: every readable frame of every thread.
    for t in report["threads"]:
        for f in t["frames"]:
            if f["kind"] == "python":
                assert 'line %d, in %s' % (f["line"], f["function"]) in output, f
            elif f["kind"] == "unreadable":
                assert "unreadable frame at %#x" % f["address"] in output, f


@pytest.mark.parametrize("layout,cut", TRUNCATIONS, ids=TRUNCATION_IDS)
def test_native_on_cut_cores(interp, layout, cut, real_core, workdir):
    """--native on a cut core has the outcome test_truncated_core requires without it:
    gcore's cuts the same one error line; the kernel's a report with the same threads and
    Python frames. Each thread's native walk starts where the untouched core's does and
    reaches its outermost frame (surely when the thread's stack is still in the core) or ends
    in an error entry; a thread that lost Python frames has an error entry too. With neither
    loss, its native frames are the untouched core's."""
    rc = real_core(interp, "threads")
    cut_core = truncated_core(rc, workdir, layout, cut)
    what = "%s core cut at %s" % (layout, cut)
    if layout == "gcore":
        plain_err = cli_outcome(cut_core.path, what, NO_NOTES)
        native_err = cli_outcome(cut_core.path, what + " (--native)", NO_NOTES, ("--native",))
        assert native_err == plain_err
        return
    plain = cli_outcome(cut_core.path, what)
    native = cli_outcome(cut_core.path, what + " (--native)", extra=("--native",))
    check_truncated(rc, native, cut_core)
    assert [t["thread_id"] for t in native["threads"]] == [
        t["thread_id"] for t in plain["threads"]], (native["errors"], plain["errors"])
    missing = [e for e in plain["errors"] if e not in native["errors"]]
    assert not missing, "errors of the plain run missing with --native: %r" % missing
    whole = report_threads(rc.native_report())
    sps = rc.core.stack_pointers()
    for t, p in zip(native["threads"], plain["threads"]):
        label = "%s (native id %s)" % (t["name"], t["native_id"])
        assert stack(t) == stack(p), "%s: other Python frames with --native:\n got %r\nwant " \
            "%r" % (label, stack(t), stack(p))
        # Errors name a thread by its LWP, or by its thread id where the plain run has none.
        names = {"thread %d: " % i for i in (t["native_id"], p["native_id"], t["thread_id"])
                 if i is not None}
        own_errors = [e["what"] for e in native["errors"] if e["what"][:e["what"].find(": ") + 2]
                      in names]
        truth = truth_frames(next(tt for tt in rc.truth["threads"]
                                  if tt["thread_id"] == t["thread_id"]))
        if stack(p) != truth:
            assert own_errors, "%s lost Python frames and no error names it: %r" % (
                label, native["errors"])
        got, losses = native_walk(t)
        want, _ = native_walk(whole[t["thread_id"]])
        # The registers are in the notes, which every kernel cut keeps: the walk starts where
        # the untouched core's does, and reaches its outermost frame or says where it stopped.
        assert got[:1] == want[:1], (label, got, want)
        assert len(losses) <= 1, (label, losses)
        if losses:
            assert "thread %d: %s" % (t["native_id"], losses[0]) in own_errors, (
                label, losses, own_errors)
        else:
            assert got[-1] == want[-1], "%s lost native frames and no error frame says so:\n" \
                " got %s\nwant %s" % (label, [hex(a) for a in got], [hex(a) for a in want])
        rsp = sps[t["native_id"]]
        vaddr, _, filesz = rc.core.segment_of(rsp)
        if cut_core.has(rsp, vaddr + filesz - rsp):
            assert not losses, "%s: its stack is in the core, yet the native walk stopped: " \
                "%r" % (label, losses)
        # Lost Python frames may leave an eval-loop frame in place of the run it executed.
        if not losses and stack(p) == truth:
            assert got == want, "%s: native frames are not the untouched core's:\n got %s\n" \
                "want %s" % (label, [hex(a) for a in got], [hex(a) for a in want])


def test_native_main_thread_stack_lost(interp, real_core, workdir):
    """The main thread's C stack cut off: its native frames end in an error entry; its
    Python frames and every other thread are as without --native."""
    rc = real_core(interp, "threads")
    core = rc.core.notes_first_copy(workdir.file("core.kernel"))
    _, offset, _ = core.segment_of(main_stack_address(rc, core))
    cut_core = CoreFile(core.truncated_copy(workdir.file("core.cut"), offset))
    os.unlink(core.path)
    native = cli_report(cut_core.path, "--native")
    plain = cli_report(cut_core.path)
    assert {t["thread_id"]: stack(t) for t in native["threads"]} == {
        t["thread_id"]: stack(t) for t in plain["threads"]}
    mt = main_thread(rc.truth)
    t = report_threads(native)[mt["thread_id"]]
    assert any(is_native_loss(f) for f in t["frames"]), t["frames"]

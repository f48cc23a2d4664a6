"""--why's `state` and `syscall` of each thread (docs/report.md, `state` and `syscall`),
checked against tests/scenarios/why_state.py: the scenario names what each thread does; which
system call that is comes from the kernel, never from a per-interpreter list: live from
/proc/PID/task/TID/syscall read around pyunwind's own read, from a core from the core's
NT_PRSTATUS `orig_rax` read here. Live (`pid PID --why --json`), from a gcore core (`core CORE
--why --json`), and gdb's `py-why --json` on that core."""

import ast
import re
import struct

import pytest

import harness
from test_gil_gc_markers import new_core, wait_parked
from test_stacks import check_report, expected, got, json_from, run_gdb
from test_why_waits import cli

CLI_TIMEOUT = 60
INTERPS = harness.pick(["pyenv-3.10", "pyenv-3.12", "debian-3.11", "debian-3.14"])
GC_INTERPS = harness.pick(["pyenv-3.10", "pyenv-3.12", "debian-3.14"])
SOURCES = ["live", "core"]
# x86-64 system call numbers and names, from the kernel's own header (the CLI's table has the
# same source: src/arch/syscalls_x86_64.rs).
UNISTD_64 = "/usr/include/x86_64-linux-gnu/asm/unistd_64.h"

# What a thread does (the truth's `doing`) -> (its state, the system calls it may show). The
# exact call is the kernel's: the test takes it from /proc or the core and checks it is one of
# these. `time.sleep` is select() on 3.10 (glibc: pselect6) and clock_nanosleep from 3.11. Once
# a stop (gcore's) has interrupted a sleep or a poll, the kernel resumes it as restart_syscall
# (kernel/time/hrtimer.c `hrtimer_nanosleep`, fs/select.c `do_sys_poll`: -ERESTART_RESTARTBLOCK);
# reads, recv and untimed futex waits restart as themselves.
DOING = {
    "read": ("syscall", {"read"}),
    "sleep": ("syscall", {"clock_nanosleep", "pselect6", "select", "restart_syscall"}),
    "recv": ("syscall", {"recvfrom"}),
    "poll": ("syscall", {"poll", "ppoll", "restart_syscall"}),
    "lock": ("syscall", {"futex"}),
    "loop": ("loop_idle", {"epoll_wait", "epoll_pwait", "epoll_pwait2"}),
}

NT_PRSTATUS = 1
# `struct elf_prstatus` of x86-64 (linux/elfcore.h): pr_pid at 32, pr_reg (user_regs_struct,
# sys/user.h) at 112; orig_rax is its 16th register.
PRSTATUS_PID = 32
PRSTATUS_ORIG_RAX = 112 + 8 * 15
NOT_IN_SYSCALL = (1 << 64) - 1


def syscall_names():
    names = {}
    with open(UNISTD_64, encoding="ascii") as f:
        for line in f:
            m = re.match(r"#define __NR_(\w+)\s+(\d+)\s*$", line)
            if m:
                names[int(m.group(2))] = m.group(1)
    return names


NAMES = syscall_names()


def proc_syscall(pid, tid):
    """The name of the system call /proc shows `tid` blocked in; None when it is in none."""
    with open("/proc/%d/task/%d/syscall" % (pid, tid), encoding="ascii") as f:
        first = f.read().split()[0]
    if first == "running" or int(first) < 0:
        return None
    return NAMES.get(int(first), first)


def core_syscalls(path):
    """{LWP: name of the system call its NT_PRSTATUS orig_rax names, None for none}."""
    with open(path, "rb") as f:
        data = f.read()
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    out = {}
    for i in range(phnum):
        p_type, _, p_offset, _, _, p_filesz = struct.unpack_from("<IIQQQQ", data,
                                                                 phoff + i * phentsize)
        if p_type != 4:  # PT_NOTE
            continue
        pos, end = p_offset, p_offset + p_filesz
        while pos + 12 <= end:
            namesz, descsz, n_type = struct.unpack_from("<III", data, pos)
            pos += 12
            name = data[pos:pos + namesz].rstrip(b"\0")
            pos += (namesz + 3) & ~3
            if n_type == NT_PRSTATUS and name == b"CORE":
                lwp, = struct.unpack_from("<I", data, pos + PRSTATUS_PID)
                nr, = struct.unpack_from("<Q", data, pos + PRSTATUS_ORIG_RAX)
                out[lwp] = None if nr == NOT_IN_SYSCALL else NAMES.get(nr, str(nr))
            pos += (descsz + 3) & ~3
    return out


# uvloop (tools/uvloop.sh) has wheels from cp311 on: its idle loop is a thread of the scenario
# there.
UVLOOP_MIN_MINOR = 11


def uvloop_env(interp):
    if interp.minor < UVLOOP_MIN_MINOR:
        return {}
    return {"PYUNWIND_UVLOOP": str(harness.cache_dir() / "uvloop" / ("cp3%d" % interp.minor))}


@pytest.fixture(scope="module", params=INTERPS, ids=lambda i: i.id)
def scenario(request):
    with harness.Scenario(request.param, "why_state", env=uvloop_env(request.param)) as sc:
        sc.core = sc.make_core()
        sc.core_calls = core_syscalls(sc.core)
        yield sc




def by_name(r):
    return {t["name"]: t for t in r["threads"]}


def kernel_calls(sc, source):
    """{thread name: the system call the kernel shows it in}, for the truth's threads."""
    natives = {t["name"]: t["native_id"] for t in sc.truth["threads"]}
    if source == "core":
        return {name: sc.core_calls[n] for name, n in natives.items()}
    return {name: proc_syscall(sc.pid, n) for name, n in natives.items()}


@pytest.mark.parametrize("source", SOURCES)
def test_each_thread_state_and_syscall(scenario, source):
    sc = scenario
    before = kernel_calls(sc, source)
    r = json_from(cli(sc, source, "--json"))
    after = kernel_calls(sc, source)
    assert before == after, "a thread moved while pyunwind read it: %r %r" % (before, after)
    threads = by_name(r)
    assert set(threads) == set(sc.truth["doing"]), sorted(threads)
    for name, doing in sc.truth["doing"].items():
        state, calls = DOING[doing]
        t = threads[name]
        assert before[name] in calls, (name, before[name])
        assert (t["state"], t["syscall"]) == (state, before[name]), (name, t)
        assert t["holds_gil"] is (None if sc.truth["free_threaded"] else False), (name, t)
        truth = next(tt for tt in sc.truth["threads"] if tt["name"] == name)
        assert got(t["frames"]) == expected(truth["frames"]), name


@pytest.mark.parametrize("source", SOURCES)
def test_text_header_names_the_syscall(scenario, source):
    sc = scenario
    text = cli(sc, source)
    reader = next(t["native_id"] for t in sc.truth["threads"] if t["name"] == "reader")
    assert '\nThread %d "reader" [syscall: read]:' % reader in "\n" + text, text
    looper = next(t["native_id"] for t in sc.truth["threads"] if t["name"] == "looper")
    assert re.search(r'\nThread %d "looper" \[loop_idle: epoll_p?wait2?\]:' % looper,
                     "\n" + text), text


def test_gdb_py_why_on_the_core(scenario):
    """gdb opens the core itself (pyunwind-memory auto): the same registers, the same states
    and frames as the CLI's."""
    sc = scenario
    out, _ = run_gdb(sc.interp, "py-why --json", core=sc.core)
    ours = by_name(json_from(out))
    cli_report = by_name(json_from(cli(sc, "core", "--json")))
    for name in sc.truth["doing"]:
        g, c = ours[name], cli_report[name]
        assert got(g["frames"]) == got(c["frames"]), name
        assert (g["state"], g["syscall"]) == (c["state"], c["syscall"]), name


def test_gdb_debugger_memory_reads_gdbs_registers(scenario):
    """Memory read through gdb (`set pyunwind-memory debugger`) has no core notes or /proc:
    py-why takes each thread's system call from gdb's registers (`$orig_rax` and the argument
    registers), so the states, system calls and frames are the CLI's."""
    sc = scenario
    out, _ = run_gdb(sc.interp, "set pyunwind-memory debugger", "py-why --json", core=sc.core)
    ours = by_name(json_from(out))
    cli_report = by_name(json_from(cli(sc, "core", "--json")))
    for name in sc.truth["doing"]:
        g, c = ours[name], cli_report[name]
        assert (g["state"], g["syscall"]) == (c["state"], c["syscall"]), (name, g, c)
        assert g["state"] is not None, (name, g)
        assert got(g["frames"]) == got(c["frames"]), name


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("interp", GC_INTERPS, ids=lambda i: i.id)
def test_a_collection_stopped_in_a_finalizer_is_gc(interp, source):
    """tests/scenarios/gc_finalizer.py: the collector's thread sleeps in a finalizer: `gc`
    wins over the system call, which is still named."""
    with harness.Scenario(interp, "gc_finalizer") as sc:
        main = sc.truth["threads"][0]
        core = sc.make_core() if source == "core" else None
        calls = core_syscalls(core) if core else None
        target = ["pid", str(sc.pid)] if source == "live" else ["core", core]
        rc, out, err = harness.run([harness.cli_path()] + target + ["--why", "--json"],
                                   timeout=CLI_TIMEOUT)
        harness.assert_no_panic(out + err, rc)
        assert rc == 0, err
        t = json_from(out)["threads"][0]
        kernel = calls[main["native_id"]] if calls else proc_syscall(sc.pid, main["native_id"])
        if sc.truth["free_threaded"]:
            assert t["state"] in (None, "syscall")
        else:
            assert (t["state"], t["syscall"]) == ("gc", kernel), t
        assert kernel in DOING["sleep"][1]


# Cores of the spinning process looked at, at most, for a thread waiting for the GIL.
GIL_STOPS = 3


# The GIL as gdb reads it from debug info: `_PyRuntime.ceval.gil` up to 3.11, the main
# interpreter's `ceval.gil` pointer from 3.12 (Include/internal/pycore_ceval_state.h).
GIL_EXPRESSIONS = {10: "&_PyRuntime.ceval.gil", 11: "&_PyRuntime.ceval.gil"}
GIL_EXPRESSION_312 = "_PyRuntime.interpreters.main->ceval.gil"
# The sid 3.14 build's GIL is read with its detached debug info (the dbgsym interpreter's).
GIL_DEBUG_INTERPS = {"debian-3.14": "debian-3.14-dbgsym"}
# Run by gdb on the core, with EXPR set: the GIL's address, `locked`, and the native id of the
# thread `last_holder` names while locked (else None). 3.10 to 3.12 wrap the fields in
# _Py_atomic_int / _Py_atomic_address (`_value`). PyThreadState.thread_id is the thread's
# pthread_t, which on x86-64 glibc is its TCB, the thread's $fs_base: gdb's own registers name
# the thread, with or without libthread_db.
GIL_TRUTH_SCRIPT = r"""
import gdb
def plain(v):
    return v["_value"] if v.type.strip_typedefs().code == gdb.TYPE_CODE_STRUCT else v
gil = gdb.parse_and_eval(EXPR).dereference()
locked = int(plain(gil["locked"]))
last = int(plain(gil["last_holder"]))
holder = None
if locked:
    pthread = int(gdb.parse_and_eval("((PyThreadState *) %d)->thread_id" % last))
    holder = []
    for thread in gdb.selected_inferior().threads():
        thread.switch()
        if int(gdb.parse_and_eval("$fs_base")) == pthread:
            holder.append(thread.ptid[1])
print("GIL=%r" % ((int(gil.address), locked, holder),))
"""


def gil_truth(interp, core):
    """(the GIL's address, the native id of the thread holding it or None) in `core`, read by
    gdb from the interpreter's debug info: the truth `holds_gil`, `gil_wait` and `waiting`'s
    object and owner are compared with."""
    debug = GIL_DEBUG_INTERPS.get(interp.id)
    debug_dir = (harness.pick([debug])[0].debug_dir if debug else None) or "/nonexistent"
    expr = GIL_EXPRESSIONS.get(interp.minor, GIL_EXPRESSION_312)
    rc, out, err = harness.run(
        [*harness.gdb_argv(), "-nx", "-batch", "-iex", "set debuginfod enabled off",
         "-iex", "set debug-file-directory %s" % debug_dir, interp.exe, core,
         "-ex", "python EXPR = %r" % expr, "-ex", "python exec(%r)" % GIL_TRUTH_SCRIPT],
        timeout=CLI_TIMEOUT)
    found = [line for line in out.splitlines() if line.startswith("GIL=")]
    assert rc == 0 and len(found) == 1, (rc, out, err)
    address, locked, holder = ast.literal_eval(found[0][4:])
    assert locked in (0, 1), found
    if not locked:
        return address, None
    assert holder is not None and len(holder) == 1, ("no thread of the core is the holder", found)
    return address, holder[0]


def check_gil_states(threads, calls, truth):
    """The GIL side of a --why report's `threads` at a stop where every futex wait of a thread
    that does not hold the GIL is a wait for the GIL (the GIL's mutex or condition variables):
    `calls` {native id: the system call the kernel shows it in}, `truth` gil_truth's (address,
    holder). The holder (and nobody else) `holds_gil`, and is `running` or in its system call;
    every other thread is `gil_wait` exactly when the kernel has it in futex, waiting for the
    GIL at that address with the holder as owner. Returns how many wait."""
    gil, holder = truth
    assert holder is None or holder in [t["native_id"] for t in threads], (holder, threads)
    waits = 0
    for t in threads:
        call = calls[t["native_id"]]
        assert t["syscall"] == call, t
        assert t["holds_gil"] is (t["native_id"] == holder), (holder, t)
        if t["native_id"] == holder:
            assert t["state"] == ("running" if call is None else "syscall"), t
            if call == "pause":
                # gil_held.py's holder blocks in libc's pause() called through ctypes: a wait
                # in native code, named by the ctypes function pointer (a CDLL(None)'s: no
                # library).
                assert t["waiting"] == {"kind": "native", "object": None, "type": None,
                                        "owner": None, "frame": 0, "function": "pause",
                                        "native_function": None}, t
            else:
                assert t["waiting"] is None, t
        elif call == "futex":
            assert t["state"] == "gil_wait", t
            assert t["waiting"] == {"kind": "gil", "object": gil, "type": None, "owner": holder,
                                    "frame": 0}, (truth, t)
            waits += 1
        else:
            assert t["state"] in (None, "syscall") and t["waiting"] is None, t
    return waits


@pytest.mark.parametrize("interp", GC_INTERPS, ids=lambda i: i.id)
def test_spinning_threads_run_or_wait_for_the_gil(interp):
    """tests/scenarios/gil_wait.py from cores: four threads spin in Python; the GIL's holder (as
    gdb reads `locked` and `last_holder` from debug info) is `running`, a thread blocked on the
    GIL is `gil_wait` (in futex: once ready, the spinners make no other futex wait). A waiter
    between two waits at the stop is in no system call (null), so across GIL_STOPS cores at
    least one must wait. A waiter waits in `spin` or `main_spin`, or in `signal_ready` when the
    main thread is just back from closing the fifo that said ready.
    A thread that waits for the GIL has `waiting` kind `gil`: the GIL's address (gdb's), and the
    thread that holds it as owner (null between two holders)."""
    with harness.Scenario(interp, "gil_wait") as sc:
        waits = 0
        for stop in range(GIL_STOPS):
            core = new_core(sc, stop)
            calls = core_syscalls(core)
            rc, out, err = harness.run([harness.cli_path(), "core", core, "--why", "--json"],
                                       timeout=CLI_TIMEOUT)
            assert rc == 0, err
            threads = json_from(out)["threads"]
            waits += check_gil_states(threads, calls, gil_truth(interp, core))
            for t in threads:
                if t["state"] == "gil_wait":
                    # The main thread may still be on its way back from signalling ready (the
                    # fifo's close releases the GIL, so it waits for it there).
                    names = [f["function"] for f in t["frames"] if f["kind"] == "python"]
                    assert names[0] in ("spin", "main_spin") or names[:4] == [
                        "signal_ready", "write_truth", "ready", "main_spin"], names
            if waits:
                break
        assert waits >= 1


def broken_gil_reports(threads, waiter, holder):
    """Copies of a --why report's `threads` (one waiter, one holder) each wrong in one way
    check_gil_states must catch: the GIL held by a waiter, by nobody, a wait's object or owner
    off, a waiter not shown waiting."""
    def mutated(change):
        copy = [dict(t, waiting=dict(t["waiting"]) if t["waiting"] else None) for t in threads]
        change({t["native_id"]: t for t in copy})
        return copy

    def moved_holder(by):
        by[holder]["holds_gil"], by[waiter]["holds_gil"] = False, True

    def nobody(by):
        by[holder]["holds_gil"] = False

    def object_off(by):
        by[waiter]["waiting"]["object"] += 8

    def owner_off(by):
        by[waiter]["waiting"]["owner"] = waiter

    def not_waiting(by):
        by[waiter].update(state="syscall", waiting=None)

    return [mutated(c) for c in (moved_holder, nobody, object_off, owner_off, not_waiting)]


@pytest.mark.parametrize("interp", GC_INTERPS, ids=lambda i: i.id)
def test_a_held_gil_and_its_waiters(interp):
    """tests/scenarios/gil_held.py: the main thread holds the GIL in pause(), three threads
    wait for it in take_gil. Live, then from the core (the process's first stop: see the
    scenario), against the scenario's own record (holder, waiters, frames: check_report) and
    gdb's reading of the GIL (address, `locked`, `last_holder`) on the core; and the same check
    on broken copies of the report must fail."""
    with harness.Scenario(interp, "gil_held") as sc:
        waiters = set(sc.truth["gil_waiters"])
        holder = sc.truth["holder_native_id"]
        wait_parked(sc)
        natives = [t["native_id"] for t in sc.truth["threads"]]
        live = json_from(cli(sc, "live", "--json"))
        live_calls = {n: proc_syscall(sc.pid, n) for n in natives}
        core = sc.core = sc.make_core()
        core_calls = core_syscalls(core)
        truth = gil_truth(interp, core)
        assert truth[1] == holder, (truth, holder)
        assert live_calls == core_calls == {n: "pause" if n == holder else "futex" for n in natives}
        core_report = json_from(cli(sc, "core", "--json"))
        for report, calls in ((live, live_calls), (core_report, core_calls)):
            check_report(report, sc.truth, live_cli=report is live)
            assert check_gil_states(report["threads"], calls, truth) == len(waiters)
        for broken in broken_gil_reports(core_report["threads"], min(waiters), holder):
            with pytest.raises(AssertionError):
                check_gil_states(broken, core_calls, truth)


def test_free_threaded_spinners_are_running():
    """A free-threaded build has no GIL to hold: a thread attached to its interpreter
    (`PyThreadState.state`, 3.13+) and in no system call is `running`. The gil_wait scenario's
    four threads spin in Python, so at a stop each is running or, between two bytecodes, in a
    system call (a stop-the-world pause of the collector); never gil_wait."""
    interp = harness.pick(["ft-3.13t"])[0]
    with harness.Scenario(interp, "gil_wait") as sc:
        core = new_core(sc, 0)
        calls = core_syscalls(core)
        rc, out, err = harness.run([harness.cli_path(), "core", core, "--why", "--json"],
                                   timeout=CLI_TIMEOUT)
        assert rc == 0, err
        threads = json_from(out)["threads"]
        spinners = [t for t in threads if t["name"].startswith("spinner-")
                    or t["name"] == "MainThread"]
        assert len(spinners) == 4, [t["name"] for t in threads]
        running = 0
        for t in spinners:
            call = calls[t["native_id"]]
            assert t["holds_gil"] is None and t["syscall"] == call, t
            assert t["state"] == ("running" if call is None else "syscall"), t
            running += call is None
        assert running >= 1

"""lldb 22's frame provider off lldb's main thread (lldb's event-handler thread printing a stop)
only tries the API lock of its own target: while a command holds it, the provider does not
read its input frames, and with nothing read ahead falls back to lldb's own frames followed by
every Python frame read from the thread state. The lock of another (the selected) target does
not make it fall back. The script makes the providers of a stop itself, under the lock, before
lldb prints the stop, and reads every thread's frames ahead of a registration.

From lldb 24 (llvm PR #208242; 23.1.x lacks it), code that lldb calls back takes no API lock:
the provider lldb's event thread makes while a command holds the lock reads its frames itself.
"""

import os
import re

import pytest

import harness
from test_lldb import lldb_major, lldb_path
from test_stacks import expected

INTERP = harness.pick(["pyenv-3.12"])[0]
HELPER = harness.repo_root() / "tests" / "integration" / "lldb_lock_helper.py"
SCRIPT = harness.repo_root() / "lldb-scripts" / "pyunwind_lldb.py"


def callbacks_skip_the_api_lock():
    """Whether this lldb's callbacks into a provider (its __init__, get_frame_at_index) skip the
    target's API lock (lldb 24+): there the lock test's `try_lock` succeeds, another thread's
    hold notwithstanding."""
    return lldb_major() >= 24


def provider_rows(core, held):
    cmd = [lldb_path(), "-b", "--no-lldbinit", INTERP.exe, "-c", core,
           "-o", "command script import %s" % SCRIPT,
           "-o", "command script import %s" % HELPER,
           # lldb's own frames as the provider's input.
           "-o", "pyunwind set frame-provider off",
           # A second target, selected: the lock the provider used to try.
           "-o", "target create %s" % INTERP.exe,
           "-o", "pyunwind-test-provider-rows %s" % held]
    rc, out, err = harness.run(cmd, 120, env=harness.child_env(INTERP.env))
    assert rc == 0 and "Traceback" not in out + err, out + err
    lines = out.splitlines()
    return ([line[len("@@NATIVE "):] for line in lines if line.startswith("@@NATIVE ")],
            [line[len("@@ROW "):] for line in lines if line.startswith("@@ROW ")])


def test_no_provider_before_lldb_22():
    """lldb 19 has no scripted frame providers: the script registers none (the tests below
    are about lldb 22+)."""
    cmd = [lldb_path(), "-b", "--no-lldbinit", "-o", "command script import %s" % SCRIPT,
           "-o", "script print('@@', hasattr(lldb.SBTarget, 'RegisterScriptedFrameProvider'), "
                 "__import__('pyunwind_lldb_host').HAS_PROVIDER_API)"]
    rc, out, err = harness.run(cmd, 60)
    want = "@@ True True" if lldb_major() >= 22 else "@@ False False"
    assert rc == 0 and want in out.splitlines(), out + err


@pytest.fixture(scope="module")
def shapes():
    if lldb_major() < 22:
        pytest.fail("the frame provider needs lldb 22+: run with lldb 22 (PYUNWIND_LLDB)",
                    pytrace=False)
    with harness.Scenario(INTERP, "shapes") as sc:
        sc.make_core()
        yield sc


def python_rows(sc, suffix=""):
    return ["%s%s at %s:%d" % (f, suffix, os.path.basename(p), l)
            for f, p, l in expected(sc.truth["threads"][0]["frames"])]


def test_own_lock_held_falls_back_to_native_then_python(shapes):
    native, rows = provider_rows(shapes.make_core(), "own")
    # lldb's own frames, unchanged (eval loop included), then every Python frame.
    assert "_PyEval_EvalFrameDefault" in native and native[-1] == "_start", native
    assert rows == native + python_rows(shapes, " [from thread state]"), rows


def test_another_targets_lock_does_not(shapes):
    native, rows = provider_rows(shapes.make_core(), "other")
    # The input was read: Python frames in place of the eval loop, in order.
    assert [r for r in rows if " at " in r] == python_rows(shapes), rows
    kept = [r for r in rows if " at " not in r]
    assert "_PyEval_EvalFrameDefault" not in kept and kept[-1] == "_start", rows
    it = iter(native)
    assert all(r in it for r in kept), (kept, native)


def register_held(shapes, *args):
    """`pyunwind-test-register-held ARGS` on the core of `shapes`, then `bt`: the `@@MADE` lines'
    THREAD LOCK FRAMES, and what `bt` printed (after lldb's echo of the commands before it)."""
    cmd = [lldb_path(), "-b", "--no-lldbinit", INTERP.exe, "-c", shapes.make_core(),
           "-o", "command script import %s" % SCRIPT,
           "-o", "command script import %s" % HELPER,
           "-o", " ".join(("pyunwind-test-register-held",) + args), "-o", "script print('@@BT')", "-o", "bt"]
    rc, out, err = harness.run(cmd, 180, env=harness.child_env(INTERP.env))
    assert rc == 0 and "Traceback" not in out + err, out + err
    made, bt = out.split("\n@@BT\n")
    return re.findall(r"^@@MADE (\w+ \w+ \w+)$", made, re.M), out[len(made):]


def test_providers_made_while_the_lock_is_held_show_python_frames(shapes):
    """Registering the provider makes lldb's event-handler thread print each thread's frame 0,
    which creates the providers there, while a command on the main thread may hold the target's
    API lock (here the whole time; a `bt` right after the import holds it while it waits for
    those frames). The providers take the frames read by the registering thread as they are made
    (the one thread read ahead with as many frames; the plan checks it is theirs): the next `bt`
    on the main thread has the Python frames in place of the eval loop, none after lldb's."""
    made, bt = register_held(shapes)
    # Made on the event thread while the main thread held the lock (each thread of the core);
    # lldb 24 lets them read lldb's frames there.
    want = "other free read" if callbacks_skip_the_api_lock() else "other busy ahead"
    assert made == [want] * len(shapes.truth["threads"]), bt
    assert re.findall(r"frame #\d+: (\S+ at \S+\.py:\d+)", bt) == python_rows(shapes), bt
    assert "[from thread state]" not in bt and "_PyEval_EvalFrameDefault" not in bt, bt


def test_providers_made_at_a_later_stop_while_the_lock_is_held(shapes):
    """As above with nothing read ahead, as at a stop after the registration: the providers
    lldb's event thread makes while a command holds the API lock. lldb 24 lets them read lldb's
    frames there (its callbacks take no API lock): `bt` has the Python frames in place. Before
    24 they cannot, and lldb keeps what such a provider hands out for the whole stop: `bt` is
    lldb's own frames, then every Python frame of the thread state."""
    made, bt = register_held(shapes, "no-ahead")
    threads = len(shapes.truth["threads"])
    if callbacks_skip_the_api_lock():
        assert made == ["other free read"] * threads, bt
        assert re.findall(r"frame #\d+: (\S+ at \S+\.py:\d+)", bt) == python_rows(shapes), bt
        assert "[from thread state]" not in bt and "_PyEval_EvalFrameDefault" not in bt, bt
    else:
        assert made == ["other busy none"] * threads, bt
        rows = bt_rows(bt)
        names = [re.match(r"(?:0x[0-9a-f]+ [^`\s]+`)?([^\s(]+)", row).group(1) for row in rows]
        last = names.index("_start")
        assert "_PyEval_EvalFrameDefault" in names[:last], bt
        tail = [re.sub(r" \[synthetic\]$", "", row) for row in rows[last + 1:]]
        assert tail == python_rows(shapes, " [from thread state]"), bt


def bt_rows(bt):
    """The frames of `bt`'s listing in order, without lldb's printouts of the stop (each a frame
    #0 without the selected frame's star), which its event thread may print in between."""
    listed = [(int(n), row) for star, n, row in re.findall(r"^ *(\* )?frame #(\d+): (.*)$", bt, re.M)
              if n != "0" or star]
    assert [n for n, _ in listed] == list(range(len(listed))), bt
    return [row for _, row in listed]


def test_provider_registered_on_a_core_loaded_after_import(shapes):
    """The script imported before any target (~/.lldbinit, lldb-dap's initCommands): the core
    loaded next has the provider by the time of its first command. The stop hook the script
    puts on the dummy target registers it on the thread that loads the core (the new-target
    watcher, a thread of its own, is stopped here: it lost that race to lldb-dap). It stays on
    that target (a hook that deletes itself crashes lldb at the next resume), beside a user's
    own stop hook, which still runs."""
    cmd = [lldb_path(), "-b", "--no-lldbinit", "-o", "command script import %s" % SCRIPT,
           # The watcher's next look is an hour away once its current sleep ends.
           "-o", "script import time, pyunwind_lldb_hooks; pyunwind_lldb_hooks.TARGET_POLL_SECONDS = 3600; "
                 "time.sleep(0.3)",
           "-o", "target stop-hook add -o 'script print(\"@@USER-HOOK\")'",
           "-o", "target create %s --core %s" % (INTERP.exe, shapes.make_core()),
           "-o", "bt", "-o", "script print('@@HOOKS')", "-o", "target stop-hook list"]
    rc, out, err = harness.run(cmd, 120, env=harness.child_env(INTERP.env))
    assert rc == 0 and "Traceback" not in out + err, out + err
    bt, hooks = out.split("\n@@HOOKS\n")
    assert re.findall(r"frame #\d+: (\S+ at \S+\.py:\d+)", bt) == python_rows(shapes), bt
    assert "@@USER-HOOK" in out
    # By the name the docs give: the class as lldb finds it in the module it imported.
    assert "Class:pyunwind_lldb.ProviderStopHook" in hooks and "Hook: 2" in hooks, hooks


def test_a_provider_registered_before_its_process(shapes):
    """Imported before any target (~/.lldbinit, lldb-dap's initCommands), the script starts no
    new-target watcher: it registered the provider as a target was made, before its process
    (lldb-dap's core), with nothing to read ahead. Registered there all the same (`pyunwind set
    frame-provider on` on a target without a process), the providers of the attach's stop read
    lldb's frames: `bt` has the Python frames in place."""
    cmd = [lldb_path(), "-b", "--no-lldbinit", "-o", "command script import %s" % SCRIPT,
           "-o", "command script import %s" % HELPER,
           "-o", "target create %s" % INTERP.exe, "-o", "pyunwind set frame-provider on",
           "-o", "pyunwind-test-watch-made", "-o", "process attach -p %d" % shapes.pid,
           "-o", "script import time; time.sleep(0.3)", "-o", "pyunwind-test-print-made",
           "-o", "script print('@@BT')", "-o", "bt"]
    rc, out, err = harness.run(cmd, 180, env=harness.child_env(INTERP.env))
    assert rc == 0 and "Traceback" not in out + err, out + err
    made, bt = out.split("\n@@BT\n")
    assert "@@WATCHERS 0" in made.splitlines(), out
    assert re.findall(r"^@@MADE \w+ \w+ (\w+)$", made, re.M) == ["read"] * len(shapes.truth["threads"]), out
    assert re.findall(r"frame #\d+: (\S+ at \S+\.py:\d+)", bt) == python_rows(shapes), bt
    assert "[from thread state]" not in bt and "_PyEval_EvalFrameDefault" not in bt, bt


def test_attach_from_lldbinit_shows_python_frames_in_place(shapes, tmp_path):
    """A user's `lldb -p PID` with the script imported from ~/.lldbinit (as `pyunwind
    install-lldb` sets up): the stop hook registers the provider on lldb's private state thread
    while it handles the attach's stop, and lldb's event thread makes the providers of the stop
    it prints meanwhile. There the SB API sees no stopped process: the input's thread and frames
    read as invalid (no names, no pcs), and such a provider takes the frames read ahead. Each run
    of three has the Python frames in place of the eval loop (it fell back in every run on lldb
    24 and in about half on lldb 22 before)."""
    (tmp_path / ".lldbinit").write_text("command script import %s\n" % SCRIPT)
    env = dict(harness.child_env(INTERP.env), HOME=str(tmp_path))
    for _ in range(3):
        rc, out, err = harness.run([lldb_path(), "-b", "-p", str(shapes.pid), "-o", "bt"], 120, env=env)
        assert rc == 0 and "Traceback" not in out + err, out + err
        bt = out[out.index("(lldb) bt\n"):]
        assert re.findall(r"frame #\d+: (\S+ at \S+\.py:\d+)", bt) == python_rows(shapes), bt
        assert "[from thread state]" not in bt and "_PyEval_EvalFrameDefault" not in bt, bt

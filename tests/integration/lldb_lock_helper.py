"""lldb command for the frame-provider lock test only (test_lldb_lock.py):

    pyunwind-test-provider-rows HELD   build our frame provider for the selected thread of the
        first target on a thread other than lldb's main one, while the main thread holds the
        API lock of HELD ("own": that target's; "other": the last target's), as lldb's
        event-handler thread does while a command holds a lock; then print each frame the
        provider hands out, one `@@ROW name` line each (after lldb's own, `@@NATIVE name`).

The input frames are lldb's own (run it with `pyunwind set frame-provider off`).

    pyunwind-test-register-held [no-ahead]   register our frame provider on the selected
        target while holding that target's API lock, as a command that waits for frames does,
        until lldb's event-handler thread (printing each thread's frame 0 again, as registering
        makes it do) has made a provider; then print one `@@MADE THREAD LOCK FRAMES` line per
        provider made meanwhile (THREAD: main or other; LOCK: busy when the provider's __init__
        could not take the API lock as it returned, else free; FRAMES: read, when it read
        lldb's frames itself, ahead, when it took those read ahead, else none). `no-ahead`:
        nothing read ahead of the registration, as at a later stop.

    pyunwind-test-watch-made, then pyunwind-test-print-made   note each of our frame providers
        made in between, and print one `@@MADE THREAD LOCK FRAMES` line for each, then
        `@@WATCHERS N`: how many new-target watcher threads run.
"""

import threading
import time

import lldb

import pyunwind_lldb_provider as P


def rows(debugger, command, exe_ctx, result, internal_dict):
    target = debugger.GetTargetAtIndex(0)
    held = target if command.strip() == "own" else debugger.GetTargetAtIndex(debugger.GetNumTargets() - 1)
    frames = target.GetProcess().GetSelectedThread().GetFrames()
    for i in range(frames.GetSize()):
        print("@@NATIVE %s" % frames.GetFrameAtIndex(i).GetFunctionName())
    args, _ = P._provider_args(target)
    made = {}
    mutex = held.GetAPIMutex()
    mutex.lock()
    try:
        worker = threading.Thread(target=lambda: made.setdefault(
            "provider", P.PythonFrameProvider(frames, args)))
        worker.start()
        worker.join()
    finally:
        mutex.unlock()
    provider = made["provider"]
    index = 0
    while True:
        row = provider.get_frame_at_index(index)
        if row is None:
            break
        if isinstance(row, int):
            print("@@ROW %s" % frames.GetFrameAtIndex(row).GetFunctionName())
        else:
            entry = row.get_symbol_context().GetLineEntry()
            print("@@ROW %s at %s:%d" % (row.get_function_name(), entry.GetFileSpec().GetFilename(),
                                         entry.GetLine()))
        index += 1


# How long pyunwind-test-register-held waits for lldb's event thread to make a provider.
MAX_WAIT_SECONDS = 60


def register_held(debugger, command, exe_ctx, result, internal_dict):
    target = debugger.GetSelectedTarget()
    mutex = target.GetAPIMutex()
    made = []
    P.settings["frame-provider"] = "off"
    P.sync_provider(target)
    init = watch_providers(mutex, made)
    read_all_threads = P._read_all_threads
    if command.strip() == "no-ahead":
        P._read_all_threads = lambda target, token: None
    mutex.lock()
    try:
        P.settings["frame-provider"] = "on"
        error = P.sync_provider(target)
        deadline = time.monotonic() + MAX_WAIT_SECONDS
        while not any(not main for main, _, _ in made) and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        mutex.unlock()
        P.PythonFrameProvider.__init__ = init
        P._read_all_threads = read_all_threads
    if error:
        print("@@ERROR %s" % error)
    print_made(made)


def watch_providers(mutex, made):
    """Have each PythonFrameProvider made from now on noted in `made` (see print_made); returns
    the class's own __init__, to be put back."""
    cls = P.PythonFrameProvider
    init = cls.__init__

    def watched(self, input_frames, args):
        init(self, input_frames, args)
        busy = not mutex.try_lock()
        if not busy:
            mutex.unlock()
        frames = "none" if self.pcs is None else "ahead" if self.ahead is not None else "read"
        made.append((threading.current_thread() is threading.main_thread(), busy, frames))

    cls.__init__ = watched
    return init


def print_made(made):
    for main, busy, frames in made:
        print("@@MADE %s %s %s" % ("main" if main else "other", "busy" if busy else "free", frames))


# What pyunwind-test-watch-made notes (see print_made) and the __init__ to put back.
_watched = {"made": [], "init": None}


def watch_made(debugger, command, exe_ctx, result, internal_dict):
    _watched["init"] = watch_providers(debugger.GetSelectedTarget().GetAPIMutex(), _watched["made"])


def print_watched(debugger, command, exe_ctx, result, internal_dict):
    P.PythonFrameProvider.__init__ = _watched["init"]
    print_made(_watched["made"])
    watchers = [t for t in threading.enumerate() if t.name == "pyunwind-targets"]
    print("@@WATCHERS %d" % len(watchers))


def __lldb_init_module(debugger, internal_dict):
    debugger.HandleCommand("command script add -f %s.rows pyunwind-test-provider-rows" % __name__)
    debugger.HandleCommand("command script add -f %s.register_held pyunwind-test-register-held" % __name__)
    debugger.HandleCommand("command script add -f %s.watch_made pyunwind-test-watch-made" % __name__)
    debugger.HandleCommand("command script add -f %s.print_watched pyunwind-test-print-made" % __name__)

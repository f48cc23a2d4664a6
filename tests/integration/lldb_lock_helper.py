"""lldb command for the frame-provider lock test only (test_lldb_lock.py):

    pyunwind-test-provider-rows HELD   build our frame provider for the selected thread of the
        first target on a thread other than lldb's main one, while the main thread holds the
        API lock of HELD ("own": that target's; "other": the last target's), as lldb's
        event-handler thread does while a command holds a lock; then print each frame the
        provider hands out, one `@@ROW name` line each (after lldb's own, `@@NATIVE name`).

The input frames are lldb's own (run it with `pyunwind set frame-provider off`).
"""

import threading

import lldb

import pyunwind_lldb_provider as P


def rows(debugger, command, exe_ctx, result, internal_dict):
    target = debugger.GetTargetAtIndex(0)
    held = target if command.strip() == "own" else debugger.GetTargetAtIndex(debugger.GetNumTargets() - 1)
    frames = target.GetProcess().GetSelectedThread().GetFrames()
    for i in range(frames.GetSize()):
        print("@@NATIVE %s" % frames.GetFrameAtIndex(i).GetFunctionName())
    args = P._provider_args(target)
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


def __lldb_init_module(debugger, internal_dict):
    debugger.HandleCommand("command script add -f %s.rows pyunwind-test-provider-rows" % __name__)

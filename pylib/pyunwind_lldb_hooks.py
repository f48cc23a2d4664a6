"""lldb: what runs at a target's stops and as targets are made, outside any command: the stop
hook that registers the frame provider and prepares arm64 cores and remote processes, and the
watcher that registers the provider on targets made later.
"""

import threading
import time

import lldb

import pyunwind_frontend as fe
from pyunwind_lldb_host import LldbHost, lldb_name, prepare_target, write_error_line
from pyunwind_lldb_provider import forget_earlier_stops, sync_provider

# How often the new-target watcher looks for lldb's events.
TARGET_POLL_SECONDS = 0.05


class ProviderStopHook:
    """Registers the frame provider on a target when it first stops (lldb 22+), and gives an
    arm64 core what lldb lacks (prepare_target; every lldb). lldb copies the dummy target's
    stop hooks to each target created later and runs them on the thread that attaches or loads
    the core, before anyone can ask that target for frames. The new-target watcher alone lost
    that race: lldb-dap answered `stackTrace` on a core before the watcher's thread saw the
    target in about half of the runs."""

    def __init__(self, target, extra_args, internal_dict):
        pass

    def handle_stop(self, exe_ctx, stream):
        provide(exe_ctx.GetTarget())
        # It stays, and does nothing new at later stops (each step is done once per target,
        # or a process's modules at each stop where it has more). A hook that
        # deletes itself crashes lldb at the next resume: lldb 19 walks the hook list itself
        # (every time, attached to a process, at `continue`), and lldb 22 did too in about one
        # run of five attached to qemu's gdb stub (a crash in memcpy on its private state
        # thread, at `continue` after `gdb-remote`).

        # True: the stop stands.
        return True


def provide(target):
    """prepare_target, then our frame provider on `target` as the setting says, every thread's
    frames read ahead (see pyunwind_lldb_provider._read_ahead): at the script's import and at
    each stop (ProviderStopHook), before lldb reports the stop. prepare_existing first: the
    modules and the address mask it gives lldb change lldb's frames (lldb drops the frame lists,
    and providers, made before), and the frames read ahead are read after them. Frames read
    ahead at an earlier stop are dropped (forget_earlier_stops)."""
    prepare_existing(target)
    forget_earlier_stops(target)
    sync_provider(target)


def add_provider_stop_hook(debugger):
    """ProviderStopHook on the dummy target, where `target stop-hook add` puts a hook while no
    target is selected (~/.lldbinit, lldb-dap's initCommands), and which every target made later
    copies; returns whether it went there. With a target selected it would go to that target,
    which has the provider already: the watcher covers targets made later."""
    if debugger.GetSelectedTarget().IsValid():
        return False
    result = lldb.SBCommandReturnObject()
    debugger.GetCommandInterpreter().HandleCommand(
        "target stop-hook add -P %s" % lldb_name("ProviderStopHook"), result)
    return True


def watch_new_targets(debugger):
    """Register the provider on targets created after this script was imported while a target
    was selected (none copies the hook it added to that target). lldb 22.1 sends class listeners
    no eBroadcastBitNewTargetCreated, but a new target loads its modules at once, and a
    provider registered on the dummy target is not copied to new ones."""
    listener = lldb.SBListener("pyunwind-targets")
    listener.StartListeningForEventClass(
        debugger, lldb.SBTarget.GetBroadcasterClassName(),
        lldb.SBTarget.eBroadcastBitNewTargetCreated | lldb.SBTarget.eBroadcastBitModulesLoaded)

    def loop():
        event = lldb.SBEvent()
        while True:
            # Never a blocking wait: lldb's SB calls keep the GIL, which would starve lldb's
            # own Python (commands, the frame provider) for as long as the wait lasts.
            if not listener.GetNextEvent(event):
                time.sleep(TARGET_POLL_SECONDS)
            elif lldb.SBTarget.EventIsTargetEvent(event):
                target = lldb.SBTarget.GetTargetFromEvent(event)
                if target.IsValid():
                    # A process's frames read ahead (see pyunwind_lldb_provider._read_ahead).
                    sync_provider(target, read_ahead=target.GetProcess().IsValid())

    threading.Thread(target=loop, name="pyunwind-targets", daemon=True).start()


def prepare_existing(target):
    """prepare_target outside a command: for a target whose core is loaded (or process
    attached) already."""
    process = target.GetProcess() if target is not None and target.IsValid() else None
    if process is None or not process.IsValid():
        return
    try:
        host = LldbHost(target, process, process.GetSelectedThread(), lldb.SBCommandReturnObject())
        # A process's modules when a command needs them: at the first stop of a stub, the
        # dynamic linker has made no list yet.
        prepare_target(host, modules=host.core_file() is not None)
    except Exception as e:
        write_error_line(target.GetDebugger(), fe.error_line(e, fe.loaded_core(), "lldb"))

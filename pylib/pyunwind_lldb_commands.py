"""lldb: the py-* commands (the same as in gdb, from pyunwind_frontend), the `pyunwind` command
for settings, and `register`, which sets up the commands, the frame provider and the stop hooks
when lldb imports the script (lldb-scripts/pyunwind_lldb.py).
"""

import os

import lldb

import pyunwind_frontend as fe
import pyunwind_lldb_provider as provider
from pyunwind_lldb_host import (HAS_PROVIDER_API, SETTING_CHOICES, LldbHost, lldb_name, prepare_target,
                                session, set_script_module, settings, state)
from pyunwind_lldb_hooks import ProviderStopHook, add_provider_stop_hook, prepare_existing, provide, watch_new_targets
from pyunwind_lldb_provider import (STAND_IN_SYMBOL, NoChildren, PythonLocalsRecognizer, repr_summary,
                                    sync_provider)

# The fe.Commands of this lldb, made at the first command.
_commands = None

# --- commands -----------------------------------------------------------------------------------


class _Command:
    """One py-* command; `name` is set by its subclass in COMMAND_CLASSES."""

    name = None

    def __init__(self, debugger, internal_dict):
        pass

    def get_short_help(self):
        return fe.Commands.HELP[self.name].splitlines()[0]

    def get_long_help(self):
        return fe.Commands.HELP[self.name]

    def __call__(self, debugger, command, exe_ctx, result):
        global _commands
        try:
            if _commands is None:
                _commands = fe.Commands(fe.core(), state, session)
            # The provider, if lldb created the target before importing us and the watcher
            # missed it: from the next stop on at least.
            sync_provider(exe_ctx.GetTarget())
            host = LldbHost(exe_ctx.GetTarget(), exe_ctx.GetProcess(), exe_ctx.GetThread(), result)
            prepare_target(host)
            _commands.run(self.name, host, command)
            result.SetStatus(lldb.eReturnStatusSuccessFinishResult)
        except Exception as e:
            result.SetError(fe.error_line(e, fe.loaded_core(), "lldb"))


class SettingsCommand:
    """`pyunwind set NAME VALUE` / `pyunwind show [NAME]`."""

    HELP = """Show or change pyunwind's settings.
Usage: pyunwind show [NAME]
       pyunwind set NAME VALUE
       pyunwind sysroot [DIR]
  sysroot DIR                  where the files of a core from another machine are (the
                               target's platform sysroot, as `platform select remote-linux
                               --sysroot DIR` sets it before a core is loaded); on an arm64
                               core lldb loads the modules it lacks from there. Without DIR:
                               the sysroot in effect
  memory auto|direct|debugger  where target memory is read: auto reads a core file or a local
                               process directly and anything else through lldb; debugger always
                               through lldb (SBProcess.ReadMemory)
  hide-internal on|off         whether bt hides CPython's call plumbing between Python frames
  frame-provider on|off        lldb 22+: Python frames in lldb's own bt (scripted frame provider)
  frame-addresses auto|on|off  lldb 22+: give each Python frame its interpreter frame's address
                               as pc, so that SBFrame users (lldb-dap, CodeLLDB, scripts) tell
                               the frames apart; auto: everywhere but the lldb command"""

    def __init__(self, debugger, internal_dict):
        pass

    def get_short_help(self):
        return self.HELP.splitlines()[0]

    def get_long_help(self):
        return self.HELP

    def __call__(self, debugger, command, exe_ctx, result):
        words = command.split()
        if words[:1] == ["sysroot"]:
            try:
                self._sysroot(exe_ctx, command.strip()[len("sysroot"):].strip(), result)
            except Exception as e:
                result.SetError(fe.error_line(e, fe.loaded_core(), "lldb"))
            return
        if words[:1] == ["show"] and len(words) <= 2:
            for name in words[1:] or sorted(settings):
                if name not in settings:
                    result.SetError("pyunwind: no setting %r" % name)
                    return
                result.Print("%s: %s\n" % (name, settings[name]))
            return
        if len(words) != 3 or words[0] != "set" or words[2] not in SETTING_CHOICES.get(words[1], ()):
            result.SetError("usage: pyunwind set NAME VALUE (see `help pyunwind`)")
            return
        settings[words[1]] = words[2]
        state.drop()
        if words[1] == "frame-provider":
            err = sync_provider(exe_ctx.GetTarget())
            if err:
                result.SetError(err)
                return
        result.SetStatus(lldb.eReturnStatusSuccessFinishNoResult)

    @staticmethod
    def _sysroot(exe_ctx, root, result):
        target = exe_ctx.GetTarget()
        if not target.IsValid():
            result.SetError("pyunwind: no target: load the core first (or give lldb the sysroot before "
                            "loading it: `platform select remote-linux --sysroot DIR`)")
            return
        host = LldbHost(target, exe_ctx.GetProcess(), exe_ctx.GetThread(), result)
        if not root:
            result.Print("sysroot: %s\n" % (host.sysroot() or "none"))
            return
        root = os.path.abspath(os.path.expanduser(root))
        if not os.path.isdir(root):
            result.SetError("pyunwind: no directory %s" % root)
            return
        # What `platform select --sysroot` sets, on the target's own platform (a platform
        # selected after the target was made is another one).
        target.GetPlatform().SetSDKRoot(root)
        prepare_target(host)
        result.SetStatus(lldb.eReturnStatusSuccessFinishNoResult)


def _command_class(name):
    cls_name = "Cmd_" + name.replace("-", "_")
    return cls_name, type(cls_name, (_Command,), {"name": name})


# The class of each py-* command, by the name lldb is given (`Cmd_py_bt`).
COMMAND_CLASSES = dict(_command_class(name) for name in fe.Commands.HELP)


def _register_commands(debugger):
    for cls_name, cls in COMMAND_CLASSES.items():
        debugger.HandleCommand("command script add -o -c %s %s" % (lldb_name(cls_name), cls.name))
    debugger.HandleCommand("command script add -o -c %s pyunwind" % lldb_name("SettingsCommand"))


def lldb_names():
    """{name: what lldb is given by that name} (see pyunwind_lldb_host.lldb_name), for the
    module lldb imported to hold."""
    names = dict(COMMAND_CLASSES, SettingsCommand=SettingsCommand, ProviderStopHook=ProviderStopHook,
                 PythonLocalsRecognizer=PythonLocalsRecognizer, repr_summary=repr_summary, NoChildren=NoChildren)
    if HAS_PROVIDER_API:
        names["PythonFrameProvider"] = provider.PythonFrameProvider
    return names


_registered = False


def register(debugger, script):
    """Sets up pyunwind in `debugger`: the script's __lldb_init_module, `script` the name lldb
    imported it by (see lldb_names)."""
    global _registered
    set_script_module(script)
    _register_commands(debugger)
    first, _registered = not _registered, True
    for i in range(debugger.GetNumTargets()):
        if first:
            provide(debugger.GetTargetAtIndex(i))
        else:
            prepare_existing(debugger.GetTargetAtIndex(i))
    if not first:
        return
    # Every lldb: the stop hook prepares arm64 cores and remote processes (prepare_target)
    # as they are loaded or attached.
    hooked = add_provider_stop_hook(debugger)
    if not HAS_PROVIDER_API:
        return
    # Locals' reprs are char8_t arrays (a type C programs do not use): shown as their text.
    char8_array = "'^char8_t ?\\[[0-9]+\\]$'"
    debugger.HandleCommand("type summary add -w pyunwind -x %s -F %s" % (char8_array, lldb_name("repr_summary")))
    debugger.HandleCommand("type synthetic add -w pyunwind -x %s -l %s" % (char8_array, lldb_name("NoChildren")))
    debugger.HandleCommand("type category enable pyunwind")
    debugger.HandleCommand("frame recognizer add -l %s -x -s python -n '%s' -f false"
                           % (lldb_name("PythonLocalsRecognizer"), STAND_IN_SYMBOL.pattern))
    debugger.HandleCommand("settings set target.display-recognized-arguments true")
    # Targets made later copy the dummy target's hook, which registers the provider at their
    # first stop with every thread's frames read ahead; a watcher would register it first,
    # before the target had a process (lldb-dap's core) and with nothing read ahead.
    if not hooked:
        watch_new_targets(debugger)

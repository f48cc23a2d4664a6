"""What the gdb and lldb frontends share: loading the `_pyunwind` module, parsing the `py-*`
command arguments, the per-stop session cache and the selected Python frame.

No decoding happens here; that is all in the Rust core.
"""

import argparse
import importlib.machinery
import importlib.util
import json
import os
import re
import shlex
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.dirname(_HERE)


def load_core_module():
    """Import `_pyunwind`: $PYUNWIND_LIB, else the checkout's target/release build."""
    if "_pyunwind" in sys.modules:
        return sys.modules["_pyunwind"]
    candidates = []
    if os.environ.get("PYUNWIND_LIB"):
        candidates.append(os.environ["PYUNWIND_LIB"])
    candidates += [
        os.path.join(_REPO, "target", "release", "_pyunwind.so"),
        os.path.join(_REPO, "target", "debug", "_pyunwind.so"),
    ]
    for path in candidates:
        if os.path.isfile(path):
            loader = importlib.machinery.ExtensionFileLoader("_pyunwind", path)
            spec = importlib.util.spec_from_file_location("_pyunwind", path, loader=loader)
            mod = importlib.util.module_from_spec(spec)
            loader.exec_module(mod)
            sys.modules["_pyunwind"] = mod
            return mod
    raise ImportError(
        "pyunwind: the _pyunwind module is not built (looked in %s); run `make build` or set PYUNWIND_LIB"
        % ", ".join(candidates)
    )


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError("%s: %s" % (self.prog, message))

    def exit(self, status=0, message=None):
        raise UsageError(message or "")


def _parser(prog):
    return _Parser(prog=prog, add_help=False)


def parse_bt_args(prog, arg):
    p = _parser(prog)
    p.add_argument("-a", "--all", action="store_true", dest="all_threads")
    p.add_argument("--json", action="store_true")
    return p.parse_args(shlex.split(arg or ""))


def parse_async_args(prog, arg):
    p = _parser(prog)
    p.add_argument("--json", action="store_true")
    return p.parse_args(shlex.split(arg or ""))


def parse_tasks_args(prog, arg):
    p = _parser(prog)
    p.add_argument("--json", action="store_true")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--tree", action="store_true")
    which.add_argument("--table", action="store_true")
    a = p.parse_args(shlex.split(arg or ""))
    # Neither flag: both views.
    a.show_tree = a.tree or not a.table
    a.show_table = a.table or not a.tree
    return a


def parse_list_args(arg, current_line):
    """libpython's py-list: no argument lists around the current line; `START` lists 10 lines
    from START; `START, END` lists that range."""
    arg = (arg or "").strip()
    if not arg:
        return max(current_line - 5, 1), current_line + 5
    m = re.match(r"^\s*(\d+)\s*(?:,\s*(\d+)\s*)?$", arg)
    if not m:
        raise UsageError("usage: py-list [START | START, END]")
    start = int(m.group(1))
    end = int(m.group(2)) if m.group(2) else start + 10
    if end < start:
        raise UsageError("py-list: END must not be before START")
    return start, end


def parse_name_arg(prog, arg):
    name = (arg or "").strip()
    if not name or not re.match(r"^[^\W\d]\w*$", name):
        raise UsageError("usage: %s NAME" % prog)
    return name


def info_proc_mappings_to_maps(text):
    """Turn a debugger's `info proc mappings` table into /proc/PID/maps lines (file-backed
    mappings only), so that the core parses one format."""
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 5 or not parts[0].startswith("0x"):
            continue
        try:
            start, end = int(parts[0], 16), int(parts[1], 16)
            offset = int(parts[3], 16)
        except ValueError:
            continue
        rest = parts[4:]
        perms = "r--p"
        if rest and re.match(r"^[r-][w-][x-][ps-]$", rest[0]):
            perms = rest[0]
            rest = rest[1:]
        path = " ".join(rest)
        if path.startswith("/"):
            out.append("%x-%x %s %x 00:00 0 %s" % (start, end, perms, offset, path))
    return "\n".join(out) + "\n"


class StopState:
    """The session for the current stop and the selected Python frame per thread. Frontends
    call `drop()` when the target resumes or changes."""

    def __init__(self):
        self.session = None
        self.key = None
        self.selected = {}

    def get(self, key, make):
        if self.session is None or self.key != key:
            self.session = make()
            self.key = key
            self.selected = {}
        return self.session

    def drop(self, *_args):
        self.session = None
        self.key = None
        self.selected = {}


def thread_frames(session, lwp, tp):
    """The thread's frames (dicts of the JSON report: python or unreadable), innermost first."""
    report = json.loads(session.report(lwp=lwp, tp=tp))
    return report["threads"][0]["frames"]


def step_frame(frames, index, direction):
    """The next readable Python frame from `index` towards older (+1) or newer (-1) frames,
    or None at the end of the stack."""
    i = index + direction
    while 0 <= i < len(frames):
        if frames[i]["kind"] == "python":
            return i
        i += direction
    return None

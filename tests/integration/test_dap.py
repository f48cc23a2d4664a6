"""Python stacks in editors: gdb's DAP server (`gdb -i=dap`, gdb 18 from PyPI, installed by
tools/gdb18.sh) driven by a DAP client (dap_client.py) as an editor drives it, on a launched
program, an attached process and a core: `stackTrace` lists native and Python frames in `bt`'s
order, each Python frame with its qualified name, .py path and line; `scopes`/`variables` show
a Python frame's locals with pyunwind's reprs. Also gdb/MI (Debian's gdb 13) with
`-enable-frame-filters`, as cpptools drives it."""

import contextlib
import functools
import os
import re
import tempfile

import pytest

import harness
from dap_client import DapClient
from test_stacks import expected, gdb_cmd

SCRIPT = harness.repo_root() / "gdb-scripts" / "pyunwind-gdb.py"
DAP_INTERPS = harness.pick(("pyenv-3.12", "debian-3.11"))
GDB_TIMEOUT = 120
# gdb's own bt line: `#6  leaf () at x.py:19`, `decorated () at x.py:33` (a second Python frame
# of the same eval-loop call has no number), `#0  0x00007f… in ?? () from libc.so.6`.
BT_NAME = re.compile(r"^(?:#\d+\s+)?(?:0x[0-9a-f]+ in )?(\S+) \(")


def gdb18():
    path = harness.cache_dir() / "gdb18" / "bin" / "gdb"
    if not os.access(path, os.X_OK):
        pytest.fail("no gdb 18 at %s: run tools/test-env.sh (it runs tools/gdb18.sh)" % path, pytrace=False)
    return str(path)


def gdb_opts(interp):
    """What test_stacks.gdb_cmd gives every gdb: no auto-loaded libpython, no debug info beyond
    the interpreter's own (a user without -dbg packages), pyunwind's script."""
    return ["-q", "-nx", "-iex", "set auto-load off", "-iex", "set debuginfod enabled off",
            "-iex", "set debug-file-directory %s" % (interp.debug_dir or "/nonexistent"), "-x", str(SCRIPT)]


def dap(interp):
    return DapClient([gdb18(), "-i=dap"] + gdb_opts(interp), env=harness.child_env(interp.env))


def bt_names(interp, core=None, pid=None, gdb=None):
    where = [interp.exe, core] if core else ["-p", str(pid)]
    rc, out, err = harness.run([gdb or gdb18(), "-batch"] + gdb_opts(interp) + ["-ex", "echo @@BT@@\\n", "-ex", "bt"] + where,
                               GDB_TIMEOUT)
    assert rc == 0, err
    # After the marker: loading a core or attaching prints frame #0 first.
    names = [m.group(1) for m in map(BT_NAME.match, out.split("@@BT@@")[1].splitlines()) if m]
    assert names, out
    return names


class Stopped:
    """One scenario, running, with its core and, when asked, gdb 18's `bt` names, live and of
    that core (a core lacks the vDSO's unwind info, so their innermost frames differ)."""

    def __init__(self, interp, name):
        self.interp = interp
        self.sc = harness.Scenario(interp, name)
        self.core = self.sc.make_core()

    @functools.cached_property
    def bt_core(self):
        return bt_names(self.interp, core=self.core)

    @functools.cached_property
    def bt_live(self):
        return bt_names(self.interp, pid=self.sc.pid)


@pytest.fixture(scope="module", params=DAP_INTERPS, ids=lambda i: i.id)
def stopped(request):
    """(interp, {"shapes": Stopped, "locals": Stopped}), shared by a module's tests."""
    interp = request.param
    made = {}
    try:
        for name in ("shapes", "locals"):
            made[name] = Stopped(interp, name)
        yield interp, made
    finally:
        for s in made.values():
            s.sc.close()


def python_frames(frames):
    return [(f["name"], f["source"]["path"], f["line"]) for f in frames
            if f.get("source", {}).get("path", "").endswith(".py")]


def check_locals(shown, truth_locals):
    assert shown is not None, "no Locals scope"
    assert set(shown) == set(truth_locals), shown
    for name, want in truth_locals.items():
        if want.startswith("<"):
            # Python prints `<module.Type object at 0x..>`; pyunwind the type's tp_name.
            assert re.match(r"^<\w+ object at 0x[0-9a-f]+>$", shown[name]), (name, shown[name])
        else:
            assert shown[name] == want, name


def check_stack(client, truth, bt=None):
    """The stopped main thread's stackTrace against the truth (and gdb's bt, when given)."""
    thread = client.request("threads")["threads"][0]["id"]
    frames = client.stack(thread)
    assert python_frames(frames) == expected(truth["threads"][0]["frames"]), frames
    for f in frames:
        assert int(f["instructionPointerReference"], 16) > 0, f
    if bt is not None:
        assert [f["name"] for f in frames] == bt
    # The innermost Python frame's locals; an outer Python frame with none has no Locals scope.
    py = [f for f in frames if f.get("source", {}).get("path", "").endswith(".py")]
    first = truth["threads"][0]["frames"][0]
    if "locals" in first:
        check_locals(client.locals_of(py[0]["id"]), first["locals"])
    return frames


@pytest.mark.parametrize("name", ["shapes", "locals"])
def test_gdb_dap_attach_and_core(stopped, name):
    interp, made = stopped
    s = made[name]
    bt_live, bt_core = s.bt_live, s.bt_core  # before the DAP session attaches
    with dap(interp) as client:
        client.initialize()
        client.start("attach", pid=s.sc.pid, program=interp.exe)
        check_stack(client, s.sc.truth, bt_live)
    with dap(interp) as client:
        client.initialize()
        client.start("attach", program=interp.exe, coreFile=s.core)
        check_stack(client, s.sc.truth, bt_core)


@contextlib.contextmanager
def launched_and_paused(client, interp, scenario, **launch_args):
    """Launch a scenario program through the adapter (as an editor's launch configuration
    does), wait until it is in place and pause it (the editor's pause button: a SIGINT stop).
    Yields its truth; the program is killed afterwards."""
    with tempfile.TemporaryDirectory(prefix="pyunwind-dap-") as tmp:
        fifo = os.path.join(tmp, "ready.fifo")
        truth_path = os.path.join(tmp, "truth.json")
        os.mkfifo(fifo)
        # Our own reader and writer, as harness.Scenario: the child's open() never blocks.
        reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        writer = os.open(fifo, os.O_WRONLY)
        pid = None
        try:
            client.initialize()
            seq = client.request_async("launch", program=interp.exe, cwd=tmp,
                                       args=[str(harness.scenarios_dir() / (scenario + ".py")), truth_path, fifo],
                                       env=harness.child_env(interp.env), **launch_args)
            client.wait_event("initialized")
            client.request("configurationDone")
            client.response(seq, "launch")
            truth = harness.wait_ready(reader, truth_path, harness.READY_TIMEOUT_SECONDS)
            pid = truth["pid"]
            client.request("pause", threadId=client.request("threads")["threads"][0]["id"])
            client.wait_event("stopped")
            yield truth
        finally:
            os.close(reader)
            os.close(writer)
            if pid is not None:
                try:
                    os.kill(pid, 9)
                except ProcessLookupError:
                    pass


@pytest.mark.parametrize("interp", DAP_INTERPS, ids=lambda i: i.id)
def test_gdb_dap_launch(interp):
    with dap(interp) as client, launched_and_paused(client, interp, "locals") as truth:
        check_stack(client, truth)


def c_unquote(text):
    """A C string literal's body (MI's and gdb's quoting) back to its text."""
    out, i = bytearray(), 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            octal = re.match(r"[0-7]{1,3}", text[i + 1:])
            if octal:
                out.append(int(octal.group(0), 8))
                i += 1 + len(octal.group(0))
                continue
            out += {"n": b"\n", "t": b"\t"}.get(text[i + 1], text[i + 1].encode())
            i += 2
        else:
            out += text[i].encode()
            i += 1
    return out.decode("utf-8")


MI_FRAME = re.compile(r'frame=\{(?:level="(\d+)",)?(?:addr="[^"]*",)?func="([^"]*)"(?:,file="([^"]*)")?'
                      r'(?:,fullname="[^"]*")?(?:,line="(\d+)")?')


def check_mi(run, truth, bt=None):
    """gdb/MI with frame filters on: -stack-list-frames gives the truth's Python frames (and the
    frames `bt` gives), -stack-list-variables on the eval-loop frame that runs the innermost
    Python frame that frame's locals. `run(lines)` runs one gdb/MI session with those commands
    and returns its output."""
    out = run(["-stack-list-frames"])
    m = re.search(r"\^done,stack=\[(.*)\]", out)
    assert m, out[-3000:]
    frames = MI_FRAME.findall(m.group(1))
    py = [(f, p, int(l)) for _, f, p, l in frames if p.endswith(".py")]
    assert py == expected(truth), out[-3000:]
    if bt is not None:
        assert [f for _, f, _, _ in frames] == bt
    level = next(lv for lv, f, p, _ in frames if p.endswith(".py") and lv)
    out = run(["-stack-list-variables --thread 1 --frame %s --all-values" % level])
    m = re.search(r"\^done,variables=\[(.*)\]", out)
    assert m, out[-3000:]
    shown = dict(re.findall(r'\{name="((?:[^"\\]|\\.)*)",value="((?:[^"\\]|\\.)*)"\}', m.group(1)))
    # MI quotes gdb's text of a value, and gdb shows a repr (a string value) quoted: "\"7\"".
    shown = {k: c_unquote(c_unquote(v)[1:-1]) for k, v in shown.items()}
    check_locals(shown, truth[0]["locals"])


def test_gdb_mi_frame_filters(stopped):
    """gdb/MI as cpptools drives it (`-enable-frame-filters` among its setupCommands), with
    Debian's gdb 13."""
    interp, made = stopped
    s = made["locals"]
    cmd = [c for c in gdb_cmd(interp, core=s.core) if c != "-batch"]
    cmd[1:1] = ["--interpreter=mi"]

    def run(lines):
        rc, out, err = harness.run(cmd, GDB_TIMEOUT, input="\n".join(["-enable-frame-filters"] + lines
                                                                    + ["-gdb-exit", ""]))
        assert rc == 0, err
        return out

    check_mi(run, s.sc.truth["threads"][0]["frames"], bt_names(interp, core=s.core, gdb="gdb"))

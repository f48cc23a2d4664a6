"""README.md's "First commands", run as a user runs them: every command of the section's
console blocks, in order, on examples/demo.py under Debian's /usr/bin/python3.11 (the README's
program and interpreter), each output compared line by line with what the README shows.

In a block, `$ CMD` is a shell command, `(gdb) CMD` a command typed into the gdb started just
before, `...` any number of lines, and every other line one line of output. The README's pid is
the demo's here (`core.PID` the core gcore wrote of it); `pyunwind` is the built CLI; HOME is a
fresh directory, so `pyunwind install-gdb` writes its ~/.gdbinit and the gdb after it reads it.
Pids, thread ids, fds, addresses and ports are masked on both sides, as are the checkout's path
and HOME (the README's `/home/you/pyunwind` and `/home/you`)."""

import os
import re
import shlex
import signal
import subprocess
import time

import pytest

import harness

README = harness.repo_root() / "README.md"
SECTION = "## First commands"
DEMO = harness.repo_root() / "examples" / "demo.py"
PYTHON = "/usr/bin/python3.11"
# The demo's threads: main, upstream, fetcher, four pool workers, auditor.
DEMO_THREADS = 8
SETTLE_TIMEOUT = 60
TIMEOUT = 120
README_CHECKOUT = "/home/you/pyunwind"
README_HOME = "/home/you"
MASKS = [(re.compile(r"\b(pid|[Tt]hread|fd|process|LWP) \d+"), r"\1 N"),
         (re.compile(r"\bcore\.\d+"), "core.N"),
         (re.compile(r"0x[0-9a-f]+"), "0xN"),
         (re.compile(r"127\.0\.0\.1:\d+"), "127.0.0.1:N")]


def mask(text):
    for pattern, to in MASKS:
        text = pattern.sub(to, text)
    return text


def blocks(text):
    """The section's console blocks: each a list of (command, the lines the README shows after
    it), the command `$ ...` or `(gdb) ...`."""
    section = text.split("\n" + SECTION + "\n", 1)[1].split("\n## ", 1)[0]
    out = []
    for block in re.findall(r"```console\n(.*?)```", section, re.S):
        steps = []
        for line in block.splitlines():
            if line.startswith(("$ ", "(gdb) ")):
                steps.append((line, []))
            else:
                assert steps, "output before any command: %r" % line
                steps[-1][1].append(line)
        out.append(steps)
    return out


def matches(want, got):
    """Whether the lines ``got`` are ``want``'s, `...` standing for any number of lines."""
    pattern = "".join(r"(?:.*\n)*?" if w == "..." else re.escape(w) + r"\n" for w in want)
    return re.fullmatch(pattern, "".join(g + "\n" for g in got)) is not None


def settled(pid):
    """Every thread of the demo is there and blocked in a system call."""
    tids = os.listdir("/proc/%d/task" % pid)
    if len(tids) != DEMO_THREADS:
        return False
    for tid in tids:
        try:
            with open("/proc/%d/task/%s/syscall" % (pid, tid)) as f:
                if f.read().split()[0] == "running":
                    return False
        except (OSError, IndexError):
            return False
    return True


@pytest.fixture(scope="module")
def demo():
    proc = subprocess.Popen([PYTHON, str(DEMO)], cwd=harness.repo_root(), env=harness.child_env(),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + SETTLE_TIMEOUT
        calm = 0
        while calm < 2:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise harness.HarnessError("the demo did not settle (exit %r)" % proc.poll())
            time.sleep(0.2)
            calm = calm + 1 if settled(proc.pid) else 0
        yield proc.pid
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


class User:
    """Runs the README's commands: its pid is the demo's, its files in ``tmp``."""

    def __init__(self, readme_pid, pid, tmp):
        self.readme_pid, self.pid, self.tmp = readme_pid, pid, tmp
        self.home = tmp / "home"
        self.home.mkdir()
        self.gdb_commands = None

    def argv(self, command):
        words = []
        for w in shlex.split(command):
            if w == self.readme_pid:
                w = str(self.pid)
            elif w == "core." + self.readme_pid:
                w = str(self.tmp / ("core.%d" % self.pid))
            words.append(w)
        if words[0] == "pyunwind":
            words[0] = str(harness.cli_path())
        return words

    def run(self, argv):
        env = harness.child_env({"HOME": str(self.home)})
        env.pop("DEBUGINFOD_URLS", None)
        rc, out, err = harness.run(argv, TIMEOUT, env=env, cwd=str(self.tmp))
        harness.assert_no_panic(out + err, rc)
        assert rc == 0, "%s: exit %d\n%s%s" % (" ".join(argv), rc, out, err)
        text = (out + err).replace(str(harness.repo_root()), README_CHECKOUT)
        return text.replace(str(self.home), README_HOME).splitlines()


def test_first_commands(demo, tmp_path):
    text = README.read_text()
    found = blocks(text)
    assert len(found) == 3, found
    first = found[0][0][0]
    readme_pid = re.fullmatch(r"\$ pyunwind pid (\d+) --why", first).group(1)
    user = User(readme_pid, demo, tmp_path)
    ran = []
    for block in found:
        steps = list(block)
        while steps:
            command, want = steps.pop(0)
            assert command.startswith("$ "), command
            argv = user.argv(command[2:])
            if argv[0] == "gdb":
                # Its `(gdb)` commands, run in batch mode, each echoed as the README shows it.
                typed = []
                while steps and steps[0][0].startswith("(gdb) "):
                    typed.append(steps.pop(0))
                assert typed, "gdb with nothing typed into it"
                argv = argv[:1] + ["-q", "-batch"] + argv[1:]
                for line, _ in typed:
                    argv += ["-ex", "echo %s\\n" % line, "-ex", line[len("(gdb) "):]]
                want = want + [line for step in typed for line in [step[0]] + step[1]]
                # What gdb says when it detaches, after the last command.
                want = want + ["..."]
            got = user.run(argv)
            assert matches([mask(w) for w in want], [mask(g) for g in got]), (
                "%s\n--- the README shows\n%s\n--- it printed\n%s"
                % (command, "\n".join(want), "\n".join(got)))
            ran.append(argv[0])
    assert [os.path.basename(a) for a in ran] == ["pyunwind", "gcore", "pyunwind", "pyunwind",
                                                  "gdb"], ran

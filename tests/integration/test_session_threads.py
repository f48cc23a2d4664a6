"""A session over the debugger's memory (every read a call into Python) used from two Python
threads at once, as a debugger's commands and its frame provider or unwinder may: one thread
builds the stop's threads and frames while the other, holding the GIL, asks for them. The
initialisation runs outside the session's locks, so neither waits for the other while holding
what the other needs (it used to deadlock). Real process, pyenv 3.12 `threads`.
"""

import json
import sys

import harness
from harness import module_path
from test_stacks import check_report

INTERP = harness.pick(["pyenv-3.12"])[0]

DRIVER = """\
import json, os, sys, threading, time
sys.path.insert(0, sys.argv[1])
import _pyunwind
pid = int(sys.argv[2])
with open("/proc/%d/maps" % pid) as f:
    maps = f.read()
fd = os.open("/proc/%d/mem" % pid, os.O_RDONLY)
inside = threading.Event()

def read(addr, size):
    inside.set()
    time.sleep(0.0002)  # the GIL goes to the other thread here
    return os.pread(fd, size, addr)

session = _pyunwind.Session.debugger(read, maps, pid)
inside.clear()
out = {}
worker = threading.Thread(target=lambda: out.setdefault("report", session.report(all_threads=True)))
worker.start()
inside.wait()
out["needs_thread_ids"] = session.needs_thread_ids()
worker.join()
print(json.dumps({"report": json.loads(out["report"]), "needs": out["needs_thread_ids"]}))
"""


def test_two_threads_share_a_debugger_session(tmp_path):
    with harness.Scenario(INTERP, "threads") as sc:
        rc, out, err = harness.run([sys.executable, "-c", DRIVER, module_path().parent, sc.pid], 60)
        assert rc == 0, err
        got = json.loads(out)
        assert got["needs"] is False
        check_report(got["report"], sc.truth)
        assert got["report"]["python"]["source"] == "debugger"

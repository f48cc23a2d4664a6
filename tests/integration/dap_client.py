"""A small Debug Adapter Protocol client: what an editor sends to gdb's DAP server
(`gdb -i=dap`) or lldb-dap, over the adapter's stdin/stdout with Content-Length framing.

    with DapClient(["gdb", "-i=dap", "-x", script]) as dap:
        dap.initialize()
        dap.request("attach", pid=1234)
        dap.request("configurationDone")
        dap.wait_event("stopped")
        frames = dap.request("stackTrace", threadId=tid)["stackFrames"]

Standard library only. Every wait is bounded; a failed request raises DapError with the
adapter's message and what it printed on stderr.
"""

import json
import os
import select
import subprocess
import time

TIMEOUT_SECONDS = 60.0


class DapError(Exception):
    pass


class DapClient:
    def __init__(self, argv, env=None, cwd=None, timeout=TIMEOUT_SECONDS):
        self.timeout = timeout
        self._seq = 0
        self._buf = b""
        self._pending = []  # messages read while waiting for another one
        self.events = []  # every event seen, in order
        self.output = []  # the text of `output` events
        self._stderr_path = "/tmp/dap-stderr.%d.%d" % (os.getpid(), id(self))
        self._stderr = open(self._stderr_path, "w+b")
        self.proc = subprocess.Popen([str(a) for a in argv], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._stderr, env=env, cwd=cwd,
                                     start_new_session=True)

    # --- framing ----------------------------------------------------------------------------

    def send(self, message):
        body = json.dumps(message).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def _read_message(self, deadline):
        while True:
            head, sep, rest = self._buf.partition(b"\r\n\r\n")
            if sep:
                length = None
                for line in head.split(b"\r\n"):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                if length is None:
                    raise DapError("a DAP header without Content-Length: %r" % head)
                if len(rest) >= length:
                    self._buf = rest[length:]
                    return json.loads(rest[:length])
            left = deadline - time.monotonic()
            if left <= 0:
                raise DapError("no message from the adapter within %.0f s%s" % (self.timeout, self._tail()))
            fd = self.proc.stdout.fileno()
            if select.select([fd], [], [], min(left, 0.5))[0]:
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise DapError("the adapter exited (rc %s)%s" % (self.proc.poll(), self._tail()))
                self._buf += chunk

    def _next(self, match, deadline):
        """The first message, pending or new, for which ``match`` is true."""
        for i, m in enumerate(self._pending):
            if match(m):
                return self._pending.pop(i)
        while True:
            m = self._read_message(deadline)
            if m.get("type") == "event":
                self.events.append(m)
                if m.get("event") == "output":
                    self.output.append(m.get("body", {}).get("output", ""))
            elif m.get("type") == "request":
                # Reverse requests (runInTerminal, startDebugging): this client supports none.
                self.send({"seq": self._next_seq(), "type": "response", "request_seq": m["seq"],
                           "command": m.get("command"), "success": False, "message": "not supported"})
                continue
            if match(m):
                return m
            self._pending.append(m)

    def _next_seq(self):
        self._seq += 1
        return self._seq

    def _tail(self):
        self._stderr.flush()
        with open(self._stderr_path, "rb") as f:
            err = f.read()[-4000:].decode("utf-8", "replace")
        return "\n--- adapter stderr\n%s\n--- output events\n%s" % (err, "".join(self.output)[-4000:])

    # --- requests and events ----------------------------------------------------------------

    def request_async(self, command, **arguments):
        seq = self._next_seq()
        self.send({"seq": seq, "type": "request", "command": command, "arguments": arguments})
        return seq

    def response(self, seq, command="request"):
        deadline = time.monotonic() + self.timeout
        r = self._next(lambda m: m.get("type") == "response" and m.get("request_seq") == seq, deadline)
        if not r.get("success"):
            raise DapError("%s failed: %s %s%s" % (command, r.get("message"), r.get("body"), self._tail()))
        return r.get("body") or {}

    def request(self, command, **arguments):
        return self.response(self.request_async(command, **arguments), command)

    def wait_event(self, name, timeout=None):
        deadline = time.monotonic() + (timeout or self.timeout)
        return self._next(lambda m: m.get("type") == "event" and m.get("event") == name, deadline).get("body") or {}

    def initialize(self, adapter_id="pyunwind-test"):
        return self.request("initialize", clientID="pyunwind-tests", adapterID=adapter_id, linesStartAt1=True,
                            columnsStartAt1=True, pathFormat="path", supportsVariableType=True)

    def start(self, command, **arguments):
        """launch/attach, then configurationDone (as an editor does after `initialized`); waits
        for both responses and returns the body of the first `stopped` event."""
        seq = self.request_async(command, **arguments)
        self.wait_event("initialized")
        self.request("configurationDone")
        self.response(seq, command)
        return self.wait_event("stopped")

    # --- what an editor shows ---------------------------------------------------------------

    def stack(self, thread_id, levels=0):
        return self.request("stackTrace", threadId=thread_id, startFrame=0, levels=levels)["stackFrames"]

    def locals_of(self, frame_id):
        """{name: value} of the frame's first scope named Locals (gdb) or Locals/locals
        (lldb-dap), or None when it has no such scope."""
        for scope in self.request("scopes", frameId=frame_id)["scopes"]:
            if scope["name"].lower() == "locals":
                ref = scope["variablesReference"]
                variables = self.request("variables", variablesReference=ref)["variables"]
                return {v["name"]: v["value"] for v in variables}
        return None

    def close(self):
        if self.proc.poll() is None:
            try:
                self.request_async("disconnect", terminateDebuggee=False)
                self.proc.wait(5)
            except (OSError, subprocess.TimeoutExpired, DapError):
                pass
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, 9)
            except ProcessLookupError:
                pass
            self.proc.wait(10)
        self._stderr.close()
        try:
            os.unlink(self._stderr_path)
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

"""Threads waiting on the outside world (issue 37), and servers waiting for connections.

- ``serve``: ``socketserver.ThreadingTCPServer.serve_forever()`` (idle: a server waiting for
  connections). Its poll interval is an hour (the default 0.5 s would let a reader catch the
  loop between two polls); the frames are those of the default.
- The server's handler thread (``Thread-N (process_request_thread)``) blocked in
  ``self.request.recv()`` on the connection the main thread opened and sends nothing on.
- ``client``: ``sock.recv(1)`` on a connection to ``SILENT``, a local listening socket whose
  connection the main thread accepted and never answers.
- ``acceptor``: ``SILENT.accept()`` (idle: a server waiting for connections).
- ``runner``: ``subprocess.run(["sleep", "1000"])``, waiting for its child.
- ``reader``: ``os.read()`` on a pipe whose write end the main thread keeps open.
- The main thread records the truth and blocks in ``_truth.HELD``.

The truth has, besides the threads: ``handler`` {native_id, fd, local, peer},
``client`` {native_id, fd, local, peer, id, type}, ``acceptor`` {native_id, fd, local},
``server`` {native_id, fd, local}, ``child`` {pid, argv, native_id of runner},
``pipe`` {native_id, fd (the read end), write_fd}; every address as ``ip:port``.
"""

import os
import socket
import socketserver
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402
import why_helpers  # noqa: E402

POLL_INTERVAL_SECONDS = 3600
HANDLED = {}  # what the handler thread recorded about itself
HANDLER_STARTED = threading.Event()
SILENT = socket.socket()
SILENT.bind(("127.0.0.1", 0))
SILENT.listen()
CLIENT = {}
PIPE_R, PIPE_W = os.pipe()


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        HANDLED.update(why_helpers.sock_record(self.request),
                       native_id=threading.get_native_id())
        HANDLER_STARTED.set(); self.request.recv(1024)  # noqa: E702


def serve(started, server):
    started.set(); server.serve_forever(POLL_INTERVAL_SECONDS)  # noqa: E702


def client(started):
    sock = socket.create_connection(SILENT.getsockname())
    CLIENT.update(why_helpers.sock_record(sock), native_id=threading.get_native_id())
    started.set(); sock.recv(1)  # noqa: E702


def acceptor(started):
    started.set(); SILENT.accept()  # noqa: E702


def runner(started):
    started.set(); subprocess.run(["sleep", "1000"])  # noqa: E702


def reader(started):
    started.set(); os.read(PIPE_R, 1)  # noqa: E702


def main():
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    _truth.start_threads({"serve": lambda started: serve(started, server)})
    # The handler's connection: opened here, nothing sent on it.
    conn_to_server = socket.create_connection(server.server_address)
    if not HANDLER_STARTED.wait(_truth.MAX_START_SECONDS):
        _truth.fail("the handler did not start")
    _truth.start_threads({"client": client})
    accepted, _ = SILENT.accept()  # the silent server's end of the client's connection
    _truth.start_threads({"acceptor": acceptor, "runner": runner, "reader": reader})
    by_name = {t.name: t for t in threading.enumerate()}
    deadline = time.monotonic() + _truth.MAX_START_SECONDS
    while True:
        sleeps = [p for p in why_helpers.children_of(os.getpid())
                  if why_helpers.cmdline(p) == ["sleep", "1000"]]
        if sleeps:
            break
        if time.monotonic() > deadline:
            _truth.fail("no sleep child")
        time.sleep(0.01)
    others = [t.native_id for t in threading.enumerate() if t is not threading.current_thread()]
    why_helpers.wait_blocked(os.getpid(), others)
    truth = dict(
        handler=dict(HANDLED),
        client=dict(CLIENT),
        acceptor={"native_id": by_name["acceptor"].native_id,
                  **why_helpers.sock_record(SILENT)},
        server={"native_id": by_name["serve"].native_id,
                **why_helpers.sock_record(server.socket)},
        child={"pid": sleeps[0], "argv": why_helpers.cmdline(sleeps[0]),
               "native_id": by_name["runner"].native_id},
        pipe={"native_id": by_name["reader"].native_id, "fd": PIPE_R, "write_fd": PIPE_W},
        kept=[conn_to_server.fileno(), accepted.fileno()],
    )
    _truth.ready(**truth); _truth.HELD.acquire()  # noqa: E702


if __name__ == "__main__":
    main()

"""gevent, idle: a WSGI server with requests parked on real sockets, and greenlets parked on a
Semaphore, in ``sleep`` and on an Event. No monkey-patching.

    python greenlets_gevent.py TRUTH_JSON READY_FIFO

``PYUNWIND_GREENLET`` names the folder holding greenlet and gevent (tools/greenlet.sh's
``latest`` set); without it, that set for this interpreter in the cache.

The main greenlet of the main thread starts a ``gevent.pywsgi.WSGIServer`` on 127.0.0.1 (an
ephemeral port) and spawns, on real loopback sockets:
- ``client-0`` .. ``client-4``: each sends a whole request; its handler greenlet runs ``app``,
  which reads its own (default, generated) ``name`` and waits on ``RELEASE``, never set; the
  client waits in ``recv`` for the answer;
- ``partial-0``, ``partial-1``: each sends half a request line; its handler waits in ``recv``
  inside pywsgi for the rest (its ``name`` never generated), the client in ``recv``;
then ``sem-0`` and ``sem-1`` on ``SEM.acquire()`` (a Semaphore(0)), ``sleeper`` in
``gevent.sleep(1e6)``, ``waiter`` in ``NEVER.wait()``, ``finished`` (ran to its end) and
``unstarted`` (never started); then it waits in ``serve_forever()``. The hub runs the loop.

A plain thread, "recorder", waits until the loop is idle, then records the truth (as
greenlets_raw.greenlet_truth does; ``name`` and ``function`` below) and blocks in
``_truth.HELD.acquire()``. It never uses greenlet: it has no greenlet of its own. The main
thread's current greenlet comes from a ``greenlet.settrace`` hook installed in that thread.

``name``: a gevent ``Greenlet``'s name as the object holds it: the one assigned to it (in its
``__dict__``), else ``Greenlet-N`` once gevent generated it (its ``minimal_ident``, kept in the
Cython object, made on first use of ``name``), else None; None for any other greenlet (the
hub, main greenlets). ``function``: ``__qualname__`` of the callable a gevent ``Greenlet`` was
made to run (its ``_run``, in its ``__dict__`` until it finishes), else None.

``waits``: for every greenlet (by address), its wait as the program knows it, or None (the
hub runs; ``finished``, ``unstarted`` do not wait): ``kind``, ``object`` (its id), ``type``,
``owner`` (None) and ``frame``, the index in its frames of the frame making the wait (see
``waiting_frame``). The main greenlet waits in ``serve_forever()`` on the server's stop event;
the handlers of the half-sent requests (labelled ``handler of partial-N``, paired with their
client by the connection's peer address) on their connection's socket.
"""

import os
import sys
import threading
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import _truth  # noqa: E402
import greenlets_raw as raw  # noqa: E402  (puts the greenlet folder on sys.path)

import gevent  # noqa: E402
import gevent.event  # noqa: E402
import gevent.lock  # noqa: E402
import gevent.pywsgi  # noqa: E402
import gevent.socket  # noqa: E402
import greenlet  # noqa: E402

N_CLIENTS = 5
N_PARTIAL = 2
IDLE_SAMPLE_SECONDS = 0.2
MAX_IDLE_WAIT_SECONDS = 20.0

RELEASE = gevent.event.Event()
NEVER = gevent.event.Event()
SEM = gevent.lock.Semaphore(0)
ARRIVED = []  # names of the handler greenlets that reached `app`
SENT = []  # clients that sent their request
PARKED = []  # labels of the other greenlets that reached their wait
# id(greenlet) -> (kind, the object it waits on or None, the frame making the call, its line):
# each greenlet of the scenario's own code records its wait itself, on the line of the wait
# (park()); record_all adds the waits made in gevent's code (the main greenlet's, the
# handlers' of the partial requests). Every other greenlet waits on nothing.
WAITS = {}
NAMED = {}  # label -> gevent Greenlet the scenario spawned
CLIENT_SOCKETS = {}  # label of a client -> its socket
MAIN_NATIVE_ID = threading.get_native_id()


def park(kind, obj=None):
    """Called on the line of the calling greenlet's wait, right before it."""
    caller = sys._getframe(1)
    WAITS[id(gevent.getcurrent())] = (kind, obj, caller, caller.f_lineno)


def waiting_frame(chain, kind, obj, caller, line):
    """Which of a suspended greenlet's frames (`chain`, innermost first) makes its wait:
    gevent.sleep's own frame, run by the caller; the method of a cooperative socket that was
    called (the outermost frame whose `self` is the socket); else (gevent's compiled waits,
    Semaphore.acquire, Event.wait, which run no Python frame) the caller's, still on the line
    it recorded. Returns its index."""
    at = next((i for i, f in enumerate(chain) if f is caller), None)
    if caller is not None and at is None:
        _truth.fail("a waiting greenlet's frame is not among its frames")
    if kind == "sleep":
        at -= 1
        if at < 0 or chain[at].f_code is not gevent.sleep.__code__:
            _truth.fail("gevent.sleep's frame is not the sleeper's innermost")
    elif kind == "socket":
        mine = [i for i, f in enumerate(chain) if f.f_locals.get("self") is obj]
        if not mine or (at is not None and mine[-1] >= at):
            _truth.fail("no frame of %r's own methods waits" % obj)
        at = mine[-1]
    elif chain[at].f_lineno != line:
        _truth.fail("%s waits on line %d, not %d" % (kind, chain[at].f_lineno, line))
    return at


def frame_chain(g):
    chain, frame = [], raw._FRAME(g)
    while frame is not None:
        chain.append(frame)
        frame = frame.f_back
    return chain


def app(environ, start_response):
    me = gevent.getcurrent()
    raw.LABELS[id(me)] = "handler " + environ["PATH_INFO"]
    ARRIVED.append(me.name)
    park("event", RELEASE); RELEASE.wait()  # noqa: E702  app handlers park here
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"released\n"]


def client(port, request):
    sock = gevent.socket.socket()
    sock.connect(("127.0.0.1", port))
    sock.sendall(request)
    SENT.append(request)
    CLIENT_SOCKETS[gevent.getcurrent().name] = sock
    park("socket", sock); return sock.recv(1)  # noqa: E702  clients park here


def sem_waiter(label):
    PARKED.append(label); park("semaphore", SEM); SEM.acquire()  # noqa: E702


def sleeper():
    PARKED.append("sleeper"); park("sleep"); gevent.sleep(1e6)  # noqa: E702


def waiter():
    PARKED.append("waiter"); park("event", NEVER); NEVER.wait()  # noqa: E702


def quick():
    return 42


def spawn(label, run, *args):
    g = NAMED[label] = gevent.spawn(run, *args)
    g.name = label
    return g


def trace(event, args):
    """greenlet.settrace hook of the main thread: which greenlet it runs."""
    if event in ("switch", "throw"):
        raw.CURRENT[MAIN_NATIVE_ID] = id(args[1])


def describe(g):
    if not isinstance(g, gevent.Greenlet):
        return None, None
    own = g.__dict__
    if "name" in own:
        name = own["name"]
    elif repr(g).startswith('<%s "' % type(g).__name__):
        # gevent's repr shows the name once it is assigned or generated, and only then:
        # `name` would generate one.
        name = g.name
    else:
        name = None
    run = own.get("_run")
    return name, getattr(run, "__qualname__", None)


def snapshot():
    return (dict(raw.CURRENT), [(id(g), raw._ACTIVE(g), _truth.frames_from(raw._FRAME(g)))
                                for g in raw.all_greenlets()])


def wait_idle():
    """Until every greenlet is at its wait and two samples of all of them agree."""
    want_parked = {"sem-0", "sem-1", "sleeper", "waiter"}
    deadline = time.monotonic() + MAX_IDLE_WAIT_SECONDS
    previous = None
    while True:
        time.sleep(IDLE_SAMPLE_SECONDS)
        ready = (len(ARRIVED) == N_CLIENTS and len(SENT) == N_CLIENTS + N_PARTIAL
                 and set(PARKED) == want_parked
                 and raw.CURRENT.get(MAIN_NATIVE_ID) == id(HUB))
        current = snapshot()
        if ready and current == previous:
            return
        if time.monotonic() > deadline:
            _truth.fail("gevent did not go idle within %.0f s: arrived %r, sent %d, parked %r"
                        % (MAX_IDLE_WAIT_SECONDS, ARRIVED, len(SENT), PARKED))
        previous = current


def gevent_waits():
    """The waits gevent's own code makes for the scenario: the main greenlet in
    `serve_forever()`, on the server's stop event, from serve_forever's frame; each handler of
    a partial request on its connection, the socket the server accepted and spawned it with
    (gevent/baseserver.py: `spawn(_handle_and_close_when_done, handle, close, (socket,
    address))`), whose peer is that client's socket. Labels those handlers `handler of
    partial-N`."""
    main = next(g for g in raw.all_greenlets() if raw.LABELS.get(id(g)) == "main of MainThread")
    serve = frame_chain(main)[0]
    if serve.f_code is not type(SERVER).serve_forever.__code__:
        _truth.fail("the main greenlet is not in serve_forever")
    WAITS[id(main)] = ("event", SERVER._stop_event, serve, serve.f_lineno)
    clients = {sock.getsockname(): label for label, sock in CLIENT_SOCKETS.items()}
    for g in raw.all_greenlets():
        if isinstance(g, gevent.Greenlet) and id(g) not in raw.LABELS:
            conn = g.args[2][0]
            if not isinstance(conn, gevent.socket.socket):
                _truth.fail("a handler greenlet not spawned with its connection: %r" % (g.args,))
            label = clients.get(conn.getpeername())
            if not (label or "").startswith("partial-"):
                _truth.fail("a handler greenlet of no partial request: %r" % (g,))
            raw.LABELS[id(g)] = "handler of " + label
            WAITS[id(g)] = ("socket", conn, None, None)


# The direction of a wait on a socket, by the name of the socket's method that waits (the
# `_socket.socket` methods of the same names; src/cpython/sockets.rs SOCKET_METHODS).
SOCKET_DIRECTIONS = {"recv": "recv", "recv_into": "recv", "recvfrom": "recv",
                     "recvfrom_into": "recv", "recvmsg": "recv", "recvmsg_into": "recv",
                     "send": "send", "sendall": "send", "sendto": "send", "sendmsg": "send",
                     "sendfile": "send", "connect": "connect", "connect_ex": "connect",
                     "_accept": "accept", "accept": "accept"}


def address(name):
    """A socket's address as a report writes it (`127.0.0.1:8080`)."""
    return "%s:%d" % name[:2]


def wait_truth(g):
    """{kind, object, type, owner, frame} of the wait greenlet `g` makes, None for none; a
    wait on a socket also has the socket's `fd`, the `direction` of the method that waits
    (`frame`'s), and its `local` and `peer` addresses (which a report gives live only)."""
    if id(g) not in WAITS:
        return None
    kind, obj, caller, line = WAITS[id(g)]
    chain = frame_chain(g)
    at = waiting_frame(chain, kind, obj, caller, line)
    truth = {"kind": kind, "object": None if obj is None else id(obj),
             "type": None if obj is None else _truth.type_name(type(obj)), "owner": None,
             "frame": at}
    if kind == "socket":
        truth.update(fd=obj.fileno(), direction=SOCKET_DIRECTIONS.get(chain[at].f_code.co_name),
                     local=address(obj.getsockname()), peer=address(obj.getpeername()))
    return truth


def record_all():
    gevent_waits()
    greenlets = raw.all_greenlets()
    waits = {str(id(g)): wait_truth(g) for g in greenlets}
    truth = raw.record(sys._getframe(1), describe=describe, own_greenlet=False,
                       gevent_version=gevent.__version__, port=SERVER.server_port,
                       hub=id(HUB), arrived=ARRIVED, waits=waits)
    raw_labels = {e["address"]: e["label"] for e in truth["greenlets"]}
    if raw_labels.get(id(HUB)) != "hub":
        _truth.fail("no hub among the greenlets")
    if set(waits) != {str(a) for a in raw_labels}:
        _truth.fail("the greenlets changed while recording their waits")
    return truth


def recorder():
    wait_idle()
    me, code = threading.get_ident(), sys._getframe(0).f_code
    _truth.write_truth(record_all(), signal=False); _truth.signal_when_blocked(me, code); _truth.HELD.acquire()  # noqa: E702,E501


def main():
    global HUB, SERVER
    raw.register_thread()
    greenlet.settrace(trace)
    raw.CURRENT[MAIN_NATIVE_ID] = id(greenlet.getcurrent())
    HUB = gevent.get_hub()
    raw.LABELS[id(HUB)] = "hub"
    # SERVER_NAME given: otherwise the server looks its name up (getfqdn) through gevent's
    # resolver, which starts a thread pool.
    SERVER = gevent.pywsgi.WSGIServer(("127.0.0.1", 0), app, log=None, error_log=None,
                                      environ={"SERVER_NAME": "localhost"})
    SERVER.start()
    port = SERVER.server_port
    for i in range(N_CLIENTS):
        spawn("client-%d" % i, client, port, b"GET /req-%d HTTP/1.1\r\nHost: x\r\n\r\n" % i)
    for i in range(N_PARTIAL):
        spawn("partial-%d" % i, client, port, b"GET /partial-%d HT" % i)
    for i in range(2):
        spawn("sem-%d" % i, sem_waiter, "sem-%d" % i)
    spawn("sleeper", sleeper)
    spawn("waiter", waiter)
    finished = spawn("finished", quick)
    finished.join()
    unstarted = NAMED["unstarted"] = gevent.Greenlet(quick)
    unstarted.name = "unstarted"
    for label, g in NAMED.items():
        raw.LABELS[id(g)] = label
    threading.Thread(target=recorder, name="recorder", daemon=True).start()
    SERVER.serve_forever()  # the main greenlet parks here


if __name__ == "__main__":
    main()

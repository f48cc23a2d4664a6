"""Raw greenlets in every state, in three threads (one of them gone).

    python greenlets_raw.py TRUTH_JSON READY_FIFO [main|inside]

``PYUNWIND_GREENLET`` names the folder holding greenlet (tools/greenlet.sh installs one per
set and ABI); without it, tools/greenlet.sh's ``latest`` set for this interpreter.

Main thread:
- ``deep``: suspended 30 calls deep (``descend``), switched to the main greenlet.
- ``sorter``: suspended inside the key function of ``sorted``: a C call sits mid-chain (not on
  a free-threaded build: see main()).
- ``gen``: a greenlet subclass (``Gen``), suspended inside a generator's body.
- ``outer`` -> ``inner``: ``inner`` (parent ``outer``) switched straight to the main greenlet,
  leaving ``outer`` suspended in ``inner.switch()``.
- ``pending``: never started; ``done``: ran to its end, still referenced.
Thread "greenlet-worker": ``wdeep`` and ``wgen``, suspended, switched to the worker's main
greenlet; the worker then blocks in ``_truth.HELD.acquire()``.
Thread "greenlet-gone": made ``orphan``, suspended, then returned; ``ORPHANS`` keeps it (and so
its thread's main greenlet) alive after the thread is gone.

Variant ``main`` (default): the main thread and the worker block in their main greenlets.
Variant ``inside``: each blocks inside a greenlet of its own (``runner``, ``wrunner``), its
main greenlet suspended under it.

The truth adds ``greenlets`` (see ``greenlet_truth``), ``greenlet_version``, ``variant``, and
``waits``: None for every greenlet (by address), as none waits on a gevent object.
"""

import gc
import os
import sys
import threading

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import _truth  # noqa: E402


def greenlet_dir(set_name="latest"):
    """Where tools/greenlet.sh put greenlet for this interpreter: $PYUNWIND_GREENLET, else its
    ``set_name`` set in the cache."""
    if os.environ.get("PYUNWIND_GREENLET"):
        return os.environ["PYUNWIND_GREENLET"]
    cache = os.environ.get("PYUNWIND_CACHE") or os.path.expanduser("~/.cache/pyunwind")
    abi = "cp3%d%s" % (sys.version_info[1], "t" if _truth.FREE_THREADED else "")
    return os.path.join(cache, "greenlet", set_name, abi)


if "greenlet" not in sys.modules:
    sys.path.insert(0, greenlet_dir())
import greenlet  # noqa: E402

# A version greenlet does not have (tests/integration/test_greenlets.py: such a version is one
# error line and no greenlets). The truth records the real one.
REAL_VERSION = greenlet.__version__
if os.environ.get("PYUNWIND_GREENLET_VERSION"):
    greenlet.__version__ = os.environ["PYUNWIND_GREENLET_VERSION"]

DEPTH = 30
VARIANT = sys.argv[3] if __name__ == "__main__" and len(sys.argv) > 3 else "main"

# --- the truth about greenlets (greenlets_gevent.py uses it too) ----------------------------

# id(main greenlet of a thread) -> that thread's native id, registered by each thread itself.
THREAD_OF_MAIN = {}
# id() of the main greenlets of threads that have exited.
EXITED_MAINS = set()
# id(greenlet) -> what the scenario calls it (``label`` in the truth; for reading it only).
LABELS = {}
# native thread id -> id() of the greenlet it runs at the stop, registered by the thread itself
# (the recording thread's own is read when recording).
CURRENT = {}

# The C-level accessors of greenlet.greenlet: a subclass (gevent's Greenlet) overrides
# `__bool__` and `dead` with its own meanings.
_ACTIVE = greenlet.greenlet.__bool__
_DEAD = greenlet.greenlet.dead.__get__
_PARENT = greenlet.greenlet.parent.__get__
_FRAME = greenlet.greenlet.gr_frame.__get__


def register_thread():
    """Called by each thread that makes greenlets, from its main greenlet."""
    me = greenlet.getcurrent()
    if _PARENT(me) is not None:
        _truth.fail("register_thread() called outside the main greenlet")
    THREAD_OF_MAIN[id(me)] = threading.get_native_id()
    LABELS[id(me)] = "main of " + threading.current_thread().name


def all_greenlets():
    """Every greenlet the collector tracks (greenlets always are), in gc order."""
    return [o for o in gc.get_objects() if issubclass(type(o), greenlet.greenlet)]


def root_of(g):
    while _PARENT(g) is not None:
        g = _PARENT(g)
    return g


def greenlet_truth(thread_frames, describe=None):
    """One entry per greenlet, sorted by address:

    - ``address``: id(g); ``type``: its type's tp_name; ``main``: it has no parent;
      ``parent``: id() of its parent or None.
    - ``thread``: native id of the thread of the main greenlet its parent chain ends at (each
      thread registered its own); None when that thread has exited.
    - ``state``: ``running``: the greenlet a live thread runs at the stop; ``suspended``: started
      and active but not running, its frames saved in it; ``not_started``; ``dead``. A greenlet
      of an exited thread keeps its frames until Python code asks it ``dead``, ``repr()`` or
      switches to it (greenlet then frees them): nothing here does, so ``orphan`` is
      ``suspended`` (with ``thread`` None); the main greenlet of an exited thread can never run
      again: ``dead``.
    - ``frames``: innermost first; a suspended greenlet's from ``gr_frame`` along ``f_back``,
      the running one's are its thread's (``thread_frames``: native id -> truth frames), [] for
      the others.
    - ``name``, ``function``: ``describe(g)`` -> (name, function), or None, None.
    - ``label``: what the scenario calls it (LABELS), None if it did not label it.
    """
    out = []
    for g in all_greenlets():
        root = root_of(g)
        if id(root) not in THREAD_OF_MAIN:
            _truth.fail("greenlet %#x: main greenlet %#x of no registered thread"
                        % (id(g), id(root)))
        exited = id(root) in EXITED_MAINS
        thread = None if exited else THREAD_OF_MAIN[id(root)]
        frames = []
        if not exited and CURRENT.get(thread) == id(g):
            state = "running"
            frames = thread_frames[thread]
        elif exited and _PARENT(g) is None:
            state = "dead"
        elif _ACTIVE(g):
            state = "suspended"
            frames = _truth.frames_from(_FRAME(g))
            if not frames:
                _truth.fail("suspended greenlet %#x has no frame" % id(g))
        elif exited:
            _truth.fail("inactive greenlet %#x of an exited thread" % id(g))
        else:
            state = "dead" if _DEAD(g) else "not_started"
        parent = _PARENT(g)
        name, function = describe(g) if describe else (None, None)
        out.append({"label": LABELS.get(id(g)), "address": id(g), "state": state,
                    "main": parent is None, "parent": None if parent is None else id(parent),
                    "thread": thread, "type": _truth.type_name(type(g)), "name": name,
                    "function": function, "frames": frames})
    out.sort(key=lambda e: e["address"])
    return out


def record(caller, describe=None, own_greenlet=True, **extra):
    """The truth: _truth.collect's threads (the recording thread first, from ``caller``), the
    greenlets, greenlet's version and ``extra``. ``own_greenlet``: the recording thread runs
    greenlets (it registered itself), and the one it runs now is its current one; a thread
    that never used greenlet has none (asking would make it a main greenlet)."""
    if own_greenlet:
        CURRENT[threading.get_native_id()] = id(greenlet.getcurrent())
    for label, g in KEEP.items():
        LABELS.setdefault(id(g), label)
    truth = _truth.collect(caller)
    frames = {t["native_id"]: t["frames"] for t in truth["threads"]}
    truth["greenlets"] = greenlet_truth(frames, describe)
    truth["greenlet_version"] = REAL_VERSION
    truth["greenlet_dir"] = os.path.dirname(os.path.dirname(os.path.abspath(greenlet.__file__)))
    truth.update(extra)
    again = greenlet_truth(frames, describe)
    if again != truth["greenlets"]:
        _truth.fail("greenlets changed while recording:\n%r\n%r" % (truth["greenlets"], again))
    return truth


# --- the scenario ---------------------------------------------------------------------------

KEEP = {}  # name -> greenlet: every greenlet the scenario made stays referenced
ORPHANS = []


def descend(n, home):
    if n == 0:
        home.switch()  # deep parks here
        return
    descend(n - 1, home)


def by_key(home):
    def key(x):
        if x == 2:
            home.switch()  # sorter parks here
        return x
    return sorted([3, 1, 2, 5, 4], key=key)


def produce(home):
    yield 1
    home.switch()  # gen parks here
    yield 2


def consume(home):
    return sum(produce(home))


class Gen(greenlet.greenlet):
    """A subclass: its tp_name is the class's bare name."""


def inner_part(home):
    home.switch()  # inner parks here


def outer_part(home):
    inner = greenlet.greenlet(inner_part)  # parent: outer, the current greenlet
    KEEP["inner"] = inner
    inner.switch(home)  # outer parks here


def never_run():
    return "never"


def quick():
    return 42


def make_greenlets(prefix, home):
    """Suspended greenlets of the calling thread, each parked by a switch to ``home`` (its main
    greenlet)."""
    deep = KEEP[prefix + "deep"] = greenlet.greenlet(descend)
    deep.switch(DEPTH, home)
    g = KEEP[prefix + "gen"] = Gen(consume)
    g.switch(home)


def worker(started):
    register_thread()
    home = greenlet.getcurrent()
    make_greenlets("w", home)
    if VARIANT == "inside":
        runner = KEEP["wrunner"] = greenlet.greenlet(worker_blocks)
        runner.switch(started)
    else:
        worker_blocks(started)


def worker_blocks(started):
    CURRENT[threading.get_native_id()] = id(greenlet.getcurrent())
    started.set(); _truth.HELD.acquire()  # noqa: E702


def gone():
    register_thread()
    home = greenlet.getcurrent()
    orphan = greenlet.greenlet(descend)
    orphan.switch(3, home)
    ORPHANS.append(orphan)
    LABELS[id(orphan)] = "orphan"


def main_blocks():
    _ready(); _truth.HELD.acquire()  # noqa: E702


def _ready():
    truth = record(sys._getframe(1), variant=VARIANT)
    # A raw greenlet parked by a switch waits on nothing (no gevent here).
    truth["waits"] = {str(e["address"]): None for e in truth["greenlets"]}
    _truth.write_truth(truth)


def main():
    register_thread()
    home = greenlet.getcurrent()
    make_greenlets("", home)
    if not _truth.FREE_THREADED:
        # greenlet 3.2.2 (the newest with a cp313t wheel) keeps no critical section per
        # greenlet (3.5.3 does): `sorted` holds one on its list, and leaving it by a switch
        # leaves the thread pointing at it; the next detach (`join` below) crashes.
        sorter = KEEP["sorter"] = greenlet.greenlet(by_key)
        sorter.switch(home)
    outer = KEEP["outer"] = greenlet.greenlet(outer_part)
    outer.switch(home)
    KEEP["pending"] = greenlet.greenlet(never_run)
    done = KEEP["done"] = greenlet.greenlet(quick)
    if done.switch() != 42 or not done.dead:
        _truth.fail("done did not finish")
    t = threading.Thread(target=gone, name="greenlet-gone")
    t.start()
    t.join()
    EXITED_MAINS.add(id(_PARENT(ORPHANS[0])))
    # The thread's end queued greenlet's clean-up of its state as a pending call, which this
    # thread runs at its next eval-loop check: let it run before recording.
    for _ in range(1000):
        pass
    _truth.start_threads({"greenlet-worker": worker})
    if VARIANT == "inside":
        runner = KEEP["runner"] = greenlet.greenlet(main_blocks)
        runner.switch()
    else:
        main_blocks()


if __name__ == "__main__":
    if VARIANT not in ("main", "inside"):
        _truth.fail("unknown variant %r" % VARIANT)
    main()

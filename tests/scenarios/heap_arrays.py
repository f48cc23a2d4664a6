"""The memory of numpy arrays (issue 51 item 4): arrays that own their data, views that do not,
and numpy scalars and arrays in a frame's locals. numpy comes from the folder named by
$PYUNWIND_NUMPY (tools/numpy.sh), put first on sys.path.

- ``ARRAYS``: a list (a module global) of 10 arrays that own their data, of several dtypes and
  shapes, each held by nothing else;
- ``VIEWS``: a list of 5 views, each of an array only that view holds (its ``base``);
- ``DTYPES``: the arrays' dtypes, held here too: a built-in dtype is one object shared by every
  array of it, so no list dominates it;
- the main thread's frame ``stop`` has numpy scalars of every kind pyunwind prints (integers,
  bool, float16/32/64, longdouble, complex64/128, clongdouble, str_, bytes_, datetime64,
  timedelta64, void; edge values: nan, inf, -0.0, a subnormal float16, large and small exponents, a
  float32 halfway between two shortest texts, non-ASCII text, NaT) and an array and a view as
  locals: the truth's ``locals`` are their ``repr``; and a structured ``np.void``, which
  pyunwind does not print.

The truth has ``arrays``: `{id: [getsizeof, nbytes, owns]}` for every array made here (the
views' bases too), ``lists``: the two lists' address, ``len``, ``sys.getsizeof`` and retained
bytes (the list's and each array's getsizeof, a view's base's too), ``numpy`` (its version),
``summaries``: `{local: text}` as pyunwind is to show an array, and ``rss`` (VmRSS, bytes)
read at the stop.
"""

import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.environ["PYUNWIND_NUMPY"])
import warnings  # noqa: E402

import _truth  # noqa: E402
import numpy as np  # noqa: E402

# numpy 2.5 warns of the generic time unit (np.timedelta64('NaT')): the stderr stays quiet.
warnings.simplefilter("ignore", DeprecationWarning)

ARRAYS = [np.ones(100_000 + i, dtype=dt) for i, dt in enumerate(
    ["float64", "float32", "int8", "int16", "int32", "int64", "uint8", "uint64", "bool",
     "complex128"])]
ARRAYS[1] = np.zeros((300, 400), dtype="float32")
ARRAYS[2] = np.zeros((20, 30, 40), dtype="int8")
VIEWS = [np.arange(1000.0 * (i + 1))[::2] for i in range(5)]
DTYPES = [a.dtype for a in ARRAYS + VIEWS]


def record_array(a, out):
    out[str(id(a))] = [sys.getsizeof(a), a.nbytes, bool(a.flags.owndata)]


def summary(a):
    return "<numpy.ndarray shape=%s dtype=%s at %#x>" % (a.shape, a.dtype, id(a))


def rss():
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return None


def record(grid, part):
    """The truth's arrays and lists (in a function of its own: its loop variables, which hold
    arrays, are gone when it returns)."""
    arrays = {}
    for a in ARRAYS + VIEWS + [v.base for v in VIEWS] + [grid, part]:
        record_array(a, arrays)
    lists = []
    for lst, parts in ((ARRAYS, ARRAYS), (VIEWS, VIEWS + [v.base for v in VIEWS])):
        lists.append({"address": id(lst), "len": len(lst), "bytes": sys.getsizeof(lst),
                      "retained": sys.getsizeof(lst) + sum(sys.getsizeof(p) for p in parts)})
    return {"arrays": arrays, "lists": lists, "numpy": np.__version__,
            "summaries": {"grid": summary(grid), "part": summary(part)}}


def stop():
    # The locals are what the test reads (F841: assigned, never used).
    i8 = np.int8(-3)  # noqa: F841
    u16 = np.uint16(65000)  # noqa: F841
    i64 = np.int64(1234567890123)  # noqa: F841
    f64 = np.float64(1.5)  # noqa: F841
    f32 = np.float32(0.1)  # noqa: F841
    flag = np.True_  # noqa: F841
    # An alias type of its own (tp_name numpy.longlong): numpy 2 writes np.int64(5).
    ll = np.longlong(5)  # noqa: F841
    ull = np.ulonglong(3)  # noqa: F841
    h = np.float16(1.5)  # noqa: F841
    h_max = np.float16(65504)  # noqa: F841
    h_sub = np.float16(6e-08)  # noqa: F841
    h_small = np.float16(1e-4)  # noqa: F841
    h_below = np.nextafter(np.float16(1e-4), np.float16(0))  # noqa: F841
    h_neg0 = np.float16(-0.0)  # noqa: F841
    h_nan = np.float16("nan")  # noqa: F841
    h_thousand = np.float16(1000)  # noqa: F841
    f32_tie = np.float32(312985.125)  # noqa: F841
    f32_1e4 = np.float32(1e-4)  # noqa: F841
    f32_million = np.float32(1e6)  # noqa: F841
    f32_ninf = np.float32("-inf")  # noqa: F841
    f64_big = np.float64(1e16)  # noqa: F841
    f64_sub = np.float64(5e-324)  # noqa: F841
    f64_max = np.float64(1.7976931348623157e308)  # noqa: F841
    f64_neg_nan = -np.float64("nan")  # noqa: F841
    c128 = np.complex128(1 + 2j)  # noqa: F841
    c128_neg = np.complex128(complex(-0.0, -1.0))  # noqa: F841
    c128_nan = np.complex128(complex("nan+infj"))  # noqa: F841
    c128_zero = np.complex128(0j)  # noqa: F841
    c128_imag = np.complex128(complex(0.0, -2.5))  # noqa: F841
    c128_wide = np.complex128(1e20 + 1e-5j)  # noqa: F841
    c64 = np.complex64(0.1 + 0.2j)  # noqa: F841
    c64_big = np.complex64(1e7 + 1j)  # noqa: F841
    ld = np.longdouble("1.5")  # noqa: F841
    ld_third = np.longdouble(1) / np.longdouble(3)  # noqa: F841
    ld_tenth = np.longdouble("0.1")  # noqa: F841
    ld_huge = np.longdouble("1e4000")  # noqa: F841
    ld_tiny = np.longdouble("1e-4000")  # noqa: F841
    ld_1e4 = np.longdouble("1e-4")  # noqa: F841
    ld_below = np.nextafter(np.longdouble("1e-4"), np.longdouble(0))  # noqa: F841
    ld_nan = np.longdouble("nan")  # noqa: F841
    cld = np.clongdouble(1 + 2j)  # noqa: F841
    text = np.str_("abc")  # noqa: F841
    text_uni = np.str_("h\u00e9\u6f22\U0001F600\n")  # noqa: F841
    text_quote = np.str_("it's")  # noqa: F841
    raw = np.bytes_(b"ab")  # noqa: F841
    raw_bin = np.bytes_(b"\x00\xff'")  # noqa: F841
    day = np.datetime64("2024-01-01")  # noqa: F841
    noon = np.datetime64("2024-01-01T12:00:00")  # noqa: F841
    nanos = np.datetime64("2024-01-01T12:00:00.123456789")  # noqa: F841
    hour = np.datetime64("2024-01-01T12", "h")  # noqa: F841
    month = np.datetime64("2024-03")  # noqa: F841
    year = np.datetime64("2024", "Y")  # noqa: F841
    week = np.datetime64(5, "W")  # noqa: F841
    three_s = np.datetime64(10, "3s")  # noqa: F841
    ancient = np.datetime64("-0100-01-01")  # noqa: F841
    before_epoch = np.datetime64(-1, "s")  # noqa: F841
    nat = np.datetime64("NaT")  # noqa: F841
    nat_s = np.datetime64("NaT", "s")  # noqa: F841
    span = np.timedelta64(5, "s")  # noqa: F841
    span_nat = np.timedelta64("NaT")  # noqa: F841
    span_nat_s = np.timedelta64("NaT", "s")  # noqa: F841
    span_10ms = np.timedelta64(3, "10ms")  # noqa: F841
    span_back = np.timedelta64(-7, "D")  # noqa: F841
    blob = np.void(b"a\xff\x00")  # noqa: F841
    blob_empty = np.void(b"")  # noqa: F841
    # Structured: numpy makes its text in Python; pyunwind shows it as any other object.
    structured = np.zeros(1, dtype=[("a", "i4"), ("b", "f8")])[0]  # noqa: F841
    grid = np.zeros((1000, 1000))
    part = grid[::2, ::5]
    _truth.ready(with_locals=True, rss=rss(), **record(grid, part))
    _truth.HELD.acquire()


stop()

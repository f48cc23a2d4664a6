"""Calls spanning several lines, stopped while they are in progress.

``compose`` is stopped in a call that is the middle argument of a call spanning five lines
(marked "middle"). On 3.11+ the scenario checks that the interpreter reports that middle line;
on 3.10 it records whatever ``f_lineno`` says. ``main`` is stopped in a call that itself spans
four lines (its first line is marked "outer"); the truth records what each version reports.
"""

import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402

# Built so that these lines do not contain the markers themselves.
MIDDLE = "# <" + "middle>"
OUTER = "# <" + "outer>"


def combine(*parts):
    return sum(parts)


def wait_here(x):
    caller = sys._getframe(1)
    middle = _truth.source_line_of(MIDDLE, __file__)
    if sys.version_info >= (3, 11) and caller.f_lineno != middle:
        _truth.fail("compose is on line %d, expected %d" % (caller.f_lineno, middle))
    outer = _truth.source_line_of(OUTER, __file__)
    _truth.ready(middle_line=middle, outer_line=outer); _truth.HELD.acquire()  # noqa: E702
    return x


def compose(a):
    total = combine(
        a,
        a + 1,
        wait_here(a + 2),  # <middle>
        a + 3,
    )
    return total


def main():
    start = 1
    return compose(  # <outer>
        start
        + 0,
    )


if __name__ == "__main__":
    main()

"""A frame holding locals of every kind the decoder must print.

The truth of the stopping frame (``inspect_me``) carries ``"locals": {name: repr(value)}``,
and each value's type (``tp_name``) and id, and the frame's argument names (``_truth.collect``).
``counter`` is a cell variable, read by the closure ``bump``.
"""

import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402


class Thing:
    def __init__(self, label):
        self.label = label


def inspect_me():
    none = None
    yes = True
    no = False
    small = 7
    negative = -42
    big = 2**100
    big_negative = -(2**70)
    half = 1.5
    ascii_text = "hello"
    latin1_text = "café"
    ucs2_text = "日本"
    ucs4_text = "𝄞x"
    raw = b"ab\x00"
    pair = (1, "a")
    items = [1, 2]
    mapping = {"k": 1}
    members = {3}
    thing = Thing("t")
    counter = 41

    def bump():
        return counter + 1

    _truth.ready(with_locals=True); _truth.HELD.acquire()  # noqa: E702
    return (none, yes, no, small, negative, big, big_negative, half, ascii_text, latin1_text,
            ucs2_text, ucs4_text, raw, pair, items, mapping, members, thing, bump())


def main():
    inspect_me()


if __name__ == "__main__":
    main()

"""Helper module with a non-ASCII file name, imported by unicode_names.py.

Its function names cover every string width CPython stores: latin-1 (grüße),
UCS-2 (函数) and UCS-4 (𠀋, U+2000B, a CJK letter that NFKC leaves alone).
"""

import _truth


def 𠀋(depth):
    _truth.ready(); _truth.HELD.acquire()  # noqa: E702
    return depth


def 函数(depth):
    return 𠀋(depth + 1)


class Straße:
    def grüße(self, depth):
        return 函数(depth + 1)

"""Non-ASCII function, class and file names: the stop is inside modulé_ñ.py.

main -> données -> Straße.grüße -> 函数 -> 𠀋 (stop); the last three live in modulé_ñ.py.
"""

import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402,F401
import modulé_ñ  # noqa: E402


def données():
    return modulé_ñ.Straße().grüße(1)


def main():
    données()


if __name__ == "__main__":
    main()

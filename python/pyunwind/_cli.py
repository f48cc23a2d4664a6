"""The `pyunwind` command of the pip package: the command line is the Rust one
(`_pyunwind.cli_main`, the same code as the standalone binary); this only tells it where the
debugger scripts of this installation are."""

import os
import sys

from . import _pyunwind

_HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    sys.stdout.flush()
    return _pyunwind.cli_main(
        ["pyunwind"] + sys.argv[1:],
        os.path.join(_HERE, "pyunwind-gdb.py"),
        os.path.join(_HERE, "pyunwind_lldb.py"),
    )


if __name__ == "__main__":
    sys.exit(main())

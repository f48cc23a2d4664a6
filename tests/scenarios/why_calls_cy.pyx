# cython: language_level=3
"""A Cython module for tests/scenarios/why_calls.py: ``Worker.block()``, a method (its
qualified name is ``Worker.block``), releases the GIL and waits for good in libc's ``pause``,
under the Cython function's own C code."""

cdef extern from "unistd.h" nogil:
    int pause()


class Worker:
    def block(self):
        with nogil:
            while True:
                pause()

"""One chain through the usual kinds of Python frame, stopped at its innermost end.

main -> Shape.area (a property: reached through C) -> Shape.method -> nested (a closure,
iterating a generator with a for loop) -> produce (the generator body) -> a lambda ->
wrapper (a functools.wraps decorator) -> decorated -> a list comprehension (its own
<listcomp> frame on 3.10/3.11, inlined into decorated on 3.12+) -> leaf.
"""

import functools
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _truth  # noqa: E402


def leaf(i):
    _truth.ready(); _truth.HELD.acquire()  # noqa: E702
    return i


def logged(func):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return func(*args, **kwargs)

    return wrapper


@logged
def decorated(n):
    return [leaf(i) for i in range(n)]


def produce(n, transform):
    for k in range(n):
        yield transform(k + 1)


class Shape:
    def __init__(self, size):
        self.size = size

    @property
    def area(self):
        return self.method()

    def method(self):
        size = self.size

        def nested():
            results = []
            for value in produce(size, lambda k: decorated(k)):
                results.append(value)
            return results

        return nested()


def main():
    return Shape(1).area


if __name__ == "__main__":
    main()

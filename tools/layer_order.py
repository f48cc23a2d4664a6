#!/usr/bin/env python3
"""The layers of src/ in DESIGN.md's order (issue 50): exits 1 and names each file:line that
uses a layer listed after its own.

A layer is a top-level module of the crate (a folder of src/, or a file such as
`src/target.rs`). `LAYERS` lists them in DESIGN.md's order, a row per line of its table. A
file may use its own layer and those of the rows before it. Within a row the layers are listed
in the order they may use each other: a layer may use one listed before it in its row, never
one after it, so two layers of a row never use each other both ways (`unwind` uses
`target`; `binary` and `symbols`, and `asyncio`, `greenlet` and `native`, use none of their
row's others; `python`, the pyo3 module, runs the command line's `cli` for `pyunwind` inside a debugger, so
the table's `python`, `cli` is listed here `cli`, `python`).

What counts as a use is what tools/import_cycles.py reads: every `crate::`/`super::`/`self::`
path and every path through a name a `use` bound, outside comments, strings and
`#[cfg(test)]` items (test code may build fixtures from any layer).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from import_cycles import references  # noqa: E402

# DESIGN.md's "Layers" table, one row per line, then the crate root's own files: the
# foundation under every layer (the error type, the panic boundary, the thread pool, the
# CLI's allocator) and the report model every layer fills.
LAYERS = [
    ["error", "panic", "parallel", "allocator", "model"],
    ["arch"],
    ["memory"],
    ["binary", "symbols"],
    ["target", "unwind"],
    ["cpython"],
    ["asyncio", "greenlet", "native"],
    ["session"],
    ["why"],
    ["heap"],
    ["report"],
    ["sample"],
    # `python` runs the command line (`pyunwind` inside a debugger), never the reverse.
    ["cli", "python"],
]


def rank(layer):
    """(row, place in the row) of `layer`, or None when the table does not list it."""
    for row, names in enumerate(LAYERS):
        if layer in names:
            return row, names.index(layer)
    return None


def violations(root):
    """(file, line, its layer, the layer it uses) for each use of a layer listed after its
    own, and (file, None, layer, None) for each layer the table does not list."""
    out, unlisted = [], set()
    for here, path, line, dep in references(root):
        if not here or not dep or here[0] == dep[0]:
            continue
        a, b = rank(here[0]), rank(dep[0])
        for layer, r in ((here[0], a), (dep[0], b)):
            if r is None and layer not in unlisted:
                unlisted.add(layer)
                out.append((path, None, layer, None))
        if a is None or b is None:
            continue
        same_row_after = a[0] == b[0] and b[1] > a[1]
        if b[0] > a[0] or same_row_after:
            out.append((path, line, here[0], dep[0]))
    return out


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "src"
    found = violations(root)
    seen = set()
    for path, line, layer, dep in found:
        if line is None:
            print("%s: layer %s is not in tools/layer_order.py's LAYERS" % (path, layer))
        elif (path, line, dep) not in seen:
            seen.add((path, line, dep))
            print("%s:%d: %s uses %s, listed after it" % (path, line, layer, dep))
    if found:
        return 1
    print("every layer of %s uses only its own and those listed before it" % root)
    return 0


if __name__ == "__main__":
    sys.exit(main())

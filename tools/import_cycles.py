#!/usr/bin/env python3
"""Import cycles between the files of src/ (issue 42): exits 1 and names each cycle.

A file depends on another when it names an item of it: through `use crate::…`/`use super::…`,
or a path that starts at `crate`, `super`, `self` or a name a `use` bound to a module. A module
naming its own submodules (declared with `mod`) is not counted: that is how Rust nests, and the
submodule is the part; what is counted is a part naming its whole or a sibling. Comments, doc
links and `#[cfg(test)]` code are ignored.
"""
import os
import re
import sys

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def modules(root):
    out = {}
    for d, _, fs in os.walk(root):
        for f in fs:
            if not f.endswith(".rs"):
                continue
            path = os.path.join(d, f)
            parts = os.path.relpath(path, root)[:-3].split(os.sep)
            if parts[0] == "bin":
                continue
            is_dir = parts[-1] in ("mod", "lib")
            if is_dir:
                parts = parts[:-1]
            out[tuple(parts)] = (path, is_dir)
    return out


def code_of(path):
    src = open(path, encoding="utf-8").read()
    cut = src.find("#[cfg(test)]")
    if cut >= 0:
        src = src[:cut]
    src = re.sub(r"//[^\n]*", "", src)
    src = re.sub(r'"(\\.|[^"\\])*"', '""', src)
    return src


def use_paths(tree, prefix=()):
    """Expand a use tree (`a::{b, c::{d as e}}`) into (bound name, full path) pairs."""
    tree = tree.strip()
    m = re.match(r"^(.*?)::\{(.*)\}$", tree, re.S)
    if m:
        head = prefix + tuple(p for p in m.group(1).split("::") if p)
        body, depth, part, parts = m.group(2), 0, "", []
        for ch in body:
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            if ch == "," and depth == 0:
                parts.append(part)
                part = ""
            else:
                part += ch
        parts.append(part)
        for p in parts:
            if p.strip():
                yield from use_paths(p, head)
        return
    name = None
    m = re.match(r"^(.*?)\s+as\s+(%s)$" % IDENT, tree)
    if m:
        tree, name = m.group(1), m.group(2)
    path = prefix + tuple(p for p in tree.split("::") if p)
    if path and path[-1] == "self":
        path = path[:-1]
    if path and path[-1] != "*":
        yield (name or path[-1], path)


def absolute(path, here, here_is_dir):
    """`path` from the module `here` as a path from the crate root, or None (another crate)."""
    base = list(here) if here_is_dir else list(here[:-1])
    if not path:
        return None
    if path[0] == "crate":
        return list(path[1:])
    if path[0] == "self":
        return list(here) + list(path[1:])
    if path[0] == "super":
        cur = list(here)
        rest = list(path)
        while rest and rest[0] == "super":
            cur = cur[:-1]
            rest = rest[1:]
        return cur + rest
    return None


def resolve(path, mods):
    for n in range(len(path), 0, -1):
        if tuple(path[:n]) in mods:
            return tuple(path[:n])
    return None


def edges(root):
    mods = modules(root)
    out = {}
    for here, (path, is_dir) in mods.items():
        src = code_of(path)
        bound = {}
        deps = set()
        for m in re.finditer(r"\buse\s+([^;]+);", src):
            for name, p in use_paths(m.group(1)):
                full = absolute(p, here, is_dir)
                if full is None:
                    continue
                bound[name] = full
                deps.add(resolve(full, mods))
        for m in re.finditer(r"\b(%s(?:::%s)+)" % (IDENT, IDENT), src):
            p = m.group(1).split("::")
            if p[0] in ("crate", "super", "self"):
                full = absolute(p, here, is_dir)
            elif p[0] in bound:
                full = bound[p[0]] + p[1:]
            else:
                continue
            deps.add(resolve(full, mods))
        deps.discard(None)
        # Not counted: itself, the crate root, and its own submodules.
        out[here] = {d for d in deps if d != here and d != () and d[: len(here)] != here}
    return out


def cycles(graph):
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "src"
    graph = edges(root)
    found = cycles(graph)
    name = lambda m: "/".join(m)
    for comp in found:
        print("import cycle: " + ", ".join(name(m) for m in comp))
        for a in comp:
            for b in sorted(graph[a]):
                if b in comp:
                    print("    %s -> %s" % (name(a), name(b)))
    if found:
        return 1
    print("no import cycles between the %d files of %s" % (len(graph), root))
    return 0


if __name__ == "__main__":
    sys.exit(main())

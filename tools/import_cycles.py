#!/usr/bin/env python3
"""Import cycles between the files of src/ (issue 42): exits 1 and names each cycle.

A file depends on another when it names an item of it: through `use crate::…`/`use super::…`,
or a path that starts at `crate`, `super`, `self` or a name a `use` bound to a module. A module
naming its own submodules (declared with `mod`) is not counted: that is how Rust nests, and the
submodule is the part; what is counted is a part naming its whole or a sibling. Comments, doc
links and `#[cfg(test)]` items are ignored, and so are the files of test modules
(`#[cfg(test)] mod tests;`): test code may build fixtures from any layer.
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
    return {m: v for m, v in out.items() if not test_only(m, out)}


def test_only(module, mods):
    """Whether `module`'s file is a test module: its parent declares it `#[cfg(test)] mod`."""
    if len(module) < 1 or module[:-1] not in mods:
        return False
    parent = open(mods[module[:-1]][0], encoding="utf-8").read()
    pattern = r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+%s\s*;" % re.escape(module[-1])
    return re.search(pattern, parent) is not None


def blank(text):
    """`text` with every character but newlines made a space, so lines keep their numbers."""
    return re.sub(r"[^\n]", " ", text)


def item_end(src, at):
    """Where the item that starts at `at` ends: after its `;`, or its braces' close."""
    depth = 0
    for i in range(at, len(src)):
        ch = src[i]
        if ch == ";" and depth == 0:
            return i + 1
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i + 1
    return len(src)


def code_of(path):
    """The code of `path` with comments, string contents and `#[cfg(test)]` items (a test
    module, a test-only `impl`, `fn` or `const`) blanked out, line numbers kept."""
    src = open(path, encoding="utf-8").read()
    src = re.sub(r"//[^\n]*", lambda m: blank(m.group(0)), src)
    src = re.sub(r'"(\\.|[^"\\])*"', lambda m: '"' + blank(m.group(0)[1:-1]) + '"', src)
    out, pos = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]", src):
        if m.start() < pos:
            continue
        end = item_end(src, m.end())
        out += [src[pos : m.start()], blank(src[m.start() : end])]
        pos = end
    return "".join(out) + src[pos:]


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


def references(root):
    """(module, its file, line, the module it names) for every name of another module of
    the crate in the code of each file of `root` (the module named may be the same one, the
    crate root or a submodule: `edges` says which count)."""
    mods = modules(root)
    for here, (path, is_dir) in sorted(mods.items()):
        src = code_of(path)
        line = lambda at: src.count("\n", 0, at) + 1
        bound = {}
        for m in re.finditer(r"\buse\s+([^;]+);", src):
            for name, p in use_paths(m.group(1)):
                full = absolute(p, here, is_dir)
                if full is None:
                    continue
                bound[name] = full
                dep = resolve(full, mods)
                if dep is not None:
                    yield here, path, line(m.start()), dep
        for m in re.finditer(r"\b(%s(?:::%s)+)" % (IDENT, IDENT), src):
            p = m.group(1).split("::")
            if p[0] in ("crate", "super", "self"):
                full = absolute(p, here, is_dir)
            elif p[0] in bound:
                full = bound[p[0]] + p[1:]
            else:
                continue
            dep = resolve(full, mods)
            if dep is not None:
                yield here, path, line(m.start()), dep


def edges(root):
    out = {here: set() for here in modules(root)}
    for here, _, _, dep in references(root):
        # Not counted: itself, the crate root, and its own submodules.
        if dep != here and dep != () and dep[: len(here)] != here:
            out[here].add(dep)
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

#!/usr/bin/env python3
"""Functions that fit on a screen and files that fit in a head (issue 50, item 3): exits 1 and
names each Rust function over MAX_FN_LINES lines (from its `fn` line to its closing brace) and
each Rust or Python file over MAX_FILE_LINES lines, under the directories given.

The version layout tables (src/cpython/layout/v3_*.rs) are data, one long constructor each,
and are left out of the function check. Braces inside string and char literals and comments
are not counted (a simple scanner: `"..."` with escapes, raw strings `r#"..."#`, `'x'` chars,
`//` and `/* */` comments); lifetimes (`'a`) are not chars.

    python3 tools/sizes.py src pylib lldb-scripts gdb-scripts
"""
import os
import re
import sys

MAX_FN_LINES = 150
MAX_FILE_LINES = 800
# Data, not code: one constructor per CPython version.
EXEMPT_FN = re.compile(r"(^|/)cpython/layout/v3_\d+\.rs$")
FN_START = re.compile(
    r"^\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?(extern\s+\"[^\"]*\"\s+)?fn\s+(\w+)"
)


def code_only(text):
    """`text` with string, char and comment contents blanked (newlines kept), so that only
    the code's own braces remain."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and not (i and (text[i - 1].isalnum() or text[i - 1] == "_")):
            hashes = re.match(r"r(#*)\"", text[i:]).group(1)
            end = '"' + hashes
            j = text.find(end, i + 2 + len(hashes))
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'":
            # A char literal ('x', '\n', '\u{..}', '{'); a lifetime ('a) has no closing quote
            # right after its name.
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'", text[i:i + 12])
            if m:
                out.append(" " * len(m.group(0)))
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def long_functions(path, text):
    """(name, first line, lines) of each function of `text` over MAX_FN_LINES lines."""
    lines = code_only(text).split("\n")
    found = []
    for start, line in enumerate(lines):
        m = FN_START.match(line)
        if not m:
            continue
        depth, opened = 0, False
        for end in range(start, len(lines)):
            for ch in lines[end]:
                if ch == "{":
                    depth, opened = depth + 1, True
                elif ch == "}":
                    depth -= 1
                elif ch == ";" and not opened and depth == 0:
                    break  # a declaration without a body (a trait's)
            else:
                if opened and depth == 0:
                    count = end - start + 1
                    if count > MAX_FN_LINES:
                        found.append((m.group(7), start + 1, count))
                    break
                continue
            break
    return found


def main(roots):
    problems = []
    for root in roots:
        for dirpath, dirnames, files in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d not in ("__pycache__", "target"))
            for f in sorted(files):
                if not f.endswith((".rs", ".py")):
                    continue
                path = os.path.join(dirpath, f)
                with open(path, encoding="utf-8") as fh:
                    text = fh.read()
                n = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
                if n > MAX_FILE_LINES:
                    problems.append(f"{path}: {n} lines (at most {MAX_FILE_LINES})")
                if f.endswith(".rs") and not EXEMPT_FN.search(path):
                    for name, line, count in long_functions(path, text):
                        problems.append(
                            f"{path}:{line}: fn {name}: {count} lines (at most {MAX_FN_LINES})"
                        )
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__.strip().splitlines()[-1].strip())
    sys.exit(main(sys.argv[1:]))

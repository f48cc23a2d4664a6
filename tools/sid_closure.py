"""Print `package=version` for the dependency closure of some Debian packages.

stdin: a Packages index; argv[1]: the packages wanted; argv[2]: packages left out (with their
own dependencies, unless something else needs those). The first alternative of each
Depends/Pre-Depends is followed; virtual packages resolve to their first provider.
"""
import sys


def stanzas(text):
    for block in text.split("\n\n"):
        fields, key = {}, None
        for line in block.splitlines():
            if line[:1] in (" ", "\t"):
                continue
            key, _, value = line.partition(":")
            fields[key] = value.strip()
        if "Package" in fields:
            yield fields


def main():
    wanted, skip = sys.argv[1].split(), set(sys.argv[2].split())
    by_name = {}
    for f in stanzas(sys.stdin.read()):
        by_name.setdefault(f["Package"], f)
        for provided in f.get("Provides", "").split(","):
            name = provided.split("(")[0].strip()
            if name:
                by_name.setdefault("virtual:" + name, f)
    chosen = {}
    while wanted:
        name = wanted.pop()
        if name in chosen or name in skip:
            continue
        f = by_name.get(name) or by_name.get("virtual:" + name)
        if f is None:
            sys.exit("sid_closure: no package %s" % name)
        chosen[name] = f
        for field in ("Pre-Depends", "Depends"):
            for dep in f.get(field, "").split(","):
                first = dep.split("|")[0].split("(")[0].split(":")[0].strip()
                if first:
                    wanted.append(first)
    for f in {f["Package"]: f for f in chosen.values()}.values():
        print("%s=%s" % (f["Package"], f["Version"]))


main()

"""Seed corpus of the `decoders` fuzz target: memory images of real stops.

    python tools/fuzz/seed_corpus.py IMAGE_FROM_CORE_BINARY CORPUS_DIR

Makes the campaign's x86-64 base cores (every supported interpreter, each scenario) and writes,
for each, the image of every range of memory `pyunwind core --locals --tasks` reads from it
(fuzz/src/bin/image_from_core.rs). The cores are removed; the images (tens of KiB each) stay.
"""

import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import campaign  # noqa: E402


def main():
    tool, corpus = sys.argv[1], sys.argv[2]
    os.makedirs(corpus, exist_ok=True)
    root = tempfile.mkdtemp(prefix="pyunwind-seed-")
    try:
        # x86-64 only: image-from-core takes --exe, not the sysroot a qemu core needs.
        pairs = [(i, sc) for i in campaign.interpreters(("x86_64",)) for sc in campaign.SCENARIOS]
        for base in campaign.make_bases(pairs, root):
            out = os.path.join(corpus, "%s-%s.img" % (base["interp"], base["scenario"]))
            subprocess.run([tool, base["core"], out, "--exe", base["exe"]], check=True,
                           env=dict(os.environ, **base["env"]))
            print("%s: %d bytes" % (out, os.path.getsize(out)))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

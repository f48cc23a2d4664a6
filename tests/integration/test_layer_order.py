"""tools/layer_order.py (issue 50 item 2): src/ as it is passes, and a tree that reaches up, or
reaches across a row the wrong way, fails with each file:line named, exactly."""
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "layer_order.py"


def run(src):
    p = subprocess.run([sys.executable, str(TOOL), str(src)], capture_output=True, text=True,
                       timeout=60)
    return p.returncode, p.stdout.splitlines()


def write(root, files):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_src_keeps_the_order():
    rc, out = run(ROOT / "src")
    assert (rc, out) == (0, ["every layer of %s uses only its own and those listed before it"
                             % (ROOT / "src")])


def test_each_use_of_a_later_layer_is_named(tmp_path):
    src = tmp_path / "src"
    write(src, {
        "lib.rs": "pub mod memory;\npub mod model;\npub mod report;\npub mod target;\n"
                  "pub mod unwind;\npub mod cli;\npub mod python;\n",
        "model/mod.rs": "pub struct Report;\n",
        # Reaches up twice (a `use` and a path), and names the model, which is allowed.
        "memory/mod.rs": "mod crash;\nuse crate::model::Report;\n#[cfg(test)]\nmod tests;\n"
                         "mod checks;\n",
        # A test module's own file may build fixtures from any layer; a module that is not
        # one, though named like one, may not.
        "memory/tests.rs": "use crate::report::text;\n",
        "memory/checks.rs": "\nuse crate::report::text;\n",
        "memory/crash.rs": "// crate::report::Crash in a comment does not count\n"
                           "use crate::report::text;\n"
                           "fn f() { crate::unwind::step(); }\n"
                           "#[cfg(test)]\nmod tests {\n    use crate::report::text;\n}\n"
                           "fn g() { super::Report; }\n",
        "report/mod.rs": "pub mod text;\nuse crate::memory::hex;\n",
        "report/text.rs": "",
        # Same row, the wrong way: target is listed before unwind; cli before python.
        "target.rs": "use crate::unwind::Stack;\n",
        "unwind/mod.rs": "use crate::target::Target;\npub fn step() {}\n",
        "cli/mod.rs": "use crate::python::Module;\n",
        "python/mod.rs": "use crate::cli::run;\n",
    })
    rc, out = run(src)
    assert rc == 1
    assert out == [
        "%s/cli/mod.rs:1: cli uses python, listed after it" % src,
        "%s/memory/checks.rs:2: memory uses report, listed after it" % src,
        "%s/memory/crash.rs:2: memory uses report, listed after it" % src,
        "%s/memory/crash.rs:3: memory uses unwind, listed after it" % src,
        "%s/target.rs:1: target uses unwind, listed after it" % src,
    ]


def test_a_layer_the_table_does_not_list(tmp_path):
    src = tmp_path / "src"
    write(src, {"lib.rs": "pub mod extra;\npub mod arch;\n",
                "extra.rs": "use crate::arch::Regs;\n",
                "arch/mod.rs": "pub struct Regs;\n"})
    rc, out = run(src)
    assert (rc, out) == (1, ["%s/extra.rs: layer extra is not in tools/layer_order.py's LAYERS"
                             % src])

"""The editor configurations of docs/editors.md, as the tests run them: each fenced block after
an `<!-- editors-test: NAME -->` line, with the doc's placeholders replaced by this checkout,
the scenario's process, core and interpreter."""

import json
import re

import harness

DOC = harness.repo_root() / "docs" / "editors.md"
CHECKOUT = "/path/to/pyunwind"
CORE = "${workspaceFolder}/core"
PICK_PROCESS = "${command:pickProcess}"
NVIM_PICK_PROCESS = 'require("dap.utils").pick_process'
# The doc's interpreter: Debian's stripped python3.11, one of the test matrix.
PROGRAM = harness.DEBIAN_PYTHON311


def block(name):
    """The text of the fenced block tagged NAME."""
    text = DOC.read_text(encoding="utf-8")
    m = re.search(r"^<!-- editors-test: %s -->\n```\w*\n(.*?)^```$" % re.escape(name), text, re.M | re.S)
    assert m, "no block tagged %s in %s" % (name, DOC)
    return m.group(1).replace(CHECKOUT, str(harness.repo_root()))


def substitute(value, pid=None, core=None):
    """A configuration with the process id and core path filled in."""
    if isinstance(value, dict):
        return {k: substitute(v, pid, core) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, pid, core) for v in value]
    if value == PICK_PROCESS:
        return pid
    if isinstance(value, str) and CORE in value:
        return value.replace(CORE, core or "")
    return value


def vscode(name):
    """{configuration name: configuration} of a launch.json block."""
    configs = json.loads(block(name))["configurations"]
    for c in configs:
        assert c["program"] == PROGRAM, c
    return {c["name"]: c for c in configs}


def dap_arguments(config, pid=None, core=None):
    """The launch/attach request's arguments an editor sends for a configuration: every
    attribute but VS Code's own (name, type, request)."""
    return {k: v for k, v in substitute(config, pid, core).items() if k not in ("name", "type", "request")}


def nvim():
    """(adapters, configurations) of the nvim-dap block: {name: {command, args}} and a list of
    dicts, read from its simple Lua tables."""
    lua = block("nvim-dap")
    adapters = {}
    for m in re.finditer(r'dap\.adapters(?:\.(\w+)|\["([\w-]+)"\]) = \{(.*?)\n\}', lua, re.S):
        body = m.group(3)
        command = re.search(r'command = "([^"]+)"', body).group(1)
        args = re.search(r"args = \{(.*?)\}", body)
        adapters[m.group(1) or m.group(2)] = {
            "command": command, "args": re.findall(r'"([^"]*)"', args.group(1)) if args else []}
    configurations = []
    section = lua[lua.index("dap.configurations"):]
    for entry in re.findall(r"\n  \{\n(.*?)\n  \},", section, re.S):
        config = {}
        for key, value in re.findall(r"^\s*(\w+) = (.*?),?$", entry, re.M):
            if value.startswith("{"):
                config[key] = re.findall(r'"([^"]*)"', value)
            elif value == NVIM_PICK_PROCESS:
                config[key] = PICK_PROCESS
            else:
                config[key] = json.loads(value)
        configurations.append(config)
    assert configurations, lua
    return adapters, configurations

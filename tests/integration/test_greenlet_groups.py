"""Greenlets grouped across processes (issue 38 item 3, its real job of item 5): gunicorn 27 with
2 gevent workers (tests/scenarios/why_gunicorn.py with N requests of each kind), requests parked
in the app, N on a socket to an upstream the scenario owns (never answered) and N in
``gevent.sleep``. Each request records its truth in the app (why_gunicorn_app.record): the
worker's pid, its greenlet's address, its thread, its frames (function, file, line) and its
socket. Each process also takes a census of its own greenlets from `gc` (why_gunicorn_app.census:
the arbiter's when ready, each worker's once its requests have parked), which `suspended` maps
to the greenlets the reader must find suspended: the requests, each worker's main greenlet,
gevent's pool threads' main greenlets.

Checked, exactly, against those truths:

- every greenlet group (its stack and members) and the headings' counts, e.g. `greenlets: 4
  groups of identical suspended stacks, 14 greenlets` and `greenlets: call tree of 14 greenlets
  suspended over 3 processes: outermost frames first`, from the censuses;
- `pid --children ARBITER --group --greenlets --json`: one greenlet group per kind of request
  holding exactly that kind's greenlets (pid, address, thread), with the request's frames under
  gevent's own (the socket's methods, `gevent.sleep`), its count and processes, and each
  greenlet's wait (a socket's fd, local and peer addresses; `sleep`); the text headline, e.g.
  `3 greenlets in 2 processes wait in upstream (why_gunicorn_app.py:68): socket 127.0.0.1:PORT`;
- `--tree --greenlets --json`: `greenlet_tree`, each request's path from its outermost frame in,
  with the number of request greenlets through each node, and the greenlets at its leaf;
- `merge` of per-process reports saved with `--greenlets --json` (the arbiter's and each
  worker's): the same groups and tree;
- `core C...` of gcore cores of the arbiter and the workers: the same groups, the sockets
  without their addresses (a core has no /proc).

Each check is shown to fail on altered copies of what the CLI printed. The workers are stopped
(SIGSTOP) while they are read: a running gevent worker's hub wakes every second, and its GC
list, on which greenlets are found, may change under the reader.
"""

import collections
import copy
import json
import os
import signal
import socket
import subprocess

import pytest

import harness
from test_greenlets import GEVENT_ABSENT
from test_why_gunicorn import greenlet_dir, gunicorn_dir
from test_why_io import core_of

HOST = socket.gethostname()
CLI_TIMEOUT_SECONDS = 120
# Requests of each kind (upstream, sleep): over 2 workers.
PER_KIND = 4
KINDS = ["upstream", "sleep"]
INTERPS = [i for i in harness.pick(["pyenv-3.12", "pyenv-3.10", "debian-3.14"])
           if i.id not in GEVENT_ABSENT]


def cli(*args):
    """Runs the CLI; returns stdout. Every JSON document it prints is checked against
    docs/report.schema.json."""
    proc = subprocess.run([str(harness.cli_path()), *map(str, args)], capture_output=True,
                          text=True, timeout=CLI_TIMEOUT_SECONDS, stdin=subprocess.DEVNULL)
    harness.assert_no_panic(proc.stderr, proc.returncode)
    assert proc.returncode == 0, proc.stderr
    if "--json" in args:
        for line in proc.stdout.splitlines():
            harness.check_report_schema(json.loads(line))
    return proc.stdout


@pytest.fixture(scope="module", params=INTERPS, ids=lambda i: i.id)
def job(request):
    interp = request.param
    env = {"PYUNWIND_GUNICORN": str(gunicorn_dir()),
           "PYUNWIND_GREENLET": str(greenlet_dir(interp))}
    with harness.Scenario(interp, "why_gunicorn", args=["gevent", str(PER_KIND)], env=env,
                          timeout=90) as sc:
        sc.arbiter = sc.truth["arbiter"]["pid"]
        sc.workers = sorted(w["pid"] for w in sc.truth["workers"])
        stopped = []
        try:
            for pid in sc.workers:
                harness.stop_idle(pid, sc.truth["tasks"][str(pid)])
                stopped.append(pid)
            yield sc
        finally:
            for pid in stopped:
                os.kill(pid, signal.SIGCONT)


# --- the truths ------------------------------------------------------------------------------


def requests(sc, kind):
    """The requests of one kind, as they recorded themselves."""
    out = [r for r in sc.truth["requests"] if r["name"].startswith(kind + "-")]
    assert len(out) == PER_KIND, sc.truth["requests"]
    return out


def stack(frames):
    return [(f["function"], f["file"], f["line"]) for f in frames]


def plural(n, one, many):
    return "%d %s" % (n, one if n == 1 else many)


def suspended(sc):
    """{(pid, address): frames} of every greenlet the reader must find suspended, from the
    censuses the programs took of their own greenlets (`gc`, why_gunicorn_app.census: the
    arbiter's, and each worker's once its requests had parked). The rule, from what each
    record says to what the reader sees while the worker is stopped where it idles:

    - not `active` (not started, or `dead`): no stack, not suspended;
    - `me`, the greenlet that took the census: it ended right after (dead, or freed);
    - `hub`, the worker's hub: suspended at the census (it had switched to `me`), running
      while the worker is read (its main thread is stopped in the hub's event loop, see
      `harness.stop_idle`);
    - active with no `gr_frame`: it runs in another thread (a gevent pool thread's
      `_WorkerGreenlet`): its stack is its thread's, not suspended. A started greenlet that
      does not run always has a frame to resume in (a main greenlet the one it switched away
      from, another one of its `run`, since greenlet 3.0.3);
    - every other: suspended, where its `gr_frame` resumes (the worker's main greenlet in
      `gevent.sleep`, a pool thread's main greenlet, each request)."""
    out = {}
    for pid, census in sc.truth["greenlets"].items():
        assert sum(g["me"] for g in census) == (int(pid) in sc.workers), (pid, census)
        assert sum(g["hub"] for g in census) == (int(pid) in sc.workers), (pid, census)
        for g in census:
            if g["active"] and not g["dead"] and not g["me"] and not g["hub"] \
                    and g["frames"] is not None:
                out[(int(pid), g["address"])] = stack(g["frames"])
    # The truths agree: every request is there, suspended where it recorded itself.
    for r in sc.truth["requests"]:
        assert out[(r["pid"], r["greenlet"])] == stack(r["above"]) + stack(r["frames"]), r
    return out


def suspended_groups(sc):
    """{frames: {(pid, address)}}: the suspended greenlets by their stacks, as the groups
    must hold them."""
    out = collections.defaultdict(set)
    for key, frames in suspended(sc).items():
        out[tuple(frames)].add(key)
    return dict(out)


def group_heading(sc):
    """The line over the greenlets' groups, counted from the censuses."""
    groups = suspended_groups(sc)
    return "greenlets: %s of identical suspended stacks, %s" % (
        plural(len(groups), "group", "groups"),
        plural(sum(len(m) for m in groups.values()), "greenlet", "greenlets"))


def tree_heading(sc):
    """The line over the greenlets' tree, counted from the censuses (every process a report:
    the arbiter and its workers)."""
    return "greenlets: call tree of %s suspended over %s: outermost frames first" % (
        plural(len(suspended(sc)), "greenlet", "greenlets"),
        plural(1 + len(sc.truth["workers"]), "process", "processes"))


def heading(text):
    """The one line of `text` that opens the greenlets' part."""
    lines = [line for line in text if line.startswith("greenlets: ")]
    assert len(lines) == 1, text
    return lines[0]


def expected(sc, kind, core=False):
    """What the group of one kind of request must be: its greenlets {(pid, address):
    (native_id, wait)}, the request's frames (innermost first: the app's, below gevent's own),
    its count and processes, and its headline. From a core (`core`) a socket has no addresses
    (they come from /proc)."""
    reqs = requests(sc, kind)
    frames = stack(reqs[0]["frames"])
    assert all(stack(r["frames"]) == frames for r in reqs), reqs
    # gevent's own frames above the request's, as the parked greenlet's gr_frame gave them.
    above = stack(reqs[0]["above"])
    assert all(stack(r["above"]) == above for r in reqs), reqs
    members = {}
    for r in reqs:
        if kind == "upstream":
            s = r["socket"]
            assert s["peer"] == sc.truth["upstream"]
            wait = {"kind": "socket", "fd": s["fd"], "direction": "recv"}
            if not core:
                wait.update(local=s["local"], peer=s["peer"])
        else:
            wait = {"kind": "sleep"}
        members[(r["pid"], r["greenlet"])] = (r["native_id"], wait)
    pids = sorted({r["pid"] for r in reqs})
    where = "%s (%s:%d)" % (frames[0][0], os.path.basename(frames[0][1]), frames[0][2])
    words = "sleep"
    if kind == "upstream":
        words = "socket" if core else "socket %s" % sc.truth["upstream"]
    if len(pids) == 1:
        procs = "1 process (pid %d, host %s)" % (pids[0], HOST)
    else:
        procs = "%d processes" % len(pids)
    # The arbiter and both workers are reports: a group in one worker alone is an outlier.
    outlier = len(pids) == 1
    headline = "%d greenlets in %s wait in %s: %s%s" % (
        len(reqs), procs, where, words, " [outlier]" if outlier else "")
    return dict(members=members, frames=frames, above=above, count=len(reqs), processes=len(pids),
                outlier=outlier, headline=headline)


# --- the checks ------------------------------------------------------------------------------


def check_group(g, want):
    """A greenlet group against the truth of its kind."""
    got = {}
    for m in g["greenlets"]:
        w = m["waiting"]
        assert w is not None, m
        wait = {k: w[k] for k in ("kind", "fd", "direction", "local", "peer") if k in w}
        assert m["host"] == HOST, m
        got[(m["pid"], m["address"])] = (m["native_id"], wait)
    assert len(got) == len(g["greenlets"]), g["greenlets"]
    assert got == want["members"]
    assert (g["count"], g["processes"], g["outlier"], g["truncated"]) == (
        want["count"], want["processes"], want["outlier"], False)
    assert "threads" not in g
    # The request's own frames under gevent's (the socket's methods, gevent.sleep), each as
    # the program recorded it.
    assert stack(g["frames"]) == want["above"] + want["frames"]


def group_of(groups, want):
    """The group holding the kind's first greenlet."""
    key = sorted(want["members"])[0]
    found = [g for g in groups if any((m["pid"], m["address"]) == key for m in g["greenlets"])]
    assert len(found) == 1, (key, groups)
    return found[0]


def check_groups(grouped, sc, core=False):
    assert grouped["failed"] == []
    assert grouped["reports"] == 1 + len(sc.workers)
    groups = grouped["greenlet_groups"]
    # Every group: its stack and its members, those of the programs' censuses, and no other.
    got = {tuple(stack(g["frames"])): {(m["pid"], m["address"]) for m in g["greenlets"]}
           for g in groups}
    assert len(got) == len(groups), groups
    assert got == suspended_groups(sc)
    assert [(g["count"], g["truncated"]) for g in groups] == [
        (len(got[tuple(stack(g["frames"]))]), False) for g in groups]
    for kind in KINDS:
        want = expected(sc, kind, core)
        check_group(group_of(groups, want), want)
    # Biggest first.
    counts = [(g["count"], g["processes"]) for g in groups]
    assert counts == sorted(counts, reverse=True), counts


def path_of(tree, frames):
    """The nodes of `tree` along `frames` (outermost first), as far as they go."""
    nodes, level = [], tree
    for f in frames:
        match = [n for n in level if n["kind"] == "python"
                 and (n["function"], n["file"], n["line"]) == f]
        if len(match) != 1:
            break
        nodes.append(match[0])
        level = match[0]["children"]
    return nodes


def check_tree(tree, sc, groups):
    """`greenlet_tree` along each kind's stack (its group's frames, outermost first): the
    number of request greenlets through each node, and the kind's greenlets at its leaf."""
    paths = {}
    for kind in KINDS:
        want = expected(sc, kind)
        paths[kind] = list(reversed(stack(group_of(groups, want)["frames"])))
    # Every suspended greenlet is under one of the roots (its outermost frame).
    assert sum(n["count"] for n in tree) == len(suspended(sc))
    for kind in KINDS:
        want = expected(sc, kind)
        path = paths[kind]
        nodes = path_of(tree, path)
        assert len(nodes) == len(path), (kind, [n["function"] for n in nodes], path)
        for depth, n in enumerate(nodes):
            through = sum(PER_KIND for k in KINDS if paths[k][:depth + 1] == path[:depth + 1])
            assert (n["count"], "threads" in n) == (through, False), (kind, depth, n["function"])
        leaf = nodes[-1]
        assert leaf["children"] == [], leaf
        got = {(m["pid"], m["address"]): m["native_id"] for m in leaf["greenlets"]}
        assert got == {k: v[0] for k, v in want["members"].items()}
        assert leaf["processes"] == want["processes"]


def broken_groups(grouped, sc):
    """Altered copies of a grouped output, each of which the checks must refuse."""
    out = []
    groups = grouped["greenlet_groups"]
    for kind in KINDS:
        i = groups.index(group_of(groups, expected(sc, kind)))
        b = copy.deepcopy(grouped)
        b["greenlet_groups"][i]["greenlets"].pop()
        out.append(b)
        b = copy.deepcopy(grouped)
        b["greenlet_groups"][i]["count"] += 1
        out.append(b)
        b = copy.deepcopy(grouped)
        b["greenlet_groups"][i]["frames"][-1]["line"] += 1
        out.append(b)
        b = copy.deepcopy(grouped)
        b["greenlet_groups"][i]["greenlets"][0]["address"] += 8
        out.append(b)
        b = copy.deepcopy(grouped)
        w = b["greenlet_groups"][i]["greenlets"][-1]["waiting"]
        w["kind"] = "event"
        out.append(b)
    # The groups of no request (the workers' main greenlets, gevent's pool threads'): one
    # left out, one short of a member.
    others = [i for i, g in enumerate(groups)
              if not any(m["address"] in requested(sc) for m in g["greenlets"])]
    assert others, groups
    b = copy.deepcopy(grouped)
    del b["greenlet_groups"][others[0]]
    out.append(b)
    b = copy.deepcopy(grouped)
    b["greenlet_groups"][others[-1]]["greenlets"].pop()
    b["greenlet_groups"][others[-1]]["count"] -= 1
    out.append(b)
    return out


def requested(sc):
    return {r["greenlet"] for r in sc.truth["requests"]}


def broken_trees(tree, sc, groups):
    out = []
    for kind in KINDS:
        path = list(reversed(stack(group_of(groups, expected(sc, kind))["frames"])))
        b = copy.deepcopy(tree)
        nodes = path_of(b, path)
        nodes[len(nodes) // 2]["count"] += 1
        out.append(b)
        b = copy.deepcopy(tree)
        path_of(b, path)[-1]["greenlets"].pop()
        out.append(b)
    # A root no request goes through, left out.
    b = copy.deepcopy(tree)
    starts = {tuple(stack(g["frames"]))[-1] for g in groups
              if any(m["address"] in requested(sc) for m in g["greenlets"])}
    b.remove(next(n for n in b if (n["function"], n["file"], n["line"]) not in starts))
    out.append(b)
    return out


# --- the tests -------------------------------------------------------------------------------


def test_group_greenlets_across_workers(job):
    sc = job
    grouped = json.loads(cli("pid", "--children", sc.arbiter, "--group", "--greenlets",
                             "--json"))
    check_groups(grouped, sc)
    for b in broken_groups(grouped, sc):
        with pytest.raises(AssertionError):
            check_groups(b, sc)
    # The threads are grouped as ever, apart: no greenlet among them.
    assert all("greenlets" not in g and g["threads"] for g in grouped["groups"])

    text = cli("pid", "--children", sc.arbiter, "--group", "--greenlets").splitlines()
    assert heading(text) == group_heading(sc)
    for kind in KINDS:
        want = expected(sc, kind)
        assert want["headline"] in text, (want["headline"], text)
        # Under it, the group's stack: its innermost frame first.
        at = text.index(want["headline"])
        g = group_of(grouped["greenlet_groups"], want)
        f = g["frames"][0]
        assert text[at + 1] == '  File "%s", line %d, in %s' % (f["file"], f["line"],
                                                                 f["function"])


def test_tree_greenlets_across_workers(job):
    sc = job
    got = json.loads(cli("pid", "--children", sc.arbiter, "--tree", "--greenlets", "--json"))
    check_groups(got, sc)
    groups = got["greenlet_groups"]
    check_tree(got["greenlet_tree"], sc, groups)
    for b in broken_trees(got["greenlet_tree"], sc, groups):
        with pytest.raises(AssertionError):
            check_tree(b, sc, groups)
    # The threads' tree is a tree of threads only.
    assert all("greenlets" not in n for n in got["tree"])

    text = cli("pid", "--children", sc.arbiter, "--tree", "--greenlets").splitlines()
    assert heading(text) == tree_heading(sc)
    # Each kind's leaf: its frame, indented by its depth, with its greenlets counted.
    for kind in KINDS:
        want = expected(sc, kind)
        g = group_of(groups, want)
        f = g["frames"][0]
        pids = {p for p, _ in want["members"]}
        leaf = "%s%d %s (%s:%d): %d greenlets in %d %s" % (
            "  " * (len(g["frames"]) - 1), PER_KIND, f["function"], f["file"], f["line"],
            PER_KIND, len(pids), "process" if len(pids) == 1 else "processes")
        assert leaf in text, (leaf, text)


def test_merge_of_saved_worker_reports(job, tmp_path):
    sc = job
    live = json.loads(cli("pid", "--children", sc.arbiter, "--tree", "--greenlets", "--json"))
    saved = []
    for pid in [sc.arbiter] + sc.workers:
        path = tmp_path / ("%d.json" % pid)
        path.write_text(cli("pid", pid, "--greenlets", "--json"))
        saved.append(path)
    merged = json.loads(cli("merge", *saved, "--tree", "--json"))
    check_groups(merged, sc)
    check_tree(merged["greenlet_tree"], sc, merged["greenlet_groups"])
    assert merged["greenlet_groups"] == live["greenlet_groups"]
    assert merged["greenlet_tree"] == live["greenlet_tree"]
    assert heading(cli("merge", *saved, "--tree").splitlines()) == tree_heading(sc)
    assert heading(cli("merge", *saved).splitlines()) == group_heading(sc)
    # Reports saved without --greenlets: no greenlet groups at all.
    plain = tmp_path / "plain.json"
    plain.write_text(cli("pid", *sc.workers, "--json"))
    got = json.loads(cli("merge", plain, "--json"))
    assert "greenlet_groups" not in got and got["reports"] == len(sc.workers)
    counts = collections.Counter(m["pid"] for g in merged["greenlet_groups"]
                                 for m in g["greenlets"])
    # Every worker has requests parked, and only the workers have greenlets.
    assert set(counts) == set(sc.workers), counts


def test_groups_from_cores(job):
    """gcore cores of the arbiter and the (stopped) workers: the same groups as live, but for
    the sockets' addresses, which a core cannot show."""
    sc = job
    cores = [core_of(sc, pid) for pid in [sc.arbiter] + sc.workers]
    got = json.loads(cli("core", *cores, "--group", "--greenlets", "--json"))
    check_groups(got, sc, core=True)
    with pytest.raises(AssertionError):
        check_groups(got, sc)
    live = json.loads(cli("pid", "--children", sc.arbiter, "--group", "--greenlets", "--json"))
    for g in live["greenlet_groups"]:
        for m in g["greenlets"]:
            if m["waiting"]:
                m["waiting"].pop("local", None)
                m["waiting"].pop("peer", None)
    assert got["greenlet_groups"] == live["greenlet_groups"]
    text = cli("core", *cores, "--group", "--greenlets").splitlines()
    assert heading(text) == group_heading(sc)
    for kind in KINDS:
        assert expected(sc, kind, core=True)["headline"] in text, text

"""What a benchmark found, and the exit status that says so (shared by every bench/ script).

A script records each target and each measurement it could not make as it goes, then ends
with its summary and status:

    verdicts = Verdicts()
    word = verdicts.under("merge of 10,000 reports", seconds, 5.0, "%.2f s")   # "met"/"MISSED"
    verdicts.at_least("--native vs pystack at depth 5000", speedup, 5.0, "%.1fx",
                      why_not="pystack core --native failed")   # when speedup is None
    verdicts.not_measured("pystack core --native at depth 1000", "exit 139")
    verdicts.failed("ours py-bt at depth 1000", "999 frames of recurse, expected 1000")
    verdicts.peer_limit("asyncio ps of 100,001 tasks", "refuses more than 65,536")
    sys.exit(verdicts.finish())

finish() prints one line per problem, after everything else, and returns 1 when there was a
problem, else 0:

  bench: FAILED: ...        one of ours did not produce what it must (so it was not timed)
  bench: NOT MEASURED: ...  a measurement could not be made: a peer that failed or timed out,
                            a missing tool, a ratio with nothing to divide
  bench: MISSED: ...        a target measured and not met

A peer's failure is a problem, except one that a script declares a known limitation of that
peer and recognises by what the peer printed (py-spy past 4,096 frames, `asyncio ps` past
65,536 tasks): those are listed too, as `bench: PEER LIMIT: ...`, without failing the run,
since no run of ours could ever change them. A peer failing in any other way is NOT MEASURED.
Stdlib only.
"""

import sys

FAILED = "FAILED"
NOT_MEASURED = "NOT MEASURED"
MISSED = "MISSED"
PEER_LIMIT = "PEER LIMIT"
MET = "met"


def first_line(text):
    """A problem's summary is one line: the first non-blank line of a longer text."""
    for line in str(text).splitlines():
        if line.strip():
            return line.strip()
    return "(no reason given)"


class Verdicts:
    def __init__(self):
        self.problems = []  # (kind, what, why), in the order found

    # ---- problems ---------------------------------------------------------------------------

    def failed(self, what, why, detail=None):
        """One of ours ran and did not produce what it must. `detail` (an output's tail, the
        command) is printed now, to stderr; the summary keeps `why`'s first line."""
        self._record(FAILED, what, why, detail)

    def not_measured(self, what, why, detail=None):
        self._record(NOT_MEASURED, what, why, detail)

    def peer_limit(self, what, why):
        """A peer failed the way it is known to (see the module's docs): listed, not failing."""
        self._record(PEER_LIMIT, what, why, None)

    def _record(self, kind, what, why, detail):
        self.problems.append((kind, what, first_line(why)))
        if detail and str(detail).strip() != first_line(why):
            sys.stdout.flush()
            print(f"bench: {kind}: {what}: {str(detail).rstrip()}", file=sys.stderr, flush=True)

    # ---- targets: each returns "met", "MISSED" or "NOT MEASURED" for the script's own line -----

    def under(self, what, value, limit, fmt, why_not=None):
        """Target: value < limit."""
        return self._target(what, value, limit, fmt, value is not None and value < limit,
                            ">=", why_not)

    def at_most(self, what, value, limit, fmt, why_not=None):
        """Target: value <= limit."""
        return self._target(what, value, limit, fmt, value is not None and value <= limit,
                            ">", why_not)

    def at_least(self, what, value, limit, fmt, why_not=None, lower_bound=None):
        """Target: value >= limit. With `lower_bound` (why value is only a bound, e.g. a peer
        that timed out), a bound that meets the limit meets it, and one that does not is not a
        measurement."""
        met = value is not None and value >= limit
        if value is not None and lower_bound and not met:
            self.not_measured(what, f"only a lower bound, {fmt % value} ({lower_bound}), "
                                    f"target >= {fmt % limit}")
            return NOT_MEASURED
        return self._target(what, value, limit, fmt, met, "<", why_not)

    def _target(self, what, value, limit, fmt, met, missed_op, why_not):
        if value is None:
            self.not_measured(what, why_not or "no value")
            return NOT_MEASURED
        if met:
            return MET
        self._record(MISSED, what, f"{fmt % value} {missed_op} {fmt % limit}", None)
        return MISSED

    # ---- the end -----------------------------------------------------------------------------

    def finish(self):
        """Prints the summary (one line per problem, or that there was none); the exit status."""
        sys.stderr.flush()
        print()
        for kind, what, why in self.problems:
            print(f"bench: {kind}: {what}: {why}")
        failing = [p for p in self.problems if p[0] != PEER_LIMIT]
        if not failing:
            print("bench: every target met, every measurement made"
                  + (" (the peers' limits above aside)" if self.problems else ""))
        sys.stdout.flush()
        return 1 if failing else 0

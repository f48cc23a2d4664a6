#!/usr/bin/env bash
# `make test` on a fresh machine downloads gigabytes (the arm64 roots, the test venv's packages,
# torch, lldb) that the integration tests need only after the builds, the lints and the unit tests,
# and builds a free-threaded 3.13 from source (`make pythons`, about 4 minutes), which the unit
# tests need. The crate's build leaves a core idle for long stretches (its last crate compiles
# on one). `prefetch.sh start` runs those provisioning scripts in the background, in parallel,
# while the build goes on (tools/pythons.sh takes a lock, so the unit tests' `make pythons`
# waits there for it); `prefetch.sh wait` waits for them and fails,
# showing each failed script's log, if one did. Each script is safe to run again (a STAMP per
# thing it installs), so the `make integration` that follows finds everything in place and
# re-checks it in seconds; and each takes its own lock or writes through a temporary folder,
# and host apt-get goes through tools/apt-install.sh's lock, so a second run cannot clash.
#
# `make integration` starts one more job the same way, `wheel-x86_64` (tools/wheel-x86_64.sh: the
# pip package, minutes of compiling on a fresh machine), while the test files that do not need
# it run; those that do wait for it (harness.wait_for_wheels). `make test` also starts
# `wheel-aarch64` (the arm64 pip package, as long again) with `start-idle`: it builds on what CPU
# the others leave (the lldb tests leave a fifth of it), and its tests run last.
#
# Where nothing is missing, every script returns within seconds and this costs nothing.
# Logs: $PYUNWIND_CACHE/prefetch/NAME.log, exit status in NAME.rc.
#
#   prefetch.sh start [JOB...]   (default: the provisioning jobs); a job still running (its
#                                lock held) is not started again
#   prefetch.sh start-idle JOB...  the same, at the lowest CPU priority
#   prefetch.sh wait [JOB...]    a job never started here is not waited for (exit 0); one that
#                                was and ended without a status fails
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
DIR="${PYUNWIND_CACHE:-$HOME/.cache/pyunwind}/prefetch"
JOBS=(pythons arm64 test-env torch lldb)
ACTION="${1:-}"
[ "$#" -gt 0 ] && shift
[ "$#" -gt 0 ] && JOBS=("$@")
# Longer than any of them takes on a fresh 2-core machine (3.13t's build: about 6 minutes).
WAIT_S=3600

log() { printf 'prefetch: %s\n' "$*" >&2; }

# running JOB: its lock is held (flock below holds it while the job runs).
running() { ! flock -n "$DIR/$1.lock" true 2>/dev/null; }

case "$ACTION" in
start|start-idle)
    mkdir -p "$DIR"
    # Each job runs in a session of its own (setsid), and Linux's autogroup scheduling
    # (/proc/sys/kernel/sched_autogroup_enabled) shares the CPU between sessions as wholes: a
    # busy job gets a core however many tests run in the caller's session, whatever its nice
    # value. An idle job sets its session's own nice (/proc/self/autogroup) to 19, and its
    # processes' too, for kernels without autogroups.
    prio=()
    [ "$ACTION" = start-idle ] && prio=(bash -c 'echo 19 >/proc/self/autogroup 2>/dev/null; exec nice -n 19 "$@"' _)
    started=()
    for job in "${JOBS[@]}"; do
        [ -f "$HERE/$job.sh" ] || { log "error: no tools/$job.sh"; exit 2; }
        if running "$job"; then
            log "$job: still running from an earlier start; not started again"
            continue
        fi
        rm -f "$DIR/$job.rc"
        date +%s >"$DIR/$job.started"
        # setsid: the job outlives this shell; its status file says when it ended.
        # flock: held while the job runs (`running`); a second start that does not see it yet
        # (the same instant) waits for the first to end.
        setsid "${prio[@]}" flock "$DIR/$job.lock" bash -c 'bash "$1/$2.sh" >"$3/$2.log" 2>&1 </dev/null; echo $? >"$3/$2.rc.tmp"; mv "$3/$2.rc.tmp" "$3/$2.rc"' \
            _ "$HERE" "$job" "$DIR" </dev/null >/dev/null 2>&1 &
        started+=("$job")
    done
    [ "${#started[@]}" -eq 0 ] \
        || log "started ${started[*]} in the background${prio[*]:+ at the lowest priority} (logs in $DIR)"
    ;;
wait)
    failed=()
    deadline=$((SECONDS + WAIT_S))
    for job in "${JOBS[@]}"; do
        if [ ! -f "$DIR/$job.rc" ] && [ ! -f "$DIR/$job.started" ]; then
            log "$job: not started here (tools/prefetch.sh start $job); not waiting"
            continue
        fi
        while [ ! -f "$DIR/$job.rc" ]; do
            [ "$SECONDS" -lt "$deadline" ] || { log "error: $job still running after ${WAIT_S} s"; exit 1; }
            # The job takes its lock a moment after `start`; a free lock long after means it
            # died without writing its status (killed).
            if ! running "$job" && [ $(($(date +%s) - $(cat "$DIR/$job.started"))) -gt 30 ]; then
                log "error: tools/$job.sh ended without a status; its log:"
                tail -n 40 "$DIR/$job.log" >&2
                exit 1
            fi
            sleep 2
        done
        rc=$(cat "$DIR/$job.rc")
        if [ "$rc" != 0 ]; then
            log "error: tools/$job.sh failed (exit $rc); its log:"
            tail -n 40 "$DIR/$job.log" >&2
            failed+=("$job")
        fi
    done
    [ "${#failed[@]}" -eq 0 ] || { log "error: failed: ${failed[*]}"; exit 1; }
    log "${JOBS[*]}: ready"
    ;;
*)
    echo "usage: $0 start|start-idle|wait [JOB...]" >&2
    exit 2
    ;;
esac

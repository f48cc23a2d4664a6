//! The verdict in text: the first lines of `--why` and `py-why` (a crash, deadlocks, the waits
//! ranked by what they wait on, the greenlets' waits, the idle threads), and the crash line
//! that heads `py-bt -a`.

use std::fmt::Write;

use super::task_text::{idle_tasks_line, task_lines, which_task};
use super::wait_text::{waits_for, waits_on, who};
use crate::model::{
    Crash, Deadlock, DeadlockKind, FrameKind, IdleKind, LoopReport, LoopState, LoopWhy, Report,
    StateWord, ThreadReport, WaitKind, Waiting, WaitsOn,
};

/// `Crashed: SIGSEGV (SEGV_MAPERR) at 0x10 in thread 1234 "parser"`, or for a signal a
/// process sent, `Crashed: SIGABRT (SI_TKILL, sent by pid 1234) in thread 1234 "MainThread"`.
pub fn crash_line(c: &Crash, thread_name: Option<&str>) -> String {
    let mut s = String::from("Crashed: ");
    match c.signal {
        Some(name) => s.push_str(name),
        None => write!(s, "signal {}", c.signo).unwrap(),
    }
    match (&c.code, c.sender_pid) {
        (Some(code), Some(pid)) => write!(s, " ({code}, sent by pid {pid})").unwrap(),
        (Some(code), None) => write!(s, " ({code})").unwrap(),
        (None, _) => {}
    }
    if let Some(a) = c.address {
        write!(s, " at {a:#x}").unwrap();
    }
    write!(s, " in thread {}", c.thread).unwrap();
    if let Some(name) = thread_name {
        write!(s, " \"{name}\"").unwrap();
    }
    s
}

/// The report's crash line (see [`crash_line`]), the thread named from the report.
pub fn report_crash_line(r: &Report) -> Option<String> {
    let c = r.crash.as_ref()?;
    let name = r
        .threads
        .iter()
        .find(|t| t.native_id == Some(c.thread))
        .and_then(ThreadReport::any_name);
    Some(crash_line(c, name))
}

/// `Deadlock: poster waits for RLock 0x.. held by rotator; rotator waits for ...`.
pub fn deadlock_line(r: &Report, d: &Deadlock) -> String {
    match d.kind {
        DeadlockKind::TaskLocks => {
            let parts: Vec<String> = d
                .tasks
                .iter()
                .zip(&d.objects)
                .map(|(&t, &o)| format!("{} waits for asyncio lock {o:#x}", which_task(r, t)))
                .collect();
            format!(
                "Deadlock: asyncio tasks wait for each other's locks: {}",
                parts.join("; ")
            )
        }
        DeadlockKind::Await => {
            let tasks: Vec<String> = d.tasks.iter().map(|t| format!("{t:#x}")).collect();
            format!(
                "Deadlock: asyncio tasks await each other: {}",
                tasks.join(" -> ")
            )
        }
        DeadlockKind::Locks => {
            let parts: Vec<String> = d
                .threads
                .iter()
                .filter_map(|&n| {
                    let t = r.threads.iter().find(|t| t.native_id == Some(n))?;
                    let w = t.why.as_ref()?.waiting.as_ref()?;
                    Some(format!("{} {}", who(r, n), waits_for(r, w)))
                })
                .collect();
            format!("Deadlock: {}", parts.join("; "))
        }
    }
}

/// A busy loop this late gets a line: a coroutine hogging the CPU.
const BUSY_OVERDUE_S: f64 = 1.0;

/// `event loop 0x7f.. on thread 12 "MainThread" is blocked for 12.3 s by task "Task-9" in
/// slow (app.py:7): time.sleep; 5 tasks wait`: a blocked loop, or a busy one whose timers are
/// late by a second or more; None for the others.
fn loop_line(r: &Report, l: &LoopReport, why: &LoopWhy) -> Option<String> {
    let late = why.overdue_s.filter(|&s| s > 0.0);
    let verb = match why.state? {
        LoopState::Blocked => "is blocked",
        LoopState::Busy if late.is_some_and(|s| s >= BUSY_OVERDUE_S) => "is busy",
        _ => return None,
    };
    let by = why.blocked_by.as_ref()?;
    let mut s = format!("event loop {:#x}", l.id);
    if let Some(n) = l.native_id {
        write!(s, " on {}", who(r, n)).unwrap();
    }
    write!(s, " {verb}").unwrap();
    if let Some(late) = late {
        write!(s, " for {late:.1} s").unwrap();
    }
    s.push_str(if verb == "is blocked" {
        " by "
    } else {
        " running "
    });
    match (&by.task_name, by.task) {
        (Some(name), _) => write!(s, "task \"{name}\"").unwrap(),
        (None, Some(id)) => write!(s, "task {id:#x}").unwrap(),
        (None, None) => s.push_str("a callback"),
    }
    if let Some(f) = &by.function {
        write!(s, " in {f}").unwrap();
        if let (Some(file), Some(line)) = (&by.file, by.line) {
            let file = file.rsplit('/').next().unwrap_or(file);
            write!(s, " ({file}:{line})").unwrap();
        }
    }
    if let Some(call) = &by.call {
        write!(s, ": {call}").unwrap();
    }
    // The thread's wait on the outside world, where it names more than the call.
    let outside = l
        .native_id
        .and_then(|n| r.threads.iter().find(|t| t.native_id == Some(n)))
        .and_then(|t| t.why.as_ref()?.waiting.as_ref())
        .filter(|w| !matches!(w.on, None | Some(WaitsOn::Native { .. })))
        .and_then(waits_on);
    if let Some(o) = outside {
        write!(s, ", which {o}").unwrap();
    }
    match why.tasks_waiting {
        0 => {}
        1 => s.push_str("; 1 task waits"),
        n => write!(s, "; {n} tasks wait").unwrap(),
    }
    Some(s)
}

/// The idle kinds in the order the idle line counts them, each with its words (one, many).
const IDLE_WORDS: &[(IdleKind, &str, &str)] = &[
    (IdleKind::PoolWorker, "pool worker", "pool workers"),
    (IdleKind::PoolThread, "pool thread", "pool threads"),
    (IdleKind::QueueFeeder, "queue feeder", "queue feeders"),
    (
        IdleKind::Timer,
        "timer between ticks",
        "timers between ticks",
    ),
    (
        IdleKind::Server,
        "server waiting for connections",
        "servers waiting for connections",
    ),
    (
        IdleKind::Master,
        "master waiting for signals",
        "masters waiting for signals",
    ),
    (IdleKind::EventLoop, "event loop", "event loops"),
];

/// `7 idle: 5 pool workers, 1 server waiting for connections, 1 event loop`; None when no
/// thread is idle.
fn idle_line(r: &Report) -> Option<String> {
    let kinds: Vec<IdleKind> = r
        .threads
        .iter()
        .filter_map(|t| t.why.as_ref()?.idle)
        .collect();
    if kinds.is_empty() {
        return None;
    }
    let parts: Vec<String> = IDLE_WORDS
        .iter()
        .filter_map(|&(kind, one, many)| {
            let n = kinds.iter().filter(|&&k| k == kind).count();
            (n > 0).then(|| format!("{n} {}", if n == 1 { one } else { many }))
        })
        .collect();
    Some(format!("{} idle: {}", kinds.len(), parts.join(", ")))
}

/// Which group of the verdict a thread's wait is in: 0 its owner is known, 1 it is on the
/// outside world (a socket, pipe, file, child, native code), 2 the rest.
fn wait_rank(w: &Waiting) -> u8 {
    if w.owner.is_some() {
        0
    } else if w.on.is_some() {
        1
    } else {
        2
    }
}

/// `, which waits on socket fd 7 (...)`: the owner's own wait, one level down; empty when it
/// waits for nothing memory shows, or for the waiter itself (a deadlock says that).
fn owners_wait(r: &Report, waiter: u64, owner: u64) -> String {
    let Some(w) = r
        .threads
        .iter()
        .find(|t| t.native_id == Some(owner))
        .and_then(|t| t.why.as_ref()?.waiting.as_ref())
    else {
        return String::new();
    };
    if w.owner == Some(waiter) {
        return String::new();
    }
    format!(", which {}", waits_for(r, w))
}

/// `--why` and `py-why`'s first lines (docs/report.md, "The verdict"): the crash, the
/// deadlocks, the blocked event loops (their threads get no line of their own), then each waiting thread's wait, those whose owner is known first, then the
/// waits on the outside world, then those with no owner; then the tasks waiting for a lock
/// a task holds; one line when none of them is there. Idle threads get no line of their
/// own: one line counts them by kind.
pub fn verdict(r: &Report) -> String {
    let mut out = String::new();
    if let Some(line) = report_crash_line(r) {
        writeln!(out, "{line}").unwrap();
    }
    for d in r.deadlocks.iter().flatten() {
        writeln!(out, "{}", deadlock_line(r, d)).unwrap();
    }
    for line in progress_lines(r, StateWord::Spinning) {
        writeln!(out, "{line}").unwrap();
    }
    // A blocked loop's line says what its thread waits on.
    let mut told = Vec::new();
    for (l, why) in r
        .loops
        .iter()
        .flatten()
        .filter_map(|l| Some((l, l.why.as_ref()?)))
    {
        if let Some(line) = loop_line(r, l, why) {
            writeln!(out, "{line}").unwrap();
            told.extend(l.native_id);
        }
    }
    // An executor worker's wait is told on the line of the task awaiting its job.
    told.extend(super::task_text::told_workers(r));
    let mut waits: Vec<(u8, u64, &Waiting)> = r
        .threads
        .iter()
        .filter_map(|t| {
            let why = t.why.as_ref()?;
            if why.idle.is_some() || t.native_id.is_some_and(|n| told.contains(&n)) {
                return None;
            }
            let w = why.waiting.as_ref()?;
            Some((wait_rank(w), t.native_id?, w))
        })
        .collect();
    // Stable: the report's thread order within each group.
    waits.sort_by_key(|&(rank, _, _)| rank);
    for (_, n, w) in waits {
        let chained = w.owner.map_or(String::new(), |o| owners_wait(r, n, o));
        writeln!(out, "{} {}{chained}", who(r, n), waits_for(r, w)).unwrap();
    }
    // The tasks, grouped by what they wait on and where: owned, outside, the rest.
    for line in task_lines(r) {
        writeln!(out, "{line}").unwrap();
    }
    // A gevent worker's thread runs its hub; its requests wait in greenlets.
    greenlet_waits(r, &mut out);
    if out.is_empty() {
        out.push_str("No crash, deadlock or blocked wait found.\n");
    }
    // Threads making progress block nothing: after what does.
    for line in progress_lines(r, StateWord::Busy) {
        writeln!(out, "{line}").unwrap();
    }
    if let Some(line) = idle_line(r) {
        writeln!(out, "{line}").unwrap();
    }
    if let Some(line) = idle_tasks_line(r) {
        writeln!(out, "{line}").unwrap();
    }
    out
}

/// `pid --why --for`: a line for each thread in `state` (`spinning` or `busy`), in report
/// order: `thread 812 "spinner" spins in spinner (spin.py:11) for 3.0 s: 98% CPU, every
/// sample at the same place`, `thread 813 "worker" is busy in step (work.py:20): 97% CPU, 40
/// distinct stacks over 3.0 s`. The place is the innermost Python frame of the last sample.
fn progress_lines(r: &Report, state: StateWord) -> Vec<String> {
    r.threads
        .iter()
        .filter_map(|t| {
            let why = t.why.as_ref().filter(|w| w.state == Some(state))?;
            let p = why.progress.as_ref()?;
            let share = (p.cpu_share? * 100.0).round();
            let place = t
                .frames
                .iter()
                .find(|f| f.kind == FrameKind::Python)
                .and_then(|f| {
                    let file = f.file.as_deref()?;
                    let file = file.rsplit('/').next().unwrap_or(file);
                    Some(format!(" in {} ({file}:{})", f.function.as_deref()?, f.line?))
                })
                .unwrap_or_default();
            let who = who(r, t.native_id?);
            let window = p.window_s;
            Some(if state == StateWord::Spinning {
                format!(
                    "{who} spins{place} for {window:.1} s: {share}% CPU, every sample at the same place"
                )
            } else {
                format!(
                    "{who} is busy{place}: {share}% CPU, {} distinct stacks over {window:.1} s",
                    p.stacks
                )
            })
        })
        .collect()
}

/// What a greenlet waits on, for counting: kind, object, type.
type WaitKey<'a> = (WaitKind, Option<u64>, Option<&'a str>);

/// `--why --greenlets`: what each thread's suspended greenlets wait on, most common first
/// (a gevent server has thousands: one line per thread).
fn greenlet_waits(r: &Report, out: &mut String) {
    let Some(all) = &r.greenlets else { return };
    let mut threads: Vec<Option<u64>> = Vec::new();
    for g in all {
        if g.waiting.is_some() && !threads.contains(&g.thread) {
            threads.push(g.thread);
        }
    }
    for t in threads {
        // (kind, object, type) -> count; sockets and sleeps counted by kind alone.
        let mut counts: Vec<(WaitKey, usize)> = Vec::new();
        for w in all
            .iter()
            .filter(|g| g.thread == t)
            .filter_map(|g| g.waiting.as_ref())
        {
            let key = match w.kind {
                WaitKind::Socket | WaitKind::Sleep => (w.kind, None, None),
                _ => (w.kind, w.object, w.type_name.as_deref()),
            };
            match counts.iter_mut().find(|c| c.0 == key) {
                Some(c) => c.1 += 1,
                None => counts.push((key, 1)),
            }
        }
        // The outside world first (sockets), then the most common.
        counts.sort_by_key(|c| (c.0 .0 != WaitKind::Socket, std::cmp::Reverse(c.1)));
        let socket = all
            .iter()
            .filter(|g| g.thread == t)
            .filter_map(|g| g.waiting.as_ref())
            .find(|w| w.kind == WaitKind::Socket);
        let parts: Vec<String> = counts
            .iter()
            .map(|((kind, obj, ty), n)| match (*kind, obj) {
                (WaitKind::Sleep, _) => format!("{n} in gevent.sleep"),
                // One socket is named as a thread's is: `on socket fd 12 (recv from ...)`.
                (WaitKind::Socket, _) if *n == 1 => match socket.and_then(waits_on) {
                    Some(s) => format!("1 {}", s.replacen("waits on", "on", 1)),
                    None => "1 on a socket".to_string(),
                },
                (WaitKind::Socket, _) => format!("{n} on sockets"),
                (k, Some(o)) => format!(
                    "{n} on {k} {o:#x}{}",
                    ty.map_or(String::new(), |t| format!(" ({t})"))
                ),
                (k, None) => format!("{n} on {k}"),
            })
            .collect();
        let whose = t.map_or("threads that have ended".to_string(), |n| who(r, n));
        writeln!(out, "Greenlets of {whose} wait: {}", parts.join(", ")).unwrap();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::test_support;

    #[test]
    fn crash_lines() {
        let mut c = Crash {
            signal: Some("SIGSEGV"),
            signo: 11,
            code: Some("SEGV_MAPERR".into()),
            address: Some(0x10),
            thread: 1234,
            sender_pid: None,
        };
        assert_eq!(
            crash_line(&c, Some("parser")),
            "Crashed: SIGSEGV (SEGV_MAPERR) at 0x10 in thread 1234 \"parser\""
        );
        c.code = Some("SI_USER".into());
        c.address = None;
        c.sender_pid = Some(4321);
        assert_eq!(
            crash_line(&c, Some("MainThread")),
            "Crashed: SIGSEGV (SI_USER, sent by pid 4321) in thread 1234 \"MainThread\""
        );
        c.signal = None;
        c.signo = 40;
        c.code = None;
        assert_eq!(crash_line(&c, None), "Crashed: signal 40 in thread 1234");
    }

    fn report_of(threads: Vec<ThreadReport>) -> Report {
        Report {
            deadlocks: Some(Vec::new()),
            task_waits: None,
            heap: None,
            ..test_support::report_of("3.12.1", 1, threads)
        }
    }

    fn thread(id: u64, name: &str, idle: Option<IdleKind>, w: Option<Waiting>) -> ThreadReport {
        ThreadReport {
            native_id: Some(id),
            thread_id: Some(id),
            name: Some(name.into()),
            native_name: None,
            holds_gil: Some(false),
            interpreter: Some(0),
            interpreter_id: None,
            thread_state: Some(0),
            frames: Vec::new(),
            truncated: false,
            why: Some(crate::model::ThreadWhy {
                state: Some(if idle.is_some() {
                    StateWord::Idle
                } else {
                    StateWord::Syscall
                }),
                idle,
                waiting: w,
                ..Default::default()
            }),
        }
    }

    fn wait(kind: WaitKind, owner: Option<u64>, on: Option<WaitsOn>) -> Option<Waiting> {
        Some(Waiting {
            kind,
            object: (on.is_none()).then_some(0x10),
            type_name: (kind == WaitKind::Lock).then(|| "Lock".into()),
            owner,
            frame: 0,
            on,
        })
    }

    #[test]
    fn the_verdict_leads_with_owned_then_outside_then_ownerless_waits_and_counts_the_idle() {
        let queue = || wait(WaitKind::SimpleQueueGet, None, None);
        let r = report_of(vec![
            thread(1, "MainThread", None, wait(WaitKind::Lock, None, None)),
            thread(2, "w0", Some(IdleKind::PoolWorker), queue()),
            thread(
                3,
                "client",
                None,
                wait(
                    WaitKind::Socket,
                    None,
                    Some(WaitsOn::Socket {
                        fd: Some(7),
                        direction: Some(crate::model::Direction::Recv),
                        local: Some("127.0.0.1:40122".into()),
                        peer: Some("127.0.0.1:5432".into()),
                        peer_process: Some(crate::model::PeerProcess {
                            pid: 4242,
                            command: "postgres".into(),
                        }),
                    }),
                ),
            ),
            thread(4, "w1", None, wait(WaitKind::Lock, Some(3), None)),
            thread(5, "w2", Some(IdleKind::PoolWorker), queue()),
            thread(6, "srv", Some(IdleKind::Server), None),
            thread(
                7,
                "run",
                None,
                wait(
                    WaitKind::Child,
                    None,
                    Some(WaitsOn::Child {
                        pid: Some(99),
                        command: Some("sleep 1000".into()),
                    }),
                ),
            ),
        ]);
        assert_eq!(
            verdict(&r),
            "thread 4 \"w1\" waits for Lock 0x10 held by thread 3 \"client\", which waits on \
             socket fd 7 (recv from 127.0.0.1:5432 (postgres, pid 4242), local \
             127.0.0.1:40122)\n\
             thread 3 \"client\" waits on socket fd 7 (recv from 127.0.0.1:5432 (postgres, \
             pid 4242), local 127.0.0.1:40122)\n\
             thread 7 \"run\" waits for child 99 (sleep 1000) to exit\n\
             thread 1 \"MainThread\" waits for Lock 0x10 (its holder is unknown: a Lock taken \
             by acquire() leaves no trace)\n\
             3 idle: 2 pool workers, 1 server waiting for connections\n"
        );
        let idle_only = report_of(vec![thread(2, "w0", Some(IdleKind::PoolWorker), queue())]);
        assert_eq!(
            verdict(&idle_only),
            "No crash, deadlock or blocked wait found.\n1 idle: 1 pool worker\n"
        );
    }

    fn loop_on(thread: u64, why: LoopWhy) -> LoopReport {
        LoopReport {
            id: 0x1000,
            type_name: "_UnixSelectorEventLoop".into(),
            native_id: Some(thread),
            running: true,
            frames: Vec::new(),
            why: Some(why),
        }
    }

    fn by(task: Option<&str>, call: Option<&str>) -> Option<crate::model::BlockedBy> {
        Some(crate::model::BlockedBy {
            task: task.map(|_| 0x2000),
            task_name: task.map(str::to_string),
            function: Some("slow".into()),
            file: Some("/srv/app.py".into()),
            line: Some(7),
            call: call.map(str::to_string),
        })
    }

    #[test]
    fn a_blocked_loop_leads_and_its_thread_gets_no_line_of_its_own() {
        let mut r = report_of(vec![
            thread(1, "MainThread", None, wait(WaitKind::Sleep, None, None)),
            thread(2, "w0", None, wait(WaitKind::Lock, None, None)),
        ]);
        r.loops = Some(vec![loop_on(
            1,
            LoopWhy {
                state: Some(LoopState::Blocked),
                blocked_by: by(Some("Task-9"), Some("time.sleep")),
                overdue_s: Some(12.345),
                ready: Some(3),
                tasks_waiting: 5,
            },
        )]);
        assert_eq!(
            verdict(&r),
            "event loop 0x1000 on thread 1 \"MainThread\" is blocked for 12.3 s by task \
             \"Task-9\" in slow (app.py:7): time.sleep; 5 tasks wait\n\
             thread 2 \"w0\" waits for Lock 0x10 (its holder is unknown: a Lock taken by \
             acquire() leaves no trace)\n"
        );
        // From a core: no clock; a callback, not a task; one task waiting.
        let why = r.loops.as_mut().unwrap()[0].why.as_mut().unwrap();
        why.overdue_s = None;
        why.blocked_by = by(None, Some("time.sleep"));
        why.tasks_waiting = 1;
        assert!(verdict(&r).starts_with(
            "event loop 0x1000 on thread 1 \"MainThread\" is blocked by a callback in slow \
             (app.py:7): time.sleep; 1 task waits\n"
        ));
    }

    #[test]
    fn a_busy_loop_gets_a_line_only_when_a_second_late_and_an_idle_one_none() {
        let busy = |late: Option<f64>| {
            let mut r = report_of(vec![thread(1, "MainThread", None, None)]);
            r.loops = Some(vec![loop_on(
                1,
                LoopWhy {
                    state: Some(LoopState::Busy),
                    blocked_by: by(Some("hog"), None),
                    overdue_s: late,
                    ready: Some(0),
                    tasks_waiting: 0,
                },
            )]);
            verdict(&r)
        };
        assert_eq!(
            busy(Some(3.21)),
            "event loop 0x1000 on thread 1 \"MainThread\" is busy for 3.2 s running task \
             \"hog\" in slow (app.py:7)\n"
        );
        assert_eq!(
            busy(Some(0.5)),
            "No crash, deadlock or blocked wait found.\n"
        );
        assert_eq!(busy(None), "No crash, deadlock or blocked wait found.\n");
        let mut r = report_of(vec![thread(
            1,
            "MainThread",
            Some(IdleKind::EventLoop),
            None,
        )]);
        r.loops = Some(vec![loop_on(
            1,
            LoopWhy {
                state: Some(LoopState::Idle),
                ..Default::default()
            },
        )]);
        assert_eq!(
            verdict(&r),
            "No crash, deadlock or blocked wait found.\n1 idle: 1 event loop\n"
        );
    }

    #[test]
    fn spinning_threads_lead_and_busy_ones_follow_the_waits() {
        let progress = |stacks, moved| crate::model::Progress {
            window_s: 3.04,
            samples: 301,
            torn: 0,
            cpu_s: Some(2.9),
            waited_s: Some(0.1),
            cpu_share: Some(0.976),
            moved,
            stacks,
        };
        let mut spinner = thread(812, "spinner", None, None);
        spinner.frames = vec![
            test_support::python_frame("spinner", "/app/spin.py", 11),
            test_support::python_frame("main", "/app/spin.py", 30),
        ];
        let why = spinner.why.as_mut().unwrap();
        why.state = Some(StateWord::Spinning);
        why.progress = Some(progress(1, false));
        let mut worker = thread(813, "worker", None, None);
        worker.frames = vec![test_support::python_frame("step", "/app/work.py", 20)];
        let why = worker.why.as_mut().unwrap();
        why.state = Some(StateWord::Busy);
        why.progress = Some(progress(40, true));
        let r = report_of(vec![
            worker,
            thread(1, "MainThread", None, wait(WaitKind::Lock, None, None)),
            spinner,
        ]);
        assert_eq!(
            verdict(&r),
            "thread 812 \"spinner\" spins in spinner (spin.py:11) for 3.0 s: 98% CPU, every \
             sample at the same place\n\
             thread 1 \"MainThread\" waits for Lock 0x10 (its holder is unknown: a Lock taken \
             by acquire() leaves no trace)\n\
             thread 813 \"worker\" is busy in step (work.py:20): 98% CPU, 40 distinct stacks \
             over 3.0 s\n"
        );
        let busy_only = report_of(vec![r.threads[0].clone()]);
        assert_eq!(
            verdict(&busy_only),
            "No crash, deadlock or blocked wait found.\n\
             thread 813 \"worker\" is busy in step (work.py:20): 98% CPU, 40 distinct stacks \
             over 3.0 s\n"
        );
    }
}

//! Tests of the straggler verdict: majorities, outliers and the words of its text.

use super::*;
use crate::model::FrameReport;
use crate::report::group::{GroupBy, Member};
use crate::report::test_support::python_frame as py;

fn why(state: StateWord, waiting: Option<WaitKind>) -> GroupWhy {
    GroupWhy {
        state: Some(state),
        syscall: None,
        waiting,
    }
}

struct Job {
    tree: TreeBuilder,
    ranks: Ranks,
}

impl Job {
    fn new(by: GroupBy) -> Self {
        Job {
            tree: TreeBuilder::new(by),
            ranks: Ranks::default(),
        }
    }

    /// A process: its threads' (name, innermost-first frames, why).
    fn process(&mut self, pid: u32, threads: &[(&str, &[FrameReport], Option<GroupWhy>)]) {
        self.tree.start_report();
        self.ranks.start_report(Some("h".into()), Some(pid));
        for (k, (name, frames, why)) in threads.iter().enumerate() {
            let m = Member::thread(
                Some("h".into()),
                Some(pid),
                None,
                Some(pid as u64 * 10 + k as u64),
                Some((*name).into()),
            );
            let at = self.tree.add(frames, false, m);
            self.ranks.add(at, why.as_ref(), frames.first(), None);
        }
    }

    fn verdict(&self) -> Verdict {
        self.ranks.verdict(&self.tree).unwrap()
    }

    /// A process of one thread whose wait is `why`, in native code `call` if given.
    fn native(&mut self, pid: u32, frames: &[FrameReport], why: GroupWhy, call: Option<&str>) {
        self.tree.start_report();
        self.ranks.start_report(Some("h".into()), Some(pid));
        let m = Member::thread(Some("h".into()), Some(pid), None, Some(pid as u64), None);
        let at = self.tree.add(frames, false, m);
        self.ranks.add(at, Some(&why), frames.first(), call);
    }
}

fn funcs(frames: &[GroupFrame]) -> Vec<&str> {
    frames
        .iter()
        .map(|f| f.function.as_deref().unwrap())
        .collect()
}

fn rank(inner: &[FrameReport]) -> Vec<FrameReport> {
    let mut v = inner.to_vec();
    v.push(py("main", "t.py", 60));
    v.push(py("<module>", "t.py", 70));
    v
}

#[test]
fn the_majority_is_where_the_stacks_part_and_the_straggler_is_named() {
    // Even ranks wait on one line of all_reduce's callee, odd ranks on another: below the
    // frame where the straggler leaves, they may differ.
    let even = rank(&[
        py("wait_even", "d.py", 5),
        py("all_reduce", "d.py", 12),
        py("step", "t.py", 41),
    ]);
    let odd = rank(&[
        py("wait_odd", "d.py", 8),
        py("all_reduce", "d.py", 12),
        py("step", "t.py", 41),
    ]);
    let load = rank(&[py("load_shard", "data.py", 17), py("step", "t.py", 38)]);
    let launcher = [
        py("wait_all", "launch.py", 9),
        py("<module>", "launch.py", 20),
    ];
    let mut job = Job::new(GroupBy::Line);
    job.process(
        100,
        &[(
            "MainThread",
            &launcher[..],
            Some(why(StateWord::Syscall, Some(WaitKind::Child))),
        )],
    );
    for pid in 1..=6u32 {
        let (frames, w) = match pid {
            4 => (&load, why(StateWord::Syscall, Some(WaitKind::Sleep))),
            p if p % 2 == 0 => (&even, why(StateWord::Syscall, Some(WaitKind::Barrier))),
            _ => (&odd, why(StateWord::Syscall, Some(WaitKind::Barrier))),
        };
        // A helper thread in each rank: not the rank's thread.
        let helper = [
            py("run", "threading.py", 5),
            py("_bootstrap", "threading.py", 9),
        ];
        job.process(
            pid,
            &[
                ("MainThread", &frames[..], Some(w)),
                ("helper", &helper[..], None),
            ],
        );
    }
    let v = job.verdict();
    assert_eq!(v.ranks, 6);
    let m = v.majority.as_ref().unwrap();
    assert_eq!(m.count, 5);
    assert_eq!(funcs(&m.frames), ["all_reduce", "step", "main", "<module>"]);
    assert_eq!(m.frames[1].line, Some(41));
    assert_eq!(m.waits.len(), 1);
    assert_eq!(m.waits[0].count, 5);
    assert_eq!(v.outliers.len(), 1);
    let o = &v.outliers[0];
    assert_eq!(
        (o.pid, o.native_id, o.name.as_deref()),
        (Some(4), Some(40), Some("MainThread"))
    );
    assert_eq!(funcs(&o.frames), ["load_shard", "step"]);
    assert_eq!(o.frames[1].line, Some(38));
    assert_eq!(v.left_out.len(), 1);
    assert_eq!(v.left_out[0].pid, Some(100));
    assert_eq!(
        render(&v),
        "5 of 6 processes wait in all_reduce (d.py:12): barrier; pid 4 (host h) is \
         elsewhere: load_shard (data.py:17), sleeping\n\
         1 other process not counted as a rank (no thread starts as the ranks' do): \
         pid 100 (host h)\n"
    );
}

#[test]
fn a_rank_short_of_the_majority_frame_is_elsewhere_at_its_innermost_frame() {
    let at = rank(&[py("barrier", "d.py", 3), py("step", "t.py", 41)]);
    let short = rank(&[py("step", "t.py", 41)]);
    let mut job = Job::new(GroupBy::Line);
    for pid in 1..=3 {
        let frames = if pid == 3 { &short } else { &at };
        job.process(pid, &[("MainThread", &frames[..], None)]);
    }
    let v = job.verdict();
    assert_eq!(funcs(&v.majority.as_ref().unwrap().frames)[0], "barrier");
    assert_eq!(funcs(&v.outliers[0].frames), ["step"]);
    assert!(render(&v).starts_with(
        "2 of 3 processes are in barrier (d.py:3); pid 3 (host h) is elsewhere: step (t.py:41)\n"
    ));
}

#[test]
fn no_majority_and_no_outliers() {
    let a = rank(&[py("a", "t.py", 1)]);
    let b = rank(&[py("b", "t.py", 2)]);
    let mut job = Job::new(GroupBy::Line);
    job.process(1, &[("MainThread", &a[..], None)]);
    job.process(2, &[("MainThread", &b[..], None)]);
    let v = job.verdict();
    // Both share main: the majority is there, and nobody is elsewhere.
    assert_eq!(funcs(&v.majority.as_ref().unwrap().frames)[0], "main");
    assert!(v.outliers.is_empty());
    assert_eq!(
        render(&v),
        "2 of 2 processes are in main (t.py:60); none is elsewhere\n"
    );
    let mut job = Job::new(GroupBy::Line);
    job.process(1, &[("MainThread", &[py("x", "a.py", 1)][..], None)]);
    job.process(2, &[("MainThread", &[py("x", "a.py", 2)][..], None)]);
    let v = job.verdict();
    assert!(v.majority.is_none());
    assert_eq!(
        render(&v),
        "No frame is shared by more than half of the 2 processes\n"
    );
}

#[test]
fn one_process_has_no_verdict_and_mixed_states_are_counted() {
    let f = rank(&[py("f", "t.py", 1)]);
    let mut job = Job::new(GroupBy::Line);
    job.process(
        1,
        &[("MainThread", &f[..], Some(why(StateWord::Running, None)))],
    );
    assert!(job.ranks.verdict(&job.tree).is_none());
    job.process(
        2,
        &[(
            "MainThread",
            &f[..],
            Some(why(StateWord::Syscall, Some(WaitKind::Lock))),
        )],
    );
    job.process(
        3,
        &[(
            "MainThread",
            &f[..],
            Some(why(StateWord::Syscall, Some(WaitKind::Lock))),
        )],
    );
    let v = job.verdict();
    assert_eq!(
        render(&v),
        "3 of 3 processes wait in f (t.py:1): lock (2), running (1); none is elsewhere\n"
    );
}

#[test]
fn libraries_are_the_interpreters_own_and_installed_packages() {
    for (file, lib) in [
        ("/usr/lib/python3.11/threading.py", Some("threading")),
        (
            "/root/.pyenv/versions/3.12.7/lib/python3.12/multiprocessing/synchronize.py",
            Some("multiprocessing"),
        ),
        ("/usr/lib/python3.13t/asyncio/tasks.py", Some("asyncio")),
        (
            "/v/lib/python3.12/site-packages/torch/autograd/graph.py",
            Some("torch"),
        ),
        ("/usr/lib/python3/dist-packages/six.py", Some("six")),
        ("<frozen importlib._bootstrap>", Some("importlib")),
        ("/srv/job.py", None),
        ("/home/u/lib/python/job.py", None),
        ("/home/u/lib/pythonic/x/job.py", None),
        ("<string>", None),
    ] {
        assert_eq!(library_of(file), lib, "{file}");
    }
}

#[test]
fn the_majority_is_named_by_its_own_code_with_the_library_wait_after_it() {
    let lib = "/usr/lib/python3.12/multiprocessing/synchronize.py";
    let barrier = [
        py("Condition.wait", lib, 268),
        py("Barrier.wait", "/usr/lib/python3.12/threading.py", 710),
        py("all_reduce", "/srv/job.py", 31),
    ];
    let sleeping = [py("load", "/srv/job.py", 40)];
    let mut job = Job::new(GroupBy::Line);
    for pid in 1..=3 {
        job.native(
            pid,
            &rank(&barrier),
            why(StateWord::Syscall, Some(WaitKind::Barrier)),
            None,
        );
    }
    job.native(
        4,
        &rank(&sleeping),
        why(StateWord::Syscall, Some(WaitKind::Sleep)),
        None,
    );
    let v = job.verdict();
    let m = v.majority.as_ref().unwrap();
    assert_eq!((m.frame, m.frames[0].line), (2, Some(268)));
    assert_eq!(
        render(&v),
        "3 of 4 processes wait in all_reduce (job.py:31): barrier (multiprocessing); \
         pid 4 (host h) is elsewhere: load (job.py:40), sleeping\n"
    );

    let torch = "/v/lib/python3.12/site-packages/torch";
    let backward = [
        py(
            "_engine_run_backward",
            &format!("{torch}/autograd/graph.py"),
            825,
        ),
        py("backward", &format!("{torch}/autograd/__init__.py"), 347),
        py("train_step", "/srv/ddp.py", 22),
    ];
    let mut job = Job::new(GroupBy::Line);
    let run = "torch._C._EngineBase.run_backward";
    for pid in 1..=3 {
        job.native(
            pid,
            &rank(&backward),
            why(StateWord::Syscall, Some(WaitKind::Native)),
            Some(run),
        );
    }
    job.native(
        4,
        &rank(&sleeping),
        why(StateWord::Syscall, Some(WaitKind::Lock)),
        Some(run),
    );
    let v = job.verdict();
    assert_eq!(
        render(&v),
        "3 of 4 processes wait in train_step (ddp.py:22): in native code \
         torch._C._EngineBase.run_backward; pid 4 (host h) is elsewhere: load (job.py:40), lock\n"
    );
}

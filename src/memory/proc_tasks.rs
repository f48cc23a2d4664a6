//! Which threads of a live process are on a CPU, asked at every sample of `record`: each
//! thread's `/proc/PID/task/TID/stat` is opened once and read again from its start at each
//! sample (a proc `stat` file is made anew at each read from offset 0). Opening it each time
//! looked its path up again, a third of the sampler's system time at 64 threads.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::os::unix::fs::FileExt;

use super::live::{in_our_pid_namespace, innermost_id, stat_running, MAX_TASKS_SCANNED};

/// A `stat` line is about 300 bytes; its state comes after the pid and a command of at most
/// 64 bytes, so a line cut here still holds it.
const STAT_BYTES: usize = 512;

/// The open `stat` files of one process's threads.
pub struct TaskStates {
    pid: u32,
    /// By the task's directory name (its id in /proc's pid namespace): the id the process
    /// itself knows the thread by, and its `stat` file.
    open: HashMap<u64, (u64, File)>,
}

impl TaskStates {
    pub fn new(pid: u32) -> TaskStates {
        TaskStates {
            pid,
            open: HashMap::new(),
        }
    }

    /// The threads (by the id the process knows them by) on a CPU or waiting for one now;
    /// None when the process's task list cannot be read (it is gone).
    pub fn running(&mut self) -> Option<HashSet<u64>> {
        let dir = format!("/proc/{}/task", self.pid);
        let same_ns = in_our_pid_namespace(self.pid);
        let mut now = HashSet::new();
        for entry in std::fs::read_dir(&dir).ok()?.take(MAX_TASKS_SCANNED) {
            let Some(name) = entry
                .ok()
                .and_then(|e| e.file_name().to_str()?.parse::<u64>().ok())
            else {
                continue;
            };
            now.insert(name);
            if self.open.contains_key(&name) {
                continue;
            }
            let task = format!("{dir}/{name}");
            let id = if same_ns {
                Some(name)
            } else {
                innermost_id(&task)
            };
            if let (Some(id), Ok(f)) = (id, File::open(format!("{task}/stat"))) {
                self.open.insert(name, (id, f));
            }
        }
        // A thread gone: its file reads nothing more.
        self.open.retain(|name, _| now.contains(name));
        let mut buf = [0u8; STAT_BYTES];
        let running = self
            .open
            .values()
            .filter(|(_, f)| {
                let n = f.read_at(&mut buf, 0).unwrap_or(0);
                std::str::from_utf8(&buf[..n])
                    .ok()
                    .and_then(stat_running)
                    .unwrap_or(false)
            })
            .map(|(id, _)| *id)
            .collect();
        Some(running)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    /// The calling thread's id, as /proc names it.
    fn gettid() -> u64 {
        std::fs::read_link("/proc/thread-self")
            .ok()
            .and_then(|p| p.file_name()?.to_str()?.parse().ok())
            .expect("/proc/thread-self")
    }

    #[test]
    fn this_thread_is_running_and_a_sleeping_one_is_not() {
        let (tx, rx) = mpsc::channel();
        let sleeper = std::thread::spawn(move || {
            tx.send(gettid()).unwrap();
            std::thread::sleep(Duration::from_secs(2));
        });
        let asleep = rx.recv().unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let mut states = TaskStates::new(std::process::id());
        let me = gettid();
        // Read again from the files opened by the first call.
        for _ in 0..3 {
            let running = states.running().expect("our own task list");
            assert!(running.contains(&me), "{running:?} lacks {me}");
            assert!(!running.contains(&asleep), "{running:?} holds {asleep}");
        }
        assert!(states.open.contains_key(&asleep));
        let _ = sleeper.join();
        // Gone: its file is closed at the next call.
        states.running().expect("our own task list");
        assert!(!states.open.contains_key(&asleep));
    }

    #[test]
    fn a_process_that_is_not_there_has_no_task_list() {
        assert_eq!(TaskStates::new(u32::MAX).running(), None);
    }
}

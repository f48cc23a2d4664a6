//! The one-word kinds of `--why`'s thread entries: what a thread is doing, and what kind of
//! idle thread it is.

use serde::{Deserialize, Serialize};

/// What a thread is doing, in one word (`--why`'s `state`, docs/report.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StateWord {
    /// Runs Python, holding the GIL (or attached, on a free-threaded build).
    Running,
    /// Waits for the GIL.
    GilWait,
    /// Collects garbage.
    Gc,
    /// An event loop waiting in its selector.
    LoopIdle,
    /// Waits for work, by a row of [`crate::why::idle`]'s table.
    Idle,
    /// Blocked in the system call `syscall` names.
    Syscall,
    /// `--for`: on a CPU most of the window, its stack never moved.
    Spinning,
    /// `--for`: on a CPU, its stack moved.
    Busy,
}

impl StateWord {
    /// Its name, in the JSON and in the text.
    pub fn as_str(self) -> &'static str {
        match self {
            StateWord::Running => "running",
            StateWord::GilWait => "gil_wait",
            StateWord::Gc => "gc",
            StateWord::LoopIdle => "loop_idle",
            StateWord::Idle => "idle",
            StateWord::Syscall => "syscall",
            StateWord::Spinning => "spinning",
            StateWord::Busy => "busy",
        }
    }

    /// Whether it says what a thread did over a window of samples (`--for`), not at one
    /// instant: a system call seen at the window's last sample (a GIL hand-over of a thread
    /// that spins) is a moment of it, left out of its header.
    pub fn over_a_window(self) -> bool {
        matches!(self, StateWord::Spinning | StateWord::Busy)
    }
}

impl std::fmt::Display for StateWord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What kind of idle thread it is (`--why`'s `idle`, docs/report.md "Idle threads").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IdleKind {
    PoolWorker,
    PoolThread,
    QueueFeeder,
    Timer,
    Server,
    Master,
    EventLoop,
}

#[cfg(test)]
mod tests {
    use super::StateWord;
    use crate::model::test_words::round_trip;

    /// `merge` reads the word back from saved reports.
    #[test]
    fn state_words_are_their_words() {
        let all = [
            StateWord::Running,
            StateWord::GilWait,
            StateWord::Gc,
            StateWord::LoopIdle,
            StateWord::Idle,
            StateWord::Syscall,
            StateWord::Spinning,
            StateWord::Busy,
        ];
        round_trip(&all.map(|s| (s, s.as_str())));
    }
}

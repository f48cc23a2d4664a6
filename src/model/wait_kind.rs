//! The kind of a Python-level wait (`waiting.kind` of a thread, an asyncio task or a gevent
//! greenlet, docs/report.md): one word for what the wait is in or on.

use serde::{Deserialize, Serialize};

/// What a wait is in or on ([`super::Waiting`]'s `kind`). A thread's library waits, a task's
/// asyncio primitives, a greenlet's gevent waits, and waits on the outside world, which have
/// [`super::WaitsOn`]'s fields beside them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WaitKind {
    /// A `threading.Lock`'s `acquire()` or `with lock:` (the same word as
    /// `why::locks::LockKind::Lock`'s).
    Lock,
    /// A `threading.RLock`'s.
    #[serde(rename = "rlock")]
    RLock,
    /// `threading.Condition`'s `wait`, `wait_for`, `__enter__` (multiprocessing's too).
    Condition,
    /// `threading.Event.wait` (multiprocessing's too); a gevent Event.
    Event,
    /// `threading.Semaphore.acquire`; a gevent Semaphore.
    Semaphore,
    /// `threading.Barrier.wait` (a `multiprocessing.Barrier` is one).
    Barrier,
    /// `queue.Queue.get`; a gevent queue's.
    QueueGet,
    /// `queue.Queue.put`; a gevent queue's.
    QueuePut,
    /// `SimpleQueue.get()`, a C method.
    SimpleQueueGet,
    /// `Thread.join`; a gevent Greenlet's `join`.
    Join,
    /// A `concurrent.futures.Future`'s `result`, `exception`; an asyncio task's future.
    Future,
    /// gevent's `AsyncResult`.
    AsyncResult,
    /// The GIL (the thread's state is `gil_wait`).
    Gil,
    /// `time.sleep`, `asyncio.sleep`, `gevent.sleep`.
    Sleep,
    /// A socket (the outside world).
    Socket,
    /// A pipe.
    Pipe,
    /// A file.
    File,
    /// A descriptor of a kind the source cannot show.
    Fd,
    /// A child process.
    Child,
    /// A system call under C code that no Python-level wait explains.
    Native,
    /// An asyncio task's executor job (`run_in_executor`, `to_thread`).
    Executor,
    /// asyncio's primitives (asyncio/locks.py, asyncio/queues.py), a task's waits.
    AsyncioLock,
    AsyncioCondition,
    AsyncioEvent,
    AsyncioSemaphore,
    AsyncioBarrier,
    AsyncioQueueGet,
    AsyncioQueuePut,
}

impl WaitKind {
    /// Its name, in the JSON and in the text.
    pub fn as_str(self) -> &'static str {
        match self {
            WaitKind::Lock => "lock",
            WaitKind::RLock => "rlock",
            WaitKind::Condition => "condition",
            WaitKind::Event => "event",
            WaitKind::Semaphore => "semaphore",
            WaitKind::Barrier => "barrier",
            WaitKind::QueueGet => "queue_get",
            WaitKind::QueuePut => "queue_put",
            WaitKind::SimpleQueueGet => "simple_queue_get",
            WaitKind::Join => "join",
            WaitKind::Future => "future",
            WaitKind::AsyncResult => "async_result",
            WaitKind::Gil => "gil",
            WaitKind::Sleep => "sleep",
            WaitKind::Socket => "socket",
            WaitKind::Pipe => "pipe",
            WaitKind::File => "file",
            WaitKind::Fd => "fd",
            WaitKind::Child => "child",
            WaitKind::Native => "native",
            WaitKind::Executor => "executor",
            WaitKind::AsyncioLock => "asyncio_lock",
            WaitKind::AsyncioCondition => "asyncio_condition",
            WaitKind::AsyncioEvent => "asyncio_event",
            WaitKind::AsyncioSemaphore => "asyncio_semaphore",
            WaitKind::AsyncioBarrier => "asyncio_barrier",
            WaitKind::AsyncioQueueGet => "asyncio_queue_get",
            WaitKind::AsyncioQueuePut => "asyncio_queue_put",
        }
    }
}

impl std::fmt::Display for WaitKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::WaitKind;

    const ALL: [WaitKind; 28] = [
        WaitKind::Lock,
        WaitKind::RLock,
        WaitKind::Condition,
        WaitKind::Event,
        WaitKind::Semaphore,
        WaitKind::Barrier,
        WaitKind::QueueGet,
        WaitKind::QueuePut,
        WaitKind::SimpleQueueGet,
        WaitKind::Join,
        WaitKind::Future,
        WaitKind::AsyncResult,
        WaitKind::Gil,
        WaitKind::Sleep,
        WaitKind::Socket,
        WaitKind::Pipe,
        WaitKind::File,
        WaitKind::Fd,
        WaitKind::Child,
        WaitKind::Native,
        WaitKind::Executor,
        WaitKind::AsyncioLock,
        WaitKind::AsyncioCondition,
        WaitKind::AsyncioEvent,
        WaitKind::AsyncioSemaphore,
        WaitKind::AsyncioBarrier,
        WaitKind::AsyncioQueueGet,
        WaitKind::AsyncioQueuePut,
    ];

    #[test]
    fn the_json_word_is_the_text_word_and_reads_back() {
        for k in ALL {
            let json = serde_json::to_string(&k).unwrap();
            assert_eq!(json, format!("\"{}\"", k.as_str()));
            assert_eq!(serde_json::from_str::<WaitKind>(&json).unwrap(), k);
        }
    }
}

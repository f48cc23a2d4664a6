//! The report's `tasks` as JSON, made on the machine's cores while the tasks before are
//! written: the 60 MB of 100,000 tasks took a third of `--tasks --json` on one thread.
//!
//! serde_json writes a value's fields in turn on one thread, so the tasks are spliced in:
//! [`to_writer`] serializes the report with a [`RawValue`] marker in the tasks' place, and its
//! formatter, which serde_json hands every raw fragment with the writer, writes the tasks'
//! JSON where it meets that marker (the same `RawValue`, by address).

use std::cell::Cell;
use std::io::{self, Write};
use std::sync::LazyLock;

use serde::{Serialize, Serializer};
use serde_json::ser::{CompactFormatter, Formatter};
use serde_json::value::{to_raw_value, RawValue};

use super::TaskReport;

/// Tasks one batch holds (about 80 KB of JSON).
const BATCH: usize = 128;

/// Stands for the tasks while [`to_writer`] serializes the report on this thread.
static MARKER: LazyLock<Box<RawValue>> =
    LazyLock::new(|| to_raw_value(&[(); 0]).expect("[] is JSON"));

thread_local! {
    static SPLICING: Cell<bool> = const { Cell::new(false) };
}

/// `serialize_with` for `Report::tasks` (with `skip_serializing_if` for None).
pub fn tasks<S: Serializer>(v: &Option<Vec<TaskReport>>, s: S) -> Result<S::Ok, S::Error> {
    if SPLICING.get() {
        return MARKER.serialize(s);
    }
    v.serialize(s)
}

/// `serde_json::to_writer(w, v)`, the same bytes, for a `v` whose one report has `tasks`:
/// those are serialized in batches by [`crate::parallel::map_each`] and written in order.
pub fn to_writer<W: Write, T: Serialize>(
    w: W,
    v: &T,
    tasks: &[TaskReport],
) -> serde_json::Result<()> {
    let f = Splice { tasks, done: false };
    SPLICING.set(true);
    let r = v.serialize(&mut serde_json::Serializer::with_formatter(w, f));
    SPLICING.set(false);
    r
}

struct Splice<'a> {
    tasks: &'a [TaskReport],
    done: bool,
}

impl Formatter for Splice<'_> {
    fn write_raw_fragment<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        if self.done || !std::ptr::eq(fragment.as_ptr(), MARKER.get().as_ptr()) {
            return CompactFormatter.write_raw_fragment(w, fragment);
        }
        self.done = true;
        let batches: Vec<&[TaskReport]> = self.tasks.chunks(BATCH).collect();
        w.write_all(b"[")?;
        let mut first = true;
        crate::parallel::map_each(
            &batches,
            1,
            true,
            |b| batch_json(b),
            |json| {
                if !std::mem::take(&mut first) {
                    w.write_all(b",")?;
                }
                w.write_all(&json?)
            },
        )?;
        w.write_all(b"]")
    }
}

/// The tasks of `batch` as JSON, separated by commas.
fn batch_json(batch: &[TaskReport]) -> io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(batch.len() * 1024);
    for (i, t) in batch.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut out, t)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::model::{FrameKind, FrameReport, Hosted, Report};

    fn task(id: u64) -> TaskReport {
        let frame = |f: &str, line| FrameReport {
            kind: FrameKind::Python,
            function: Some(Arc::from(f)),
            file: Some(Arc::from("/app/\"odd\" \u{e9}.py")),
            line: Some(line),
            entry: Some(false),
            address: Some(id * 16),
            interpreter_id: Some(0),
            detail: None,
        };
        TaskReport {
            id,
            name: format!("Task-{id} \"\u{0}\\ \u{1F600}"),
            state: "pending",
            on_cpu: id % 7 == 0,
            native_id: (id % 3 == 0).then_some(id),
            type_name: "_asyncio.Task".into(),
            supported: true,
            loop_: 0x1000,
            frames: vec![frame("sleep", 716), frame("sleeper\n", id as u32)],
            awaiting: None,
            awaited_by: vec![1],
            owned_by: Vec::new(),
            why: None,
        }
    }

    fn report(tasks: Vec<TaskReport>) -> Report {
        let mut r = crate::report::test_support::tasks_report(tasks);
        r.cycles = Some(vec![vec![1, 2]]);
        r
    }

    #[test]
    fn spliced_tasks_are_the_same_bytes() {
        for n in [0, 1, BATCH - 1, BATCH, BATCH + 1, 20 * BATCH + 5] {
            let r = report((1..=n as u64).map(task).collect());
            let hosted = Hosted {
                host: "h",
                pid: Some(7),
                report: &r,
            };
            let plain = serde_json::to_vec(&hosted).unwrap();
            let mut spliced = Vec::new();
            to_writer(&mut spliced, &hosted, r.tasks.as_deref().unwrap()).unwrap();
            assert_eq!(
                String::from_utf8(spliced).unwrap(),
                String::from_utf8(plain.clone()).unwrap(),
                "{n} tasks"
            );
            // The plain form holds every task, in order (not the marker).
            let v: serde_json::Value = serde_json::from_slice(&plain).unwrap();
            let ids: Vec<u64> = v["tasks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["id"].as_u64().unwrap())
                .collect();
            assert_eq!(ids, (1..=n as u64).collect::<Vec<_>>());
        }
    }

    /// A writer that fails after `left` bytes.
    struct Fails {
        left: usize,
    }

    impl Write for Fails {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            if b.len() > self.left {
                return Err(io::Error::new(io::ErrorKind::BrokenPipe, "closed"));
            }
            self.left -= b.len();
            Ok(b.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_writers_error_ends_the_writing() {
        let r = report((1..=10_000).map(task).collect());
        for left in [0, 100, 50_000] {
            let e = to_writer(Fails { left }, &r, r.tasks.as_deref().unwrap()).unwrap_err();
            assert!(e.is_io(), "{e}");
        }
        // The marker stands for the tasks only inside `to_writer`.
        assert!(serde_json::to_string(&r)
            .unwrap()
            .contains("\"tasks\":[{\"id\":1,"));
    }
}

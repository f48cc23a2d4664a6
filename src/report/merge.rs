//! `pyunwind merge`: saved `--json` reports, read as a stream and grouped ([`super::group`]).
//!
//! An input is any number of JSON documents one after the other: reports as `pyunwind
//! pid|core --json` prints them (one per line; several targets print one line each), or
//! pretty-printed (`jq .`), concatenated from many machines. [`Documents`] cuts the stream into
//! documents without parsing it, so that a corrupt or truncated report costs only itself: a
//! document that does not parse is an error entry, and a `{` at the start of a line always
//! starts a new document (compact JSON has no newline inside a document, pretty-printed JSON
//! indents everything but its outer braces), so a report cut short does not swallow the next
//! one. One document is held at a time.

use std::io::{BufRead, ErrorKind};
use std::sync::Arc;

use serde::de::IgnoredAny;
use serde::Deserialize;

use super::gather::Gatherer;
use super::group::{GroupWhy, MemberWait, TargetError, ThreadIn};
use crate::model::{FrameDetail, FrameKind, FrameReport, GreenletState, StateWord, WaitKind};

/// The largest document read; past it the document is an error entry (a report of 100,000
/// asyncio tasks is about 50 MB).
pub const MAX_DOCUMENT_BYTES: usize = 512 << 20;

/// A document and the line it starts on, or the line and why that part of the input is none.
pub type Document = Result<(u64, Vec<u8>), (u64, String)>;

/// The documents of a stream, each `Ok(bytes)`, or `Err(why)` for what cannot be one.
pub struct Documents<R> {
    input: R,
    doc: Vec<u8>,
    depth: usize,
    in_string: bool,
    escape: bool,
    line_start: bool,
    /// Bytes that cannot start a document, skipped until a line starts with `{`.
    garbage: bool,
    /// The document is over the size cap: skipped as garbage, with its own message.
    oversize: bool,
    /// The line the document starts on (1-based), for error messages.
    line: u64,
    start_line: u64,
    done: bool,
    pending: std::collections::VecDeque<Document>,
}

impl<R: BufRead> Documents<R> {
    pub fn new(input: R) -> Self {
        Documents {
            input,
            doc: Vec::new(),
            depth: 0,
            in_string: false,
            escape: false,
            line_start: true,
            garbage: false,
            oversize: false,
            line: 1,
            start_line: 1,
            done: false,
            pending: std::collections::VecDeque::new(),
        }
    }

    /// What was pending when a new document started, or the input ended.
    fn cut(&mut self, why: &str) {
        if self.oversize {
            self.pending.push_back(Err((
                self.start_line,
                format!("over the limit of {MAX_DOCUMENT_BYTES} bytes per report"),
            )));
        } else if self.garbage {
            self.pending.push_back(Err((
                self.start_line,
                "not JSON: skipped to the next report".into(),
            )));
        } else if self.depth > 0 {
            self.pending.push_back(Err((self.start_line, why.into())));
        }
        self.doc.clear();
        self.depth = 0;
        self.in_string = false;
        self.escape = false;
        self.garbage = false;
        self.oversize = false;
    }

    fn byte(&mut self, b: u8) {
        if self.line_start && b == b'{' && (self.depth > 0 || self.garbage) {
            self.cut("truncated: a new report starts before this one ends");
        }
        self.line_start = b == b'\n';
        if b == b'\n' {
            self.line += 1;
        }
        if self.garbage {
            return;
        }
        if self.depth == 0 {
            match b {
                b' ' | b'\t' | b'\r' | b'\n' => {}
                b'{' | b'[' => {
                    self.start_line = self.line;
                    self.depth = 1;
                    self.doc.push(b);
                }
                _ => {
                    self.start_line = self.line;
                    self.garbage = true;
                }
            }
            return;
        }
        if self.doc.len() >= MAX_DOCUMENT_BYTES {
            self.doc = Vec::new();
            self.garbage = true;
            self.oversize = true;
            return;
        }
        self.doc.push(b);
        if self.in_string {
            if self.escape {
                self.escape = false;
            } else if b == b'\\' {
                self.escape = true;
            } else if b == b'"' {
                self.in_string = false;
            }
            return;
        }
        match b {
            b'"' => self.in_string = true,
            b'{' | b'[' => self.depth += 1,
            b'}' | b']' => {
                self.depth -= 1;
                if self.depth == 0 {
                    let doc = std::mem::take(&mut self.doc);
                    self.pending.push_back(Ok((self.start_line, doc)));
                }
            }
            _ => {}
        }
    }
}

impl<R: BufRead> Iterator for Documents<R> {
    /// `(line, document)`, or `(line, why)` for a part of the input that is no document.
    type Item = Document;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(d) = self.pending.pop_front() {
                return Some(d);
            }
            if self.done {
                return None;
            }
            let buf = match self.input.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => {
                    // An input that fails to read ends here, like one cut short.
                    self.done = true;
                    let line = self.line;
                    self.cut("truncated: the input could not be read further");
                    self.pending
                        .push_back(Err((line, format!("read error: {e}"))));
                    continue;
                }
            };
            if buf.is_empty() {
                self.done = true;
                self.cut("truncated: the input ends inside this report");
                continue;
            }
            // Copied out so that `byte` may borrow self; a read buffer is 64 KiB.
            let chunk = buf.to_vec();
            self.input.consume(chunk.len());
            for b in chunk {
                self.byte(b);
            }
        }
    }
}

/// What merge reads of a document: a report's threads and where it comes from, or a
/// multi-target run's entry for a target it could not read. Everything else (locals, tasks,
/// `--why` fields) is skipped as it is parsed.
#[derive(Deserialize)]
struct Doc {
    host: Option<String>,
    pid: Option<u32>,
    python: Option<DocPython>,
    threads: Option<Vec<DocThread>>,
    /// `--async`/`--tasks` reports.
    tasks: Option<Vec<DocTask>>,
    /// `--greenlets` reports.
    greenlets: Option<Vec<DocGreenlet>>,
    target: Option<String>,
    error: Option<String>,
    groups: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct DocPython {
    pid: Option<u32>,
}

#[derive(Deserialize)]
struct DocThread {
    native_id: Option<u64>,
    name: Option<String>,
    /// Reports made before thread names have none.
    #[serde(default)]
    native_name: Option<String>,
    frames: Vec<DocFrame>,
    #[serde(default)]
    truncated: bool,
    /// `--why` reports have `state` (null or a word): present, even null, means `--why`. A
    /// word of no [`StateWord`] makes the report an error entry, as an unknown wait kind does.
    #[serde(default, deserialize_with = "present")]
    state: Option<Option<StateWord>>,
    #[serde(default)]
    syscall: Option<String>,
    #[serde(default)]
    waiting: Option<DocWaiting>,
}

#[derive(Deserialize)]
struct DocWaiting {
    kind: WaitKind,
    /// A `native` wait's `function`, which the straggler verdict names.
    #[serde(default)]
    function: Option<String>,
}

/// A field that is there, null or not (missing: `None` by `default`).
fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

#[derive(Deserialize)]
struct DocTask {
    id: u64,
    name: String,
    native_id: Option<u64>,
    frames: Vec<DocFrame>,
}

#[derive(Deserialize)]
struct DocGreenlet {
    address: u64,
    thread: Option<u64>,
    state: GreenletState,
    name: Option<String>,
    frames: Vec<DocFrame>,
    #[serde(default)]
    truncated: bool,
    waiting: Option<MemberWait>,
}

#[derive(Deserialize)]
struct DocFrame {
    kind: FrameKind,
    function: Option<Arc<str>>,
    file: Option<Arc<str>>,
    line: Option<u32>,
    entry: Option<bool>,
    address: Option<u64>,
    interpreter_id: Option<u32>,
    reason: Option<String>,
    module: Option<String>,
    symbol: Option<String>,
    offset: Option<u64>,
    inlined: Option<bool>,
}

impl From<DocFrame> for FrameReport {
    fn from(f: DocFrame) -> Self {
        FrameReport {
            kind: f.kind,
            function: f.function,
            file: f.file,
            line: f.line,
            entry: f.entry,
            address: f.address,
            interpreter_id: f.interpreter_id,
            detail: (f.reason.is_some()
                || f.module.is_some()
                || f.symbol.is_some()
                || f.offset.is_some()
                || f.inlined.is_some())
            .then(|| {
                Box::new(FrameDetail {
                    reason: f.reason,
                    locals: None,
                    module: f.module,
                    symbol: f.symbol,
                    offset: f.offset,
                    inlined: f.inlined,
                })
            }),
        }
    }
}

/// Each saved task or greenlet with its frames taken out and decoded, so that the grouping
/// can borrow both.
fn with_frames<T>(
    items: impl IntoIterator<Item = T>,
    frames_of: fn(&mut T) -> &mut Vec<DocFrame>,
) -> Vec<(T, Vec<FrameReport>)> {
    items
        .into_iter()
        .map(|mut item| {
            let frames = std::mem::take(frames_of(&mut item))
                .into_iter()
                .map(FrameReport::from)
                .collect();
            (item, frames)
        })
        .collect()
}

/// Groups every report of `input` (named `name` in error entries) into `grouper`, with its
/// tasks and greenlets where it has them (every report is added to each grouping, so that
/// they count the same processes); what cannot be read goes to `failed`.
pub fn merge_input<R: BufRead>(
    name: &str,
    input: R,
    grouper: &mut Gatherer,
    failed: &mut Vec<TargetError>,
) {
    let error = |line: u64, why: String| TargetError {
        target: name.to_string(),
        host: None,
        pid: None,
        error: format!("report at line {line}: {why}"),
    };
    for item in Documents::new(input) {
        let (line, bytes) = match item {
            Ok(d) => d,
            Err((line, why)) => {
                failed.push(error(line, why));
                continue;
            }
        };
        let doc: Doc = match serde_json::from_slice(&bytes) {
            Ok(d) => d,
            Err(e) => {
                failed.push(error(line, format!("not a report: {e}")));
                continue;
            }
        };
        drop(bytes);
        match doc {
            Doc {
                python: Some(python),
                threads: Some(threads),
                tasks: doc_tasks,
                greenlets: doc_greenlets,
                host,
                pid,
                ..
            } => {
                let pid = pid.or(python.pid);
                let doc_tasks = doc_tasks.map(|ts| with_frames(ts, |t| &mut t.frames));
                grouper.add_tasks(
                    host.as_deref(),
                    pid,
                    doc_tasks.as_ref().map(|ts| {
                        ts.iter()
                            .map(|(t, frames)| ThreadIn::task(t.id, t.native_id, &t.name, frames))
                    }),
                );
                drop(doc_tasks);
                // Only the suspended greenlets are grouped (as `ThreadIn::greenlet` says).
                let doc_greenlets = doc_greenlets.map(|gs| {
                    let suspended = gs
                        .into_iter()
                        .filter(|g| g.state == GreenletState::Suspended);
                    with_frames(suspended, |g| &mut g.frames)
                });
                grouper.add_greenlets(
                    host.as_deref(),
                    pid,
                    doc_greenlets.as_ref().map(|gs| {
                        gs.iter().map(|(g, frames)| ThreadIn {
                            task: None,
                            greenlet: Some(g.address),
                            wait: g.waiting.clone(),
                            native_id: g.thread,
                            name: g.name.as_deref(),
                            native_name: None,
                            frames,
                            truncated: g.truncated,
                            why: None,
                            call: None,
                        })
                    }),
                );
                drop(doc_greenlets);
                let threads: Vec<(DocThread, Vec<FrameReport>)> = threads
                    .into_iter()
                    .map(|mut t| {
                        let frames = std::mem::take(&mut t.frames)
                            .into_iter()
                            .map(FrameReport::from)
                            .collect();
                        (t, frames)
                    })
                    .collect();
                grouper.add_report(
                    host.as_deref(),
                    pid,
                    threads.iter().map(|(t, frames)| ThreadIn {
                        task: None,
                        greenlet: None,
                        wait: None,
                        native_id: t.native_id,
                        name: t.name.as_deref(),
                        native_name: t.native_name.as_deref(),
                        frames,
                        truncated: t.truncated,
                        why: t.state.map(|state| GroupWhy {
                            state,
                            syscall: t.syscall.clone(),
                            waiting: t.waiting.as_ref().map(|w| w.kind),
                        }),
                        call: t.waiting.as_ref().and_then(|w| w.function.as_deref()),
                    }),
                );
            }
            Doc {
                error: Some(e),
                target,
                host,
                pid,
                ..
            } => failed.push(TargetError {
                target: target.unwrap_or_else(|| name.to_string()),
                host,
                pid,
                error: e,
            }),
            Doc {
                groups: Some(_), ..
            } => failed.push(error(
                line,
                "grouped output (--group or merge), not a report: merge the reports".into(),
            )),
            _ => failed.push(error(
                line,
                "not a report: it has no `python` and `threads`".into(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::group::GroupBy;

    fn docs(input: &str) -> Vec<Result<String, String>> {
        Documents::new(input.as_bytes())
            .map(|d| {
                d.map(|(_, b)| String::from_utf8(b).unwrap())
                    .map_err(|(line, why)| format!("{line}: {why}"))
            })
            .collect()
    }

    #[test]
    fn documents_are_cut_at_their_outer_braces() {
        let got = docs("{\"a\": \"}{\\\"\"}\n{\"b\": [1, {\"c\": 2}]}{\"d\": 3}\n");
        assert_eq!(
            got,
            [
                Ok("{\"a\": \"}{\\\"\"}".to_string()),
                Ok("{\"b\": [1, {\"c\": 2}]}".to_string()),
                Ok("{\"d\": 3}".to_string()),
            ]
        );
    }

    #[test]
    fn a_truncated_document_costs_only_itself() {
        let got = docs("{\"a\": 1}\n{\"b\": {\"c\n{\"d\": 4}\n{\"e\": [");
        assert_eq!(got.len(), 4);
        assert_eq!(got[0], Ok("{\"a\": 1}".into()));
        assert!(got[1]
            .as_ref()
            .unwrap_err()
            .starts_with("2: truncated: a new report starts"));
        assert_eq!(got[2], Ok("{\"d\": 4}".into()));
        assert!(got[3]
            .as_ref()
            .unwrap_err()
            .starts_with("4: truncated: the input ends"));
    }

    #[test]
    fn pretty_printed_documents_and_garbage() {
        let got = docs("{\n  \"a\": {\n    \"b\": 1\n  }\n}\nnot json\n{\"c\": 2}\n");
        assert_eq!(got.len(), 3);
        assert_eq!(got[0], Ok("{\n  \"a\": {\n    \"b\": 1\n  }\n}".into()));
        assert!(got[1].as_ref().unwrap_err().starts_with("6: not JSON"));
        assert_eq!(got[2], Ok("{\"c\": 2}".into()));
    }

    fn report(host: &str, pid: u32, function: &str) -> String {
        format!(
            r#"{{"host":"{host}","python":{{"version":"3.12.1","pid":{pid}}},"threads":[{{"native_id":{pid},"thread_id":1,"name":"MainThread","frames":[{{"kind":"python","function":"{function}","file":"r.py","line":3,"locals":[{{"name":"x","repr":"1","is_arg":true}}]}}],"truncated":false}}],"errors":[]}}"#
        )
    }

    #[test]
    fn why_states_are_read_even_null() {
        let plain = report("a", 1, "wait");
        let why = |state: &str| {
            report("a", 2, "wait").replace(
                r#""truncated":false"#,
                &format!(r#""truncated":false,"state":{state},"syscall":null,"waiting":null"#),
            )
        };
        let input = [plain, why("null"), why("\"running\""), why("null")].join("\n");
        let mut g = Gatherer::new(GroupBy::Line, false, false);
        let mut failed = Vec::new();
        merge_input("w.json", input.as_bytes(), &mut g, &mut failed);
        assert!(failed.is_empty(), "{failed:?}");
        let out = g.finish(Vec::new()).grouped;
        // No --why; --why with a null state (twice); --why running.
        let whys: Vec<_> = out
            .groups
            .iter()
            .map(|g| (g.count, g.why.clone()))
            .collect();
        assert_eq!(
            whys,
            [
                (2, Some(GroupWhy::default())),
                (1, None),
                (
                    1,
                    Some(GroupWhy {
                        state: Some(StateWord::Running),
                        ..GroupWhy::default()
                    })
                ),
            ]
        );
        // Written as it was read.
        let json = serde_json::to_value(&out.groups[2]).unwrap();
        assert_eq!(json["state"], "running");
    }

    #[test]
    fn an_unknown_state_or_wait_word_makes_the_report_an_error_entry() {
        let why = |pid: u32, state: &str, waiting: &str| {
            report("a", pid, "wait").replace(
                r#""truncated":false"#,
                &format!(
                    r#""truncated":false,"state":"{state}","syscall":null,"waiting":{waiting}"#
                ),
            )
        };
        let input = [
            why(1, "running", "null"),
            why(2, "dozing", "null"),
            why(3, "syscall", r#"{"kind":"spinlock","frame":0}"#),
            why(4, "running", "null"),
        ]
        .join("\n");
        let mut g = Gatherer::new(GroupBy::Line, false, false);
        let mut failed = Vec::new();
        merge_input("w.json", input.as_bytes(), &mut g, &mut failed);
        let errors: Vec<_> = failed.iter().map(|f| f.error.as_str()).collect();
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(
            errors[0].starts_with("report at line 2: not a report: unknown variant `dozing`"),
            "{errors:?}"
        );
        assert!(
            errors[1].starts_with("report at line 3: not a report: unknown variant `spinlock`"),
            "{errors:?}"
        );
        let out = g.finish(Vec::new()).grouped;
        assert_eq!(
            (out.reports, out.groups.len(), out.groups[0].count),
            (2, 1, 2)
        );
    }

    #[test]
    fn why_waits_are_read_back_by_kind_and_written_as_they_were() {
        let why = |pid: u32, waiting: &str| {
            report("a", pid, "wait").replace(
                r#""truncated":false"#,
                &format!(
                    r#""truncated":false,"state":"syscall","syscall":"futex","waiting":{waiting}"#
                ),
            )
        };
        let native = r#"{"kind":"native","object":5,"type":"T","owner":null,"frame":0,"function":"torch.run","native_function":null}"#;
        let rlock = r#"{"kind":"rlock","object":6,"type":"RLock","owner":3,"frame":0}"#;
        let input = [why(1, native), why(2, rlock), why(3, native)].join("\n");
        let mut g = Gatherer::new(GroupBy::Line, false, false);
        let mut failed = Vec::new();
        merge_input("w.json", input.as_bytes(), &mut g, &mut failed);
        assert!(failed.is_empty(), "{failed:?}");
        let out = g.finish(Vec::new()).grouped;
        let kinds: Vec<_> = out
            .groups
            .iter()
            .map(|g| (g.count, g.why.as_ref().and_then(|w| w.waiting)))
            .collect();
        assert_eq!(
            kinds,
            [(2, Some(WaitKind::Native)), (1, Some(WaitKind::RLock))]
        );
        let json = serde_json::to_value(&out.groups[1]).unwrap();
        assert_eq!(json["waiting"], "rlock");
    }

    #[test]
    fn reports_merge_and_bad_ones_are_error_entries() {
        let input = [
            report("a", 1, "wait"),
            report("b", 2, "wait"),
            "{\"threads\": 3}".into(),
            report("b", 3, "load")[..60].to_string(),
            report("c", 4, "wait"),
            r#"{"target":"99","host":"c","pid":99,"error":"no such process"}"#.into(),
        ]
        .join("\n");
        let mut g = Gatherer::new(GroupBy::Line, false, false)
            .with_tasks(false)
            .with_greenlets(false);
        let mut failed = Vec::new();
        merge_input("saved.json", input.as_bytes(), &mut g, &mut failed);
        let out = g.finish(failed).grouped;
        // No report has tasks or greenlets: neither grouping is shown.
        assert!(out.task_groups.is_none() && out.greenlet_groups.is_none());
        assert_eq!(out.reports, 3);
        assert_eq!(out.groups.len(), 1);
        let hosts: Vec<_> = out.groups[0]
            .threads
            .iter()
            .map(|m| m.host.as_deref().unwrap())
            .collect();
        assert_eq!(hosts, ["a", "b", "c"]);
        assert_eq!(out.failed.len(), 3);
        assert!(out.failed[0]
            .error
            .starts_with("report at line 3: not a report"));
        assert!(out.failed[1]
            .error
            .starts_with("report at line 4: truncated"));
        assert_eq!(out.failed[2].target, "99");
        assert_eq!(out.failed[2].pid, Some(99));
    }

    /// A `--greenlets` report of pid `pid`: its suspended greenlets `(address, function,
    /// waiting)`, and a running one (not grouped).
    fn greenlet_report(pid: u32, greenlets: &[(u64, &str, &str)]) -> String {
        let mut gs: Vec<String> = greenlets
            .iter()
            .map(|(a, f, w)| {
                format!(
                    r#"{{"address":{a},"thread":{pid},"state":"suspended","main":false,"parent":1,"type":"Greenlet","name":"g{a}","function":null,"frames":[{{"kind":"python","function":"{f}","file":"/app/app.py","line":11}},{{"kind":"python","function":"run","file":"/app/app.py","line":2}}],"truncated":false,"waiting":{w}}}"#
                )
            })
            .collect();
        gs.push(format!(
            r#"{{"address":1,"thread":{pid},"state":"running","main":true,"parent":null,"type":"greenlet.greenlet","name":null,"function":null,"frames":[{{"kind":"python","function":"{}","file":"/app/app.py","line":11}}],"truncated":false,"waiting":null}}"#,
            greenlets[0].1
        ));
        report("h", pid, "loop").replace(
            r#""errors":[]"#,
            &format!(r#""greenlets":[{}],"errors":[]"#, gs.join(",")),
        )
    }

    #[test]
    fn saved_greenlets_are_grouped_and_merged_into_their_tree() {
        let sock = r#"{"kind":"socket","object":5,"type":"socket","owner":null,"frame":0,"fd":7,"direction":"recv","local":"127.0.0.1:4000","peer":"10.0.0.5:5432"}"#;
        let input = [
            greenlet_report(1, &[(10, "slow_upstream", sock), (11, "nap", "null")]),
            greenlet_report(
                2,
                &[(20, "slow_upstream", sock), (21, "slow_upstream", sock)],
            ),
            report("h", 3, "loop"),
        ]
        .join("\n");
        let mut g = Gatherer::new(GroupBy::Line, true, false)
            .with_tasks(false)
            .with_greenlets(false);
        let mut failed = Vec::new();
        merge_input("saved.json", input.as_bytes(), &mut g, &mut failed);
        assert!(failed.is_empty(), "{failed:?}");
        let out = g.finish(Vec::new());
        assert!(out.grouped.task_groups.is_none() && out.task_tree.is_none());
        let groups = out.grouped.greenlet_groups.as_ref().unwrap();
        assert_eq!(groups.len(), 2);
        let up = &groups[0];
        assert_eq!((up.count, up.processes, up.outlier), (3, 2, false));
        assert!(up.threads.is_empty());
        let got: Vec<_> = up.greenlets.iter().map(|m| (m.pid, m.address)).collect();
        assert_eq!(
            got,
            [
                (Some(1), Some(10)),
                (Some(2), Some(20)),
                (Some(2), Some(21))
            ]
        );
        let w = up.greenlets[0].waiting.clone().unwrap().unwrap();
        assert_eq!(
            (w.kind, w.peer.as_deref()),
            (WaitKind::Socket, Some("10.0.0.5:5432"))
        );
        assert_eq!(
            crate::report::group_text::greenlet_headline(up),
            "3 greenlets in 2 processes wait in slow_upstream (app.py:11): socket 10.0.0.5:5432"
        );
        let nap = &groups[1];
        assert!(nap.outlier);
        assert_eq!(nap.greenlets[0].waiting, Some(None));
        assert_eq!(
            crate::report::group_text::greenlet_headline(nap),
            "1 greenlet in 1 process (pid 1, host h) is in nap (app.py:11) [outlier]"
        );
        let json = serde_json::to_value(&out).unwrap();
        assert_eq!(
            json["greenlet_groups"][1]["greenlets"][0]["waiting"],
            serde_json::Value::Null
        );
        assert!(json["greenlet_groups"][0].get("threads").is_none());
        let tree = out.greenlet_tree.as_ref().unwrap();
        assert_eq!((tree.len(), tree[0].count, tree[0].processes), (1, 4, 2));
        let leaf = &tree[0].children[0];
        assert_eq!(
            (leaf.function.as_deref(), leaf.count),
            (Some("slow_upstream"), 3)
        );
        assert!(leaf.threads.is_empty() && leaf.greenlets.len() == 3);
        let mut text = String::new();
        crate::report::tree::render(tree, &mut text);
        assert_eq!(
            text,
            "4 run (/app/app.py:2)\n  3 slow_upstream (/app/app.py:11): pid 1 (host h) greenlet \
             0xa \"g10\"; pid 2 (host h) greenlet 0x14 \"g20\"; pid 2 (host h) greenlet 0x15 \
             \"g21\"\n  1 nap (/app/app.py:11): pid 1 (host h) greenlet 0xb \"g11\"\n"
        );
    }
}

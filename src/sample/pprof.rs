//! `record --format pprof`: a [`Profile`] as pprof's `profile.proto` (google/pprof,
//! `proto/profile.proto`: package `perftools.profiles`), gzipped as pprof writes and reads it.
//!
//! The protobuf is written by hand: a handful of varint and length-delimited fields does not
//! need a code generator. What the file holds:
//!
//! - `sample_type`: `samples`/`count`, then `wall`/`nanoseconds` (with `--idle`, every
//!   thread's samples) or `cpu`/`nanoseconds` (without it, only threads on a CPU count): each
//!   sample's count times the planned period;
//! - one `sample` per distinct stack of each stack owner, `location_id` leaf first (the
//!   proto's order), its values the count and that time, and labels: `thread_id` (number) and
//!   `thread_name` for a thread; `task_id`/`task_name` for an asyncio task (`--async`);
//!   `greenlet_id`/`greenlet_name` for a greenlet (`--greenlets`); `pid` for the process. So
//!   the stacks are those of the other formats, and `pprof -tagroot=thread_name` puts the
//!   threads at the root as py-spy's `--threads` does;
//! - one `location` per distinct frame (function, file, line), one `line` in it, and one
//!   `function` per distinct (function, file);
//! - `time_nanos` (the recording's start, Unix time), `duration_nanos`, `period_type` and
//!   `period` (the planned period, nanoseconds).

use std::collections::HashMap;
use std::io::Write;

use super::profile::{Owner, Profile};

/// What the file says of the recording besides its samples.
pub struct Meta {
    /// The recording's start, nanoseconds since the Unix epoch.
    pub time_nanos: u64,
    pub duration_nanos: u64,
    /// The planned period between samples, nanoseconds.
    pub period_nanos: u64,
    /// Every thread counted (`--idle`: wall time), else only those on a CPU.
    pub wall: bool,
}

// Field numbers of profile.proto (google/pprof, proto/profile.proto).
const PROFILE_SAMPLE_TYPE: u32 = 1;
const PROFILE_SAMPLE: u32 = 2;
const PROFILE_LOCATION: u32 = 4;
const PROFILE_FUNCTION: u32 = 5;
const PROFILE_STRING_TABLE: u32 = 6;
const PROFILE_TIME_NANOS: u32 = 9;
const PROFILE_DURATION_NANOS: u32 = 10;
const PROFILE_PERIOD_TYPE: u32 = 11;
const PROFILE_PERIOD: u32 = 12;
const VALUE_TYPE_TYPE: u32 = 1;
const VALUE_TYPE_UNIT: u32 = 2;
const SAMPLE_LOCATION_ID: u32 = 1;
const SAMPLE_VALUE: u32 = 2;
const SAMPLE_LABEL: u32 = 3;
const LABEL_KEY: u32 = 1;
const LABEL_STR: u32 = 2;
const LABEL_NUM: u32 = 3;
const LOCATION_ID: u32 = 1;
const LOCATION_LINE: u32 = 4;
const LINE_FUNCTION_ID: u32 = 1;
const LINE_LINE: u32 = 2;
const FUNCTION_ID: u32 = 1;
const FUNCTION_NAME: u32 = 2;
const FUNCTION_SYSTEM_NAME: u32 = 3;
const FUNCTION_FILENAME: u32 = 4;

/// Protobuf wire types (protobuf's encoding guide).
const WIRE_VARINT: u32 = 0;
const WIRE_LEN: u32 = 2;

/// One message being written.
#[derive(Default)]
struct Message(Vec<u8>);

impl Message {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push(v as u8 | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn key(&mut self, field: u32, wire: u32) {
        self.varint(u64::from(field << 3 | wire));
    }

    /// An integer field (int64 and uint64 alike: every value written is at least 0); a zero
    /// is left out, as proto3 leaves out a default.
    fn int(&mut self, field: u32, v: u64) {
        if v != 0 {
            self.key(field, WIRE_VARINT);
            self.varint(v);
        }
    }

    fn bytes(&mut self, field: u32, b: &[u8]) {
        self.key(field, WIRE_LEN);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
    }

    fn message(&mut self, field: u32, m: Message) {
        self.bytes(field, &m.0);
    }

    /// A repeated integer field, packed (proto3's default encoding).
    fn packed(&mut self, field: u32, vs: impl IntoIterator<Item = u64>) {
        let mut m = Message::default();
        for v in vs {
            m.varint(v);
        }
        self.bytes(field, &m.0);
    }
}

/// The string table: `""` first, as the proto requires.
struct Strings {
    list: Vec<String>,
    index: HashMap<String, u64>,
}

impl Strings {
    fn new() -> Strings {
        let mut s = Strings {
            list: Vec::new(),
            index: HashMap::new(),
        };
        s.of("");
        s
    }

    fn of(&mut self, s: &str) -> u64 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.list.len() as u64;
        self.list.push(s.to_string());
        self.index.insert(s.to_string(), i);
        i
    }
}

fn value_type(strings: &mut Strings, kind: &str, unit: &str) -> Message {
    let mut m = Message::default();
    m.int(VALUE_TYPE_TYPE, strings.of(kind));
    m.int(VALUE_TYPE_UNIT, strings.of(unit));
    m
}

fn label(key: u64, str_: Option<u64>, num: Option<u64>) -> Message {
    let mut m = Message::default();
    m.int(LABEL_KEY, key);
    if let Some(s) = str_ {
        m.int(LABEL_STR, s);
    }
    if let Some(n) = num {
        m.int(LABEL_NUM, n);
    }
    m
}

/// The labels of one stack owner's samples.
fn owner_labels(owner: &Owner, strings: &mut Strings) -> Vec<Message> {
    let (id_key, name_key) = match owner.kind {
        super::profile::OwnerKind::Thread => ("thread_id", "thread_name"),
        super::profile::OwnerKind::Task => ("task_id", "task_name"),
        super::profile::OwnerKind::Greenlet => ("greenlet_id", "greenlet_name"),
    };
    let mut labels = vec![label(strings.of(id_key), None, Some(owner.id))];
    if let Some(name) = &owner.name {
        labels.push(label(strings.of(name_key), Some(strings.of(name)), None));
    }
    if let Some(pid) = owner.pid {
        labels.push(label(strings.of("pid"), None, Some(pid as u64)));
    }
    labels
}

/// The profile as `profile.proto`'s bytes, before gzip.
pub fn encode(p: &Profile, meta: &Meta) -> Vec<u8> {
    let mut strings = Strings::new();
    let mut out = Message::default();
    let time_kind = if meta.wall { "wall" } else { "cpu" };
    out.message(
        PROFILE_SAMPLE_TYPE,
        value_type(&mut strings, "samples", "count"),
    );
    out.message(
        PROFILE_SAMPLE_TYPE,
        value_type(&mut strings, time_kind, "nanoseconds"),
    );
    for (owner, stacks) in p.owners() {
        let labels: Vec<Vec<u8>> = owner_labels(owner, &mut strings)
            .into_iter()
            .map(|m| m.0)
            .collect();
        for (stack, n) in stacks {
            let mut s = Message::default();
            // Location ids are frame indexes plus one (0 is no location), leaf first.
            s.packed(
                SAMPLE_LOCATION_ID,
                stack.iter().rev().map(|&i| u64::from(i) + 1),
            );
            s.packed(SAMPLE_VALUE, [*n, n.saturating_mul(meta.period_nanos)]);
            for l in &labels {
                s.bytes(SAMPLE_LABEL, l);
            }
            out.message(PROFILE_SAMPLE, s);
        }
    }
    let mut functions: HashMap<(&str, &str), u64> = HashMap::new();
    let mut function_list = Vec::new();
    for (i, (function, file, line)) in p.frames().iter().enumerate() {
        let next = functions.len() as u64 + 1;
        let fid = *functions.entry((function, file)).or_insert_with(|| {
            function_list.push((next, &**function, &**file));
            next
        });
        let mut l = Message::default();
        l.int(LINE_FUNCTION_ID, fid);
        l.int(LINE_LINE, u64::from(*line));
        let mut loc = Message::default();
        loc.int(LOCATION_ID, i as u64 + 1);
        loc.message(LOCATION_LINE, l);
        out.message(PROFILE_LOCATION, loc);
    }
    for (id, function, file) in function_list {
        let mut f = Message::default();
        f.int(FUNCTION_ID, id);
        let name = strings.of(function);
        f.int(FUNCTION_NAME, name);
        f.int(FUNCTION_SYSTEM_NAME, name);
        f.int(FUNCTION_FILENAME, strings.of(file));
        out.message(PROFILE_FUNCTION, f);
    }
    let period_type = value_type(&mut strings, time_kind, "nanoseconds");
    for s in &strings.list {
        out.bytes(PROFILE_STRING_TABLE, s.as_bytes());
    }
    out.int(PROFILE_TIME_NANOS, meta.time_nanos);
    out.int(PROFILE_DURATION_NANOS, meta.duration_nanos);
    out.message(PROFILE_PERIOD_TYPE, period_type);
    out.int(PROFILE_PERIOD, meta.period_nanos);
    out.0
}

/// The profile as pprof reads it: `profile.proto`, gzipped.
pub fn gzipped(p: &Profile, meta: &Meta) -> Vec<u8> {
    let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    // Writing to a Vec cannot fail.
    z.write_all(&encode(p, meta)).expect("writing to memory");
    z.finish().expect("writing to memory")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::test_support::{python_frame, thread_of};

    /// A message's fields: (number, varint value or bytes).
    fn fields(mut b: &[u8]) -> Vec<(u32, Result<u64, Vec<u8>>)> {
        fn varint(b: &mut &[u8]) -> u64 {
            let (mut v, mut shift) = (0u64, 0);
            loop {
                let byte = b[0];
                *b = &b[1..];
                v |= u64::from(byte & 0x7f) << shift;
                shift += 7;
                if byte < 0x80 {
                    return v;
                }
            }
        }
        let mut out = Vec::new();
        while !b.is_empty() {
            let key = varint(&mut b);
            let field = (key >> 3) as u32;
            if key & 7 == u64::from(WIRE_VARINT) {
                out.push((field, Ok(varint(&mut b))));
            } else {
                let n = varint(&mut b) as usize;
                out.push((field, Err(b[..n].to_vec())));
                b = &b[n..];
            }
        }
        out
    }

    #[test]
    fn one_stack_leaf_first_with_its_thread_labels() {
        let mut p = Profile::new();
        let t = thread_of(
            7,
            vec![
                python_frame("f", "/a.py", 3),
                python_frame("main", "/a.py", 9),
            ],
        );
        p.add(&[t.clone(), t], &|_| true, None);
        let meta = Meta {
            time_nanos: 5,
            duration_nanos: 6,
            period_nanos: 10_000_000,
            wall: false,
        };
        let top = fields(&encode(&p, &meta));
        let strings: Vec<String> = top
            .iter()
            .filter(|(f, _)| *f == PROFILE_STRING_TABLE)
            .map(|(_, v)| String::from_utf8(v.clone().unwrap_err()).unwrap())
            .collect();
        assert_eq!(strings[0], "");
        let of = |i: u64| strings[i as usize].as_str();
        let (_, sample) = top.iter().find(|(f, _)| *f == PROFILE_SAMPLE).unwrap();
        let sample = fields(sample.as_ref().unwrap_err());
        // Frames by first sight: main is location 1, f location 2; leaf first: [2, 1].
        assert_eq!(sample[0], (SAMPLE_LOCATION_ID, Err(vec![2, 1])));
        // Packed values: the count (2, one byte), then 2 periods in nanoseconds.
        assert_eq!(sample[1].0, SAMPLE_VALUE);
        assert_eq!(sample[1].1.as_ref().unwrap_err()[0], 2);
        let labels: Vec<(String, Option<u64>, Option<String>)> = sample[2..]
            .iter()
            .map(|(_, l)| {
                let l = fields(l.as_ref().unwrap_err());
                let get = |k| {
                    l.iter()
                        .find(|(f, _)| *f == k)
                        .map(|(_, v)| *v.as_ref().unwrap())
                };
                (
                    of(get(LABEL_KEY).unwrap()).to_string(),
                    get(LABEL_NUM),
                    get(LABEL_STR).map(|s| of(s).to_string()),
                )
            })
            .collect();
        assert_eq!(
            labels,
            [
                ("thread_id".into(), Some(7), None),
                ("thread_name".into(), None, Some("t7".into()))
            ]
        );
        let scalars: Vec<_> = top.iter().filter(|(_, v)| v.is_ok()).cloned().collect();
        assert_eq!(
            scalars,
            [
                (PROFILE_TIME_NANOS, Ok(5)),
                (PROFILE_DURATION_NANOS, Ok(6)),
                (PROFILE_PERIOD, Ok(10_000_000))
            ]
        );
    }

    #[test]
    fn varints_and_fields_are_protobufs() {
        let mut m = Message::default();
        m.varint(300);
        assert_eq!(m.0, [0xac, 0x02]);
        let mut m = Message::default();
        m.int(PROFILE_PERIOD, 150);
        m.int(PROFILE_TIME_NANOS, 0);
        m.bytes(PROFILE_STRING_TABLE, b"ab");
        m.packed(SAMPLE_LOCATION_ID, [1, 300]);
        // Field 12 varint: key 0x60; field 6 bytes: 0x32; field 1 packed: 0x0a.
        assert_eq!(
            m.0,
            [0x60, 0x96, 0x01, 0x32, 2, b'a', b'b', 0x0a, 3, 1, 0xac, 0x02]
        );
    }
}

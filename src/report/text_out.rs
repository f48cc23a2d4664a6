//! Text made in pieces and, where it goes to a file (the CLI's standard output), written out as
//! it grows: the task tree and table of 100,000 tasks are 41 MB, which held in one string cost
//! about 23,000 fresh pages and two copies (0.05 s of a 0.39 s run).

use std::io::Write;

/// Pending text past which [`TextOut::spill`] writes it out.
const SPILL_AT: usize = 1 << 20;

/// The text of one rendering: kept whole ([`TextOut::kept`]) or written out to a sink in
/// parts of about [`SPILL_AT`] bytes ([`TextOut::streamed`]).
pub struct TextOut<'a> {
    /// Text not yet written out.
    pending: String,
    /// Bytes written out before `pending`.
    written: usize,
    sink: Option<&'a mut dyn Write>,
    /// The sink's first error: nothing is written after it.
    error: Option<std::io::Error>,
}

impl<'a> TextOut<'a> {
    /// Text kept in memory, returned by [`TextOut::finish`].
    pub fn kept() -> Self {
        TextOut {
            pending: String::new(),
            written: 0,
            sink: None,
            error: None,
        }
    }

    /// Text written to `sink` as it grows, NUL bytes shown as `\x00` (as
    /// [`super::text::printable`] shows them in kept text).
    pub fn streamed(sink: &'a mut dyn Write) -> Self {
        TextOut {
            sink: Some(sink),
            ..TextOut::kept()
        }
    }

    /// The text not yet written out, to push to.
    pub fn text(&mut self) -> &mut String {
        &mut self.pending
    }

    /// Bytes of text so far, written out or not.
    pub fn len(&self) -> usize {
        self.written + self.pending.len()
    }

    /// Whether no text was made yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Writes the pending text out when it goes to a sink and has grown past [`SPILL_AT`].
    pub fn spill(&mut self) {
        if self.sink.is_some() && self.pending.len() >= SPILL_AT {
            self.write_pending();
        }
    }

    /// A finished piece of text: written out at once when the text goes to a sink, else kept.
    pub fn push_part(&mut self, part: &str) {
        if self.sink.is_none() {
            self.pending.push_str(part);
            return;
        }
        self.write_pending();
        self.write(part);
        self.written += part.len();
    }

    /// The text of a [`TextOut::kept`], which has no sink to fail.
    pub fn into_kept(self) -> String {
        self.finish().unwrap_or_default()
    }

    /// The kept text (empty when it went to a sink), or the sink's first error.
    pub fn finish(mut self) -> std::io::Result<String> {
        if self.sink.is_none() {
            return Ok(self.pending);
        }
        self.write_pending();
        if let Some(sink) = self.sink.as_mut() {
            if self.error.is_none() {
                if let Err(e) = sink.flush() {
                    self.error = Some(e);
                }
            }
        }
        self.error.map_or(Ok(String::new()), Err)
    }

    fn write_pending(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        self.write(&pending);
        self.written += pending.len();
        // The buffer's memory is used again: its pages are already touched.
        self.pending = pending;
        self.pending.clear();
    }

    fn write(&mut self, text: &str) {
        let (Some(sink), None) = (self.sink.as_mut(), &self.error) else {
            return;
        };
        let written = if text.contains('\0') {
            sink.write_all(text.replace('\0', "\\x00").as_bytes())
        } else {
            sink.write_all(text.as_bytes())
        };
        if let Err(e) = written {
            self.error = Some(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same pieces give the same text kept or streamed, and streamed text leaves memory in
    /// parts, not all at the end.
    #[test]
    fn streamed_text_is_the_kept_text_in_parts() {
        let make = |out: &mut TextOut| {
            // Lines of 10 bytes: three spills, then one line pending.
            for i in 0..3 * SPILL_AT.div_ceil(10) + 1 {
                out.text().push_str(if i % 7 == 0 {
                    "nul \0 ten\n"
                } else {
                    "ten bytes\n"
                });
                out.spill();
            }
            out.push_part("a part\n");
            out.text().push_str("the end\n");
        };
        let mut kept = TextOut::kept();
        make(&mut kept);
        let total = kept.len();
        let kept = crate::report::text::printable(kept.finish().unwrap());

        struct Counted {
            bytes: Vec<u8>,
            writes: usize,
        }
        impl Write for Counted {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.bytes.extend_from_slice(b);
                self.writes += 1;
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut sink = Counted {
            bytes: Vec::new(),
            writes: 0,
        };
        let mut streamed = TextOut::streamed(&mut sink);
        make(&mut streamed);
        assert_eq!(streamed.len(), total);
        assert_eq!(streamed.finish().unwrap(), "");
        assert_eq!(String::from_utf8(sink.bytes).unwrap(), kept);
        // Three spills, the line pending before the part, the part and the end.
        assert_eq!(sink.writes, 6);
    }

    /// A closed pipe stops the writing; its error is the result.
    #[test]
    fn the_sinks_first_error_ends_the_writing() {
        struct Closed(usize);
        impl Write for Closed {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                self.0 += 1;
                Err(std::io::ErrorKind::BrokenPipe.into())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut sink = Closed(0);
        let mut out = TextOut::streamed(&mut sink);
        out.push_part("one\n");
        out.push_part("two\n");
        let e = out.finish().unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe);
        assert_eq!(sink.0, 1);
    }
}

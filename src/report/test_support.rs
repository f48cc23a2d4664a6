//! What the report model's unit tests build their reports from.

use super::{FrameKind, FrameReport};

/// A Python frame of `function` in `file` at `line` (its address made up from the line).
pub(crate) fn python_frame(function: &str, file: &str, line: u32) -> FrameReport {
    FrameReport {
        kind: FrameKind::Python,
        function: Some(function.into()),
        file: Some(file.into()),
        line: Some(line),
        entry: Some(false),
        address: Some(0x1000 + line as u64),
        detail: None,
    }
}

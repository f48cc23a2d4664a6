//! The report model's text rendering (the model itself is [`crate::model`]), shared by every
//! frontend; the grouping of many reports and their merged call trees.

pub mod bytes_text;
pub mod gather;
pub mod group;
pub mod group_text;
pub mod heap_diff;
pub mod heap_text;
pub mod held_by;
pub mod members;
pub mod merge;
pub mod names;
pub mod straggler;
pub mod task_text;
mod task_tree;
pub mod tasks;
#[cfg(test)]
pub(crate) mod test_support;
pub mod text;
pub mod text_out;
pub mod tree;
pub mod verdict_text;
pub mod views;
mod wait_text;

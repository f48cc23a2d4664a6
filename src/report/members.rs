//! What a grouping's members are (threads, asyncio tasks, greenlets), and a greenlet member's
//! wait as groups and trees show it ([`super::group`], [`super::tree`]).

use serde::{Deserialize, Serialize};

use crate::model::{Direction, WaitKind, Waiting, WaitsOn};

/// What the members of a grouping are: how its groups and tree name them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Members {
    /// Threads: a group's and a tree leaf's `threads`.
    #[default]
    Threads,
    /// asyncio tasks (`--async`): a group's `threads` (with `task`), a tree leaf's `tasks`.
    Tasks,
    /// Suspended greenlets (`--greenlets`): a group's and a tree leaf's `greenlets`.
    Greenlets,
}

/// A greenlet's wait as a group member shows it: its kind and, for a socket, what the report
/// has of it (docs/report.md, `greenlets[].waiting`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberWait {
    pub kind: WaitKind,
    #[serde(rename = "type", default)]
    pub type_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fd: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<Direction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<String>,
}

impl MemberWait {
    /// A wait of kind `kind`, nothing more known of it.
    pub fn of(kind: WaitKind) -> Self {
        MemberWait {
            kind,
            type_name: None,
            fd: None,
            direction: None,
            local: None,
            peer: None,
        }
    }
}

impl From<&Waiting> for MemberWait {
    fn from(w: &Waiting) -> Self {
        let mut m = MemberWait::of(w.kind);
        m.type_name = w.type_name.clone();
        match &w.on {
            Some(WaitsOn::Socket {
                fd,
                direction,
                local,
                peer,
                ..
            }) => {
                m.fd = *fd;
                m.direction = *direction;
                m.local = local.clone();
                m.peer = peer.clone();
            }
            Some(WaitsOn::Fd { fd, direction, .. }) => {
                m.fd = *fd;
                m.direction = *direction;
            }
            _ => {}
        }
        m
    }
}

//! The object graph the census walks, kept for `heap.retainers`: a node for every object the
//! walk reaches (node 0 stands for the roots), an edge for every referent it reads, and each
//! object's size, type and length beside it.
//!
//! The nodes double as the walk's visited set: an object gets its node the first time it is
//! reached, and only then is it visited. Ids are `u32` (a census is capped far below 4
//! billion objects by the stop's object budget); edges past [`MAX_EDGES`] are not kept, and
//! the graph then says it is cut.

use crate::memory::addr_map::AddrMap;

/// The roots' node.
pub const ROOT: u32 = 0;
/// Edges kept: 16 GiB of targets would be past any core this reads.
const MAX_EDGES: usize = 1 << 31;
/// `Node::len` of an object with no length.
const NO_LEN: u32 = u32::MAX;

/// One object the walk reached.
#[derive(Clone, Copy, Debug, Default)]
pub struct Node {
    pub addr: u64,
    /// Its type; 0 when it could not be read (it has no size then).
    pub tp: u64,
    /// `sys.getsizeof`'s bytes.
    pub bytes: u64,
    len: u32,
    /// Its referents: `edges[first..first + count]`.
    first: u32,
    count: u32,
}

impl Node {
    /// The object's length (`len(o)`), for the kinds that have one.
    pub fn object_len(&self) -> Option<u64> {
        (self.len != NO_LEN).then_some(u64::from(self.len))
    }
}

#[derive(Debug)]
pub struct Graph {
    ids: AddrMap<u32>,
    pub nodes: Vec<Node>,
    edges: Vec<u32>,
    /// Some edges were not kept: retained sizes and paths would be wrong.
    pub cut: bool,
}

impl Default for Graph {
    fn default() -> Self {
        Graph {
            ids: AddrMap::default(),
            nodes: vec![Node::default()],
            edges: Vec::new(),
            cut: false,
        }
    }
}

impl Graph {
    /// `obj`'s node, and whether it is new (the walk has not reached it before).
    pub fn reach(&mut self, obj: u64) -> (u32, bool) {
        if let Some(&id) = self.ids.get(&obj) {
            return (id, false);
        }
        let id = self.nodes.len() as u32;
        self.ids.insert(obj, id);
        self.nodes.push(Node {
            addr: obj,
            len: NO_LEN,
            ..Node::default()
        });
        (id, true)
    }

    /// The node of `obj`, if the walk reached it.
    pub fn id(&self, obj: u64) -> Option<u32> {
        self.ids.get(&obj).copied()
    }

    /// What a visit of `id` found: its type, size and length.
    pub fn sized(&mut self, id: u32, tp: u64, bytes: u64, len: Option<u64>) {
        if let Some(n) = self.nodes.get_mut(id as usize) {
            n.tp = tp;
            n.bytes = bytes;
            n.len = len.map_or(NO_LEN, |l| l.min(u64::from(NO_LEN - 1)) as u32);
        }
    }

    /// `from`'s referents, in the order read; set once per node.
    pub fn link(&mut self, from: u32, to: impl IntoIterator<Item = u32>) {
        let first = self.edges.len();
        for t in to {
            if self.edges.len() >= MAX_EDGES {
                self.cut = true;
                break;
            }
            self.edges.push(t);
        }
        if let Some(n) = self.nodes.get_mut(from as usize) {
            n.first = first as u32;
            n.count = (self.edges.len() - first) as u32;
        }
    }

    /// The referents of `id`.
    pub fn out(&self, id: u32) -> &[u32] {
        self.nodes.get(id as usize).map_or(&[], |n| {
            let first = n.first as usize;
            self.edges
                .get(first..first + n.count as usize)
                .unwrap_or(&[])
        })
    }

    /// Edges kept.
    pub fn edge_count(&self) -> usize {
        self.edges.len()
    }
}

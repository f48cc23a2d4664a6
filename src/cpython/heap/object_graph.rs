//! The object graph a finished walk hands over: every object it reached, the referents it
//! read, and the type records that say what each object is. What the graph keeps alive and the
//! paths to it are the heap layer's (`crate::heap::retainers`); naming one hop of a path reads
//! the target's containers, so it is here (`steps`).

use super::graph::{Graph, Node, ROOT};
use super::roots::Roots;
use super::types::{Kind, TypeRec};
use crate::memory::addr_map::AddrMap;

/// A walk's graph with its type records, complete: no object it reached was left unvisited
/// and no edge was dropped.
#[derive(Debug)]
pub struct ObjectGraph {
    pub(super) graph: Graph,
    pub(super) types: AddrMap<Option<TypeRec>>,
}

impl ObjectGraph {
    /// The nodes by id; node [`ROOT`] stands for the roots.
    pub fn nodes(&self) -> &[Node] {
        &self.graph.nodes
    }

    /// The graph alone (its nodes and edges).
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// The root's referents: modules first (so that where two shortest paths tie a module's
    /// wins), then locals; objects the walk did not reach are left out.
    pub fn link_roots(&mut self, roots: &Roots) {
        let objs = roots.modules.iter().map(|m| m.0);
        let out: Vec<u32> = objs
            .chain(roots.locals.iter().map(|l| l.obj))
            .filter_map(|obj| self.graph.id(obj))
            .collect();
        self.graph.link(ROOT, out);
    }

    /// Modules, classes, functions, code and cells hold everything, and an object whose type
    /// could not be read is no container to name: the containers they hold are listed instead.
    pub fn may_list(&self, v: u32) -> bool {
        let tp = self.graph.nodes[v as usize].tp;
        !matches!(
            self.kind(tp),
            None | Some(Kind::Module | Kind::Type | Kind::Function | Kind::Code | Kind::Cell)
        )
    }

    pub(super) fn kind(&self, tp: u64) -> Option<Kind> {
        self.types.get(&tp).and_then(|t| t.as_ref()).map(|t| t.kind)
    }

    /// The name of type `tp` as the census gives it, `<type 0x…>` where it could not be read.
    pub fn type_name(&self, tp: u64) -> String {
        self.types
            .get(&tp)
            .and_then(|t| t.as_ref())
            .map_or_else(|| format!("<type {tp:#x}>"), |t| t.name.clone())
    }
}

//! One hop of a path from a root (`held_by`, put together by `crate::heap::retainers`): from an
//! object to one of its referents, named by where the referent sits in it, which takes reading
//! the object again (its dict's keys, its list's items, a function's closure).

use super::object_graph::ObjectGraph;
use super::types::Kind;
use crate::cpython::layout::localkind;
use crate::cpython::snapshot::Snapshot;
use crate::cpython::values::field;

/// Items of a container searched for the referent (a path's containers are read again).
const MAX_SEARCH: u64 = 1 << 22;
/// Characters of a dict key's repr kept.
const MAX_KEY_CHARS: usize = 80;

/// One step of `held_by`: the report's own (docs/report.md, "Who holds the memory").
pub use crate::model::HeldStep as Step;

/// One hop in words.
pub enum Hop {
    Step(Step),
    /// A function's closure down to the cell's content: the step, and the hops it covers
    /// after this one.
    Closure(Step, usize),
    /// Into its owner's namespace (a module's, a class's, an instance's `__dict__`): the next
    /// hop is an attribute.
    Namespace,
    /// Into something its owner keeps as part of itself (a closure or defaults tuple).
    Owned,
    /// No step of its own (a cell's content).
    Silent,
}

impl ObjectGraph {
    /// The hop from node `from` (not the root) to node `to`; `namespace`: `from` is a
    /// namespace dict. `rest`: the path's nodes after `to`.
    pub fn hop(
        &self,
        snap: &Snapshot,
        from: u32,
        to: u32,
        namespace: bool,
        rest: Option<&[u32]>,
    ) -> Hop {
        let g = &self.graph;
        let obj = g.nodes[to as usize].addr;
        let parent = g.nodes[from as usize];
        let lay = &snap.layout;
        let via = || Hop::Step(Step::Via(self.type_name(parent.tp)));
        let p = parent.addr;
        match self.kind(parent.tp) {
            Some(Kind::Module) => Hop::Namespace,
            Some(Kind::Cell) => Hop::Silent,
            // Its constants, names and line table are the code's own.
            Some(Kind::Code) => Hop::Owned,
            Some(Kind::Type) => {
                let to = &lay.type_object;
                let word = |off| field(p, off).and_then(|a| snap.mem.read_ptr(a)).ok();
                if word(to.tp_dict()) == Some(obj) {
                    Hop::Namespace
                } else if word(to.tp_mro()) == Some(obj) {
                    Hop::Step(Step::Attr("__mro__".into()))
                } else if word(to.tp_bases()) == Some(obj) {
                    Hop::Step(Step::Attr("__bases__".into()))
                } else {
                    via()
                }
            }
            Some(Kind::Dict) => match snap.dict_items(p, MAX_SEARCH) {
                Ok(items) => match items.iter().find(|kv| kv.1 == obj) {
                    Some(&(k, _)) if namespace => match snap.read_name(k) {
                        Ok(name) => Hop::Step(Step::Attr(name)),
                        Err(_) => Hop::Step(Step::Key(key_repr(snap, k))),
                    },
                    Some(&(k, _)) => Hop::Step(Step::Key(key_repr(snap, k))),
                    None => via(),
                },
                Err(_) => via(),
            },
            Some(k @ (Kind::List | Kind::Tuple)) => {
                match snap.read_seq(p, k == Kind::List, MAX_SEARCH) {
                    Ok((items, _)) => items
                        .iter()
                        .position(|&i| i == obj)
                        .map_or_else(via, |i| Hop::Step(Step::Index(i as u64))),
                    Err(_) => via(),
                }
            }
            Some(Kind::Function) => self.function_hop(snap, p, obj, rest),
            _ if self.is_instance(parent.tp) => match snap.instance_items(p) {
                Ok(items) => match items.iter().find(|kv| kv.1 == obj) {
                    Some(&(k, _)) => match snap.read_name(k) {
                        Ok(name) => Hop::Step(Step::Attr(name)),
                        Err(_) => via(),
                    },
                    None if self.kind(g.nodes[to as usize].tp) == Some(Kind::Dict) => {
                        Hop::Namespace
                    }
                    None => via(),
                },
                Err(_) => via(),
            },
            _ => via(),
        }
    }

    /// From function `f` to `obj`: its closure (down to the cell's content, named by the
    /// free variable), defaults, code or `__dict__`.
    fn function_hop(&self, snap: &Snapshot, f: u64, obj: u64, rest: Option<&[u32]>) -> Hop {
        let lay = &snap.layout;
        let word = |off: u64| field(f, off).and_then(|a| snap.mem.read_ptr(a)).ok();
        if word(lay.function_closure()) == Some(obj) {
            // function -> closure tuple -> cell -> content.
            let Some(&[cell, _content, ..]) = rest else {
                return Hop::Owned;
            };
            let cell = self.graph.nodes[cell as usize].addr;
            let name = (|| {
                let (cells, _) = snap.read_seq(obj, false, MAX_SEARCH).ok()?;
                let i = cells.iter().position(|&c| c == cell)?;
                let code = snap.code(word(lay.function_code)?).ok()?;
                let free: Vec<&str> = code
                    .locals
                    .iter()
                    .filter(|l| l.1 & localkind::FREE != 0)
                    .map(|l| l.0.as_str())
                    .collect();
                free.get(i).map(|s| s.to_string())
            })();
            return Hop::Closure(Step::Closure(name.unwrap_or_else(|| "?".into())), 2);
        }
        if [lay.function_defaults(), lay.function_kwdefaults()]
            .iter()
            .any(|&o| word(o) == Some(obj))
        {
            return Hop::Owned;
        }
        if word(lay.function_code) == Some(obj) {
            return Hop::Step(Step::Attr("__code__".into()));
        }
        if self.kind(
            self.graph
                .id(obj)
                .map_or(0, |i| self.graph.nodes[i as usize].tp),
        ) == Some(Kind::Dict)
        {
            // Its __globals__ (a module's namespace, reached from the module first) or its
            // __dict__.
            return Hop::Owned;
        }
        Hop::Step(Step::Via("function".into()))
    }

    /// An instance of a class defined in Python (its attributes are in a `__dict__` or
    /// values).
    fn is_instance(&self, tp: u64) -> bool {
        self.types
            .get(&tp)
            .and_then(|t| t.as_ref())
            .is_some_and(|t| t.heap && t.kind == Kind::Plain)
    }
}

/// A dict key as `held_by` shows it: the repr of a str, int, bytes or tuple key, at most
/// [`MAX_KEY_CHARS`] characters; another key's type.
fn key_repr(snap: &Snapshot, k: u64) -> String {
    let name = snap.type_of(k).map(|t| t.name.clone()).unwrap_or_default();
    if !matches!(name.as_str(), "str" | "int" | "bytes" | "tuple") {
        return format!("<{name}>");
    }
    let r = snap.repr(k);
    if r.chars().count() > MAX_KEY_CHARS {
        r.chars().take(MAX_KEY_CHARS).collect::<String>() + "..."
    } else {
        r
    }
}

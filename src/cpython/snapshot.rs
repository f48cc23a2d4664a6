//! One stop of the target: memory, layout and the caches that die with the stop.

use std::sync::{Arc, Mutex, OnceLock};

use super::budget::{Budget, Budgeted};
use super::discovery::Found;
use super::layout::Layout;
use super::values::{Code, TypeInfo};
use crate::memory::addr_map::{AddrMap, OnceTable};
use crate::memory::Memory;

/// Types kept where threads read them without a lock ([`Snapshot::type_at`]).
const TYPE_SLOTS: usize = 256;
/// Code objects kept so ([`Snapshot::code`]).
const CODE_SLOTS: usize = 256;

pub struct Snapshot {
    pub mem: Arc<dyn Memory>,
    pub layout: Layout,
    pub arch: crate::arch::Arch,
    /// Address of `_PyRuntime`.
    pub runtime: u64,
    pub found_by: String,
    /// Code objects by address: the first [`CODE_SLOTS`] decoded where threads look them up
    /// without a lock, the rest under one.
    pub(crate) code_table: OnceTable<Arc<Code>>,
    pub(crate) codes: Mutex<AddrMap<Arc<Code>>>,
    /// Types by address: the first [`TYPE_SLOTS`] read where threads look them up without a
    /// lock, the rest under one.
    pub(crate) type_table: OnceTable<Arc<TypeInfo>>,
    pub(crate) types: Mutex<AddrMap<Arc<TypeInfo>>>,
    /// What this stop has spent (its reads through `mem` are charged to it).
    pub budget: Arc<Budget>,
    /// numpy's (major, minor) version, read once from `numpy.__version__`
    /// (`Snapshot::numpy_version`).
    pub(crate) numpy: OnceLock<Result<Option<(u8, u16)>, crate::error::ReadError>>,
    /// `torch.__version__`, read once (`Snapshot::torch_version`); None without torch.
    pub(crate) torch: OnceLock<Result<Option<String>, crate::error::ReadError>>,
    /// Where dict keys were found, at this stop and those before it ([`super::KeyHints`]).
    pub(crate) keys: super::KeyHints,
    /// Code objects decoded at this stop and those before it ([`super::KnownCodes`]).
    pub(crate) known_codes: super::KnownCodes,
}

impl Snapshot {
    pub fn new(mem: Arc<dyn Memory>, found: &Found) -> Snapshot {
        let budget = Arc::new(Budget::default());
        Snapshot {
            mem: Arc::new(Budgeted {
                inner: mem,
                budget: budget.clone(),
            }),
            layout: found.layout.clone(),
            arch: found.arch,
            runtime: found.runtime,
            found_by: found.found_by.clone(),
            code_table: OnceTable::new(CODE_SLOTS),
            codes: Mutex::new(AddrMap::default()),
            type_table: OnceTable::new(TYPE_SLOTS),
            types: Mutex::new(AddrMap::default()),
            budget,
            numpy: OnceLock::new(),
            torch: OnceLock::new(),
            keys: found.keys.clone(),
            known_codes: found.codes.clone(),
        }
    }
}

#[cfg(test)]
impl Snapshot {
    /// A snapshot of fake memory with `layout`, for decoder tests.
    pub fn for_test(mem: crate::memory::FakeMemory, layout: Layout) -> Snapshot {
        let found = Found {
            module: crate::binary::Module {
                path: String::new(),
                start: 0,
                end: 0,
                base: 0,
            },
            runtime: 0,
            arch: Default::default(),
            layout,
            found_by: "test".into(),
            jit_entry: None,
            keys: Default::default(),
            codes: Default::default(),
        };
        Snapshot::new(Arc::new(mem), &found)
    }
}

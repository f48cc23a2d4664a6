//! The storage behind a torch tensor: its bytes, where they are (CPU, CUDA) and which storage
//! it is (views share one), read through the C++ objects a tensor's Python object points to:
//! `THPVariable` → `at::Tensor` (an `intrusive_ptr<TensorImpl>`) → `TensorImpl::storage_` →
//! `StorageImpl` (`data_ptr_`, `size_bytes_`).
//!
//! C++ layouts are not a public interface and change between releases, so they are read only
//! for the torch version they were checked against exactly: torch 2.15.0 from PyPI (the
//! `+cu132` build `tools/torch.sh` installs on pyenv 3.12.1), the offsets measured in that
//! build and compared with `untyped_storage().nbytes()` and `data_ptr()` by
//! tests/integration/test_heap_torch.py. The version is the target's own `torch.__version__`;
//! any other version gives no storage and one error.

use super::snapshot::Snapshot;
use super::values::field;
use crate::error::ReadError;

/// The torch version whose layout is below (`torch.__version__` without its local part).
pub const CHECKED_VERSION: &str = "2.15.0";

// torch/csrc/autograd/python_variable.h (2.15.0): `struct THPVariable { PyObject_HEAD;
// at::Tensor cdata; ... }`; an `at::Tensor` is one `TensorImpl*`.
const THPVARIABLE_CDATA: u64 = 0;
// c10/core/TensorImpl.h (2.15.0): the vtable, `intrusive_ptr_target`'s one refcount word, then
// `Storage storage_` (one `StorageImpl*`).
const TENSORIMPL_STORAGE: u64 = 16;
// c10/core/StorageImpl.h (2.15.0): the vtable, the refcount word, `DataPtr data_ptr_` (the data
// pointer at 16, its context's deleter at 24 and context at 32, `Device` at 40: a `DeviceType`
// byte and a `DeviceIndex` byte), `SymInt size_bytes_` at 48.
const STORAGE_DATA: u64 = 16;
const STORAGE_DEVICE: u64 = 40;
const STORAGE_NBYTES: u64 = 48;
/// c10/core/DeviceType.h: `DeviceType::CPU`, `DeviceType::CUDA`.
pub const DEVICE_CPU: i8 = 0;
pub const DEVICE_CUDA: i8 = 1;
// c10/core/TensorImpl.h (2.15.0), after `storage_`: `autograd_meta_`, `extra_meta_`,
// `version_counter_`, `pyobj_slot_`, then `SizesAndStrides sizes_and_strides_` at 56 (its
// `size_`, then 10 inline words: 5 sizes and 5 strides, or a pointer to `size_` sizes and
// `size_` strides beyond 5 dimensions), `storage_offset_`, `numel_`, `TypeMeta data_type_` at
// 160 (a u16: the `ScalarType` for the standard types) and `optional<Device> device_opt_` at
// 162 (type, index, has_value).
const TENSORIMPL_NDIM: u64 = 56;
const TENSORIMPL_SIZES: u64 = 64;
const TENSORIMPL_DTYPE: u64 = 160;
const TENSORIMPL_DEVICE: u64 = 162;
/// `SizesAndStrides`'s `C10_SIZES_AND_STRIDES_MAX_INLINE_SIZE`.
const MAX_INLINE_DIMS: u64 = 5;
/// Dimensions of a tensor believed.
pub const MAX_DIMS: u64 = 64;
/// c10/core/ScalarType.h's `ScalarType`s in order, as `torch.dtype` prints them.
const DTYPES: [&str; 16] = [
    "uint8",
    "int8",
    "int16",
    "int32",
    "int64",
    "float16",
    "float32",
    "float64",
    "complex32",
    "complex64",
    "complex128",
    "bool",
    "qint8",
    "quint8",
    "qint32",
    "bfloat16",
];
/// Bytes of one storage believed (a `SymInt` that is symbolic, or a corrupt size, is more).
const MAX_STORAGE_BYTES: u64 = 1 << 48;

/// One tensor's storage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Storage {
    /// The `StorageImpl`'s address: the same for every view of it.
    pub addr: u64,
    pub data: u64,
    /// `untyped_storage().nbytes()`.
    pub nbytes: u64,
    pub device_type: i8,
    pub device_index: i8,
}

/// What the target's torch is, for the storage reader.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TorchVersion {
    /// No interpreter imported torch.
    Absent,
    /// [`CHECKED_VERSION`].
    Checked,
    /// Another version: its layout is not read.
    Other(String),
}

impl Snapshot {
    /// `torch.__version__` of the first interpreter that imported torch, read once a stop.
    pub fn torch_version(&self) -> Result<TorchVersion, ReadError> {
        let v = self.torch.get_or_init(|| {
            for interp in self.interpreters()? {
                let Some(modules) = self.sys_modules(interp)? else {
                    continue;
                };
                let Some(dict) = self.module_dict(modules, "torch")? else {
                    continue;
                };
                let Some(v) = self.dict_get(dict, "__version__")? else {
                    return Err(ReadError::corrupt(dict, "torch module without __version__"));
                };
                return Ok(Some(self.read_name(v)?));
            }
            Ok(None)
        });
        Ok(match v.as_ref().map_err(|e| *e)? {
            None => TorchVersion::Absent,
            Some(v) => version_of(v),
        })
    }

    /// The storage of the tensor at `obj` (laid out as [`CHECKED_VERSION`]'s); None for a
    /// tensor without one (undefined, or a storage-less kind).
    pub fn tensor_storage(&self, obj: u64) -> Result<Option<Storage>, ReadError> {
        let h = self.layout.pyobject.header_size();
        let imp = self
            .mem
            .read_ptr(field(obj, h.saturating_add(THPVARIABLE_CDATA))?)?;
        if imp == 0 {
            return Ok(None);
        }
        let st = self.mem.read_ptr(field(imp, TENSORIMPL_STORAGE)?)?;
        if st == 0 {
            return Ok(None);
        }
        let mut b = [0u8; (STORAGE_NBYTES + 8 - STORAGE_DATA) as usize];
        self.mem.read_into(field(st, STORAGE_DATA)?, &mut b)?;
        let word = |o: u64| {
            let o = (o - STORAGE_DATA) as usize;
            u64::from_le_bytes(b[o..o + 8].try_into().unwrap_or_default())
        };
        let nbytes = word(STORAGE_NBYTES);
        if nbytes > MAX_STORAGE_BYTES {
            return Err(ReadError::too_large(st, nbytes));
        }
        let dev = (STORAGE_DEVICE - STORAGE_DATA) as usize;
        Ok(Some(Storage {
            addr: st,
            data: word(STORAGE_DATA),
            nbytes,
            device_type: b[dev] as i8,
            device_index: b[dev + 1] as i8,
        }))
    }
}

impl Snapshot {
    /// `<torch.Tensor shape=[1000, 1000] dtype=torch.float32 device=cpu at 0x…>` for the
    /// tensor at `obj` (`type_name` as the summary names it); None where torch is not the
    /// checked version or the tensor cannot be read.
    pub fn tensor_summary(&self, obj: u64, type_name: &str) -> Option<String> {
        if self.torch_version().ok()? != TorchVersion::Checked {
            return None;
        }
        let h = self.layout.pyobject.header_size();
        let imp = self.mem.read_ptr(field(obj, h).ok()?).ok()?;
        let mut b = [0u8; (TENSORIMPL_DEVICE + 3) as usize];
        self.mem.read_into(imp, &mut b).ok()?;
        let word = |o: u64| {
            u64::from_le_bytes(b[o as usize..o as usize + 8].try_into().unwrap_or_default())
        };
        let ndim = word(TENSORIMPL_NDIM);
        if ndim > MAX_DIMS {
            return None;
        }
        let sizes: Vec<u64> = if ndim <= MAX_INLINE_DIMS {
            (0..ndim).map(|i| word(TENSORIMPL_SIZES + 8 * i)).collect()
        } else {
            let raw = self
                .mem
                .read_vec(word(TENSORIMPL_SIZES), ndim * 8, MAX_DIMS * 8)
                .ok()?;
            raw.chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()))
                .collect()
        };
        let shape: Vec<String> = sizes.iter().map(|d| (*d as i64).to_string()).collect();
        let at = TENSORIMPL_DTYPE as usize;
        let dtype = DTYPES
            .get(u16::from_le_bytes([b[at], b[at + 1]]) as usize)
            .map_or_else(|| "?".to_string(), |d| format!("torch.{d}"));
        let d = TENSORIMPL_DEVICE as usize;
        let device = match (b[d + 2] != 0, b[d] as i8, b[d + 1] as i8) {
            (false, ..) => "?".to_string(),
            (true, DEVICE_CPU, _) => "cpu".to_string(),
            (true, DEVICE_CUDA, i) if i >= 0 => format!("cuda:{i}"),
            (true, DEVICE_CUDA, _) => "cuda".to_string(),
            (true, t, _) => format!("<device type {t}>"),
        };
        Some(format!(
            "<{type_name} shape=[{}] dtype={dtype} device={device} at {obj:#x}>",
            shape.join(", ")
        ))
    }

    /// Whether type `tp` is a tensor type: `torch._C.TensorBase` or a subclass.
    pub fn is_tensor_type(&self, mut tp: u64) -> bool {
        for _ in 0..MAX_TYPE_DEPTH {
            let Ok(t) = self.type_at(tp) else {
                return false;
            };
            if t.name == "torch._C.TensorBase" {
                return true;
            }
            if t.base == 0 {
                return false;
            }
            tp = t.base;
        }
        false
    }
}

/// Base classes followed to find `torch._C.TensorBase`.
const MAX_TYPE_DEPTH: usize = 32;

fn version_of(v: &str) -> TorchVersion {
    if v.split('+').next() == Some(CHECKED_VERSION) {
        TorchVersion::Checked
    } else {
        TorchVersion::Other(v.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpython::layout::Layout;
    use crate::cpython::version::Version;
    use crate::memory::FakeMemory;

    const T: u64 = 0x1000;
    const IMPL: u64 = 0x2000;
    const ST: u64 = 0x3000;

    fn snap(build: impl FnOnce(&mut FakeMemory)) -> Snapshot {
        let l = Layout::builtin(Version::new(3, 12, 1)).unwrap();
        let mut m = FakeMemory::new();
        build(&mut m);
        Snapshot::for_test(m, l)
    }

    #[test]
    fn a_storage_read_as_2_15_lays_it_out() {
        let s = snap(|m| {
            m.put(T, &[0u8; 64]).put_u64(T + 16, IMPL);
            m.put(IMPL, &[0u8; 64]).put_u64(IMPL + 16, ST);
            m.put(ST, &[0u8; 64]).put_u64(ST + 16, 0x7f00_0000);
            m.put(ST + 40, &[1, 0]).put_u64(ST + 48, 4_000_000);
        });
        assert_eq!(
            s.tensor_storage(T).unwrap(),
            Some(Storage {
                addr: ST,
                data: 0x7f00_0000,
                nbytes: 4_000_000,
                device_type: DEVICE_CUDA,
                device_index: 0
            })
        );
    }

    #[test]
    fn wild_and_cyclic_pointers_are_errors_or_nothing() {
        // A tensor whose impl pointer is wild, one whose storage points back at the impl (a
        // cycle is one step: nothing is followed past the storage), one with no impl.
        let s = snap(|m| {
            m.put(T, &[0u8; 64]).put_u64(T + 16, 0xdead_0000);
        });
        assert!(s.tensor_storage(T).is_err());
        let s = snap(|m| {
            m.put(T, &[0u8; 64]).put_u64(T + 16, IMPL);
            m.put(IMPL, &[0u8; 64]).put_u64(IMPL + 16, IMPL);
            m.put_u64(IMPL + 48, u64::MAX);
        });
        assert!(s.tensor_storage(T).is_err(), "a size over the cap");
        let s = snap(|m| {
            m.put(T, &[0u8; 64]);
        });
        assert_eq!(s.tensor_storage(T).unwrap(), None);
        assert!(s.tensor_storage(u64::MAX - 4).is_err());
    }

    #[test]
    fn a_summary_reads_shape_dtype_and_device() {
        let s = snap(|m| {
            m.put(T, &[0u8; 64]).put_u64(T + 16, IMPL);
            m.put(IMPL, &[0u8; 256]).put_u64(IMPL + 56, 2);
            m.put_u64(IMPL + 64, 1000).put_u64(IMPL + 72, 1000);
            m.put(IMPL + 160, &[6, 0, 0, 0xff, 1]);
        });
        let _ = s.torch.set(Ok(Some(CHECKED_VERSION.into())));
        assert_eq!(
            s.tensor_summary(T, "torch.Tensor").unwrap(),
            "<torch.Tensor shape=[1000, 1000] dtype=torch.float32 device=cpu at 0x1000>"
        );
        // A lying ndim: no summary; out of line sizes through a wild pointer: none either.
        let s = snap(|m| {
            m.put(T, &[0u8; 64]).put_u64(T + 16, IMPL);
            m.put(IMPL, &[0u8; 256]).put_u64(IMPL + 56, 1 << 40);
        });
        let _ = s.torch.set(Ok(Some(CHECKED_VERSION.into())));
        assert_eq!(s.tensor_summary(T, "torch.Tensor"), None);
        let s = snap(|m| {
            m.put(T, &[0u8; 64]).put_u64(T + 16, IMPL);
            m.put(IMPL, &[0u8; 256])
                .put_u64(IMPL + 56, 6)
                .put_u64(IMPL + 64, 0xbad0);
        });
        let _ = s.torch.set(Ok(Some(CHECKED_VERSION.into())));
        assert_eq!(s.tensor_summary(T, "torch.Tensor"), None);
    }

    #[test]
    fn only_the_checked_version_is_read() {
        assert_eq!(version_of("2.15.0+cu132"), TorchVersion::Checked);
        assert_eq!(version_of("2.15.0"), TorchVersion::Checked);
        assert_eq!(
            version_of("2.14.1+cpu"),
            TorchVersion::Other("2.14.1+cpu".into())
        );
    }
}

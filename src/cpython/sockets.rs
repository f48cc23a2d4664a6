//! `_socket.socket` objects (`socket.socket` is a Python subclass of it) as memory shows them:
//! their file descriptor, the socket a wrapper keeps (gevent's cooperative socket keeps the
//! real one in its `_sock` slot), and a call of one of their methods on a frame's value stack.
//!
//! `PySocketSockObject` (Modules/socketmodule.h, unchanged from 3.10 to 3.15):
//!
//! ```c
//! typedef struct {
//!     PyObject_HEAD
//!     SOCKET_T sock_fd;           /* int on POSIX; -1 once closed */
//!     int sock_family;            /* AF_INET, AF_UNIX, ... */
//!     int sock_type;
//!     int sock_proto;
//!     ...
//! } PySocketSockObject;
//! ```
//!
//! `PyObject_HEAD` is 16 bytes, 32 on a free-threaded build: the fields start right after
//! `ob_type` (`Layout::pyobject`).
//!
//! A slot (`__slots__`) of a Python class is a `PyMemberDef` of its type's `tp_members`
//! (a heap type keeps the array after its `PyHeapTypeObject`), `{name, type, offset, flags,
//! doc}` (Include/descrobject.h, 3.12+; structmember.h before: the same layout), `type`
//! `T_OBJECT_EX` (16) for a slot. `tp_members` is two pointers before `tp_base` in
//! `PyTypeObject` (`tp_methods, tp_members, tp_getset, tp_base`, Include/cpython/object.h,
//! 3.10 to 3.15).

use super::values::{field, is_cfunction_type};
use super::Snapshot;
use crate::error::ReadError;
use crate::model::Direction;

/// The C type of every socket object.
pub const SOCKET_TYPE: &str = "_socket.socket";
/// Most bases (`tp_base`) followed up from a type.
const MAX_BASES: usize = 32;
/// Most `PyMemberDef` entries read of one type.
const MAX_MEMBERS: usize = 64;
/// `sizeof(PyMemberDef)` and its fields.
const MEMBER_DEF_SIZE: u64 = 40;
const MEMBER_DEF_TYPE: u64 = 8;
const MEMBER_DEF_OFFSET: u64 = 16;
/// `T_OBJECT_EX` / `Py_T_OBJECT_EX`: a slot.
const T_OBJECT_EX: i32 = 16;
/// Longest member name compared.
const MAX_MEMBER_NAME: usize = 64;
/// `tp_members` lies this far before `tp_base`.
const TP_MEMBERS_BEFORE_BASE: u64 = 16;
/// Past this an `AF_*` is no address family (Linux's AF_MAX is 46).
const MAX_FAMILY: i32 = 64;

/// The methods of `_socket.socket` that wait, and the direction of each (`recv`, `send`,
/// `connect`, `accept`): what a thread (or a gevent greenlet, by its cooperative socket's
/// method of the same name) waits to do. `_accept` is what `socket.socket.accept()` (Lib/
/// socket.py) calls.
pub const SOCKET_METHODS: &[(&str, Direction)] = &[
    ("recv", Direction::Recv),
    ("recv_into", Direction::Recv),
    ("recvfrom", Direction::Recv),
    ("recvfrom_into", Direction::Recv),
    ("recvmsg", Direction::Recv),
    ("recvmsg_into", Direction::Recv),
    ("send", Direction::Send),
    ("sendall", Direction::Send),
    ("sendto", Direction::Send),
    ("sendmsg", Direction::Send),
    ("sendfile", Direction::Send),
    ("connect", Direction::Connect),
    ("connect_ex", Direction::Connect),
    ("_accept", Direction::Accept),
    ("accept", Direction::Accept),
];

/// The direction a socket method named `method` waits in ([`SOCKET_METHODS`]).
pub fn method_direction(method: &str) -> Option<Direction> {
    SOCKET_METHODS
        .iter()
        .find(|(m, _)| *m == method)
        .map(|(_, d)| *d)
}

/// What a socket object says of itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SocketObject {
    /// `sock_fd`; None once closed (-1).
    pub fd: Option<i64>,
    /// `sock_family`: `AF_UNIX` 1, `AF_INET` 2, `AF_INET6` 10, ...
    pub family: i32,
}

/// A call of a socket's method found on a value stack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SocketCall {
    /// The slot of the callable.
    pub slot: usize,
    /// The method's name (`recv`, `sendall`, `_accept`, ...).
    pub method: String,
    /// The socket (`self`).
    pub sock: u64,
}

impl Snapshot {
    /// Whether the type at `tp`, or one of its bases, is `_socket.socket`.
    pub fn is_socket_type(&self, tp: u64) -> bool {
        let mut tp = tp;
        for _ in 0..MAX_BASES {
            let Ok(t) = self.type_at(tp) else {
                return false;
            };
            if t.name == SOCKET_TYPE {
                return true;
            }
            if t.base == 0 || t.base == tp {
                return false;
            }
            tp = t.base;
        }
        false
    }

    /// Whether `obj` is a socket object (`_socket.socket` or a subclass).
    pub fn is_socket(&self, obj: u64) -> bool {
        self.type_of(obj).is_ok_and(|t| self.is_socket_type(t.addr))
    }

    /// The fd and family of the socket object `obj`; an error when it is no socket or its
    /// fields make no sense.
    pub fn socket_object(&self, obj: u64) -> Result<SocketObject, ReadError> {
        if !self.is_socket(obj) {
            return Err(ReadError::corrupt(obj, "socket: not a _socket.socket"));
        }
        let fields = self.object_fields(obj)?;
        let fd = self.mem.read_i32(fields)?;
        let family = self.mem.read_i32(field(fields, 4)?)?;
        if !(0..=MAX_FAMILY).contains(&family) {
            return Err(ReadError::corrupt(fields, "socket: sock_family"));
        }
        let fd = match fd {
            -1 => None,
            fd if fd >= 0 => Some(i64::from(fd)),
            _ => return Err(ReadError::corrupt(fields, "socket: sock_fd")),
        };
        Ok(SocketObject { fd, family })
    }

    /// The socket object `obj` is or wraps: itself when it is one, else its `_sock` (a slot,
    /// as gevent's `SocketMixin` has it, or an instance attribute) when that is one.
    pub fn real_socket(&self, obj: u64) -> Option<u64> {
        if self.is_socket(obj) {
            return Some(obj);
        }
        let inner = match self.slot_attr(obj, "_sock") {
            Ok(Some(s)) => Some(s),
            _ => self.instance_attr(obj, "_sock").ok().flatten(),
        }?;
        self.is_socket(inner).then_some(inner)
    }

    /// The value of the `__slots__` member `name` of `obj` (its type's or a base's), None
    /// when no type of its has that slot or the slot is empty.
    pub fn slot_attr(&self, obj: u64, name: &str) -> Result<Option<u64>, ReadError> {
        let t = self.type_of(obj)?;
        let mut tp = t.addr;
        let members_at = self
            .layout
            .type_object
            .tp_base
            .checked_sub(TP_MEMBERS_BEFORE_BASE)
            .ok_or_else(|| ReadError::corrupt(tp, "type: tp_members"))?;
        for _ in 0..MAX_BASES {
            let t = self.type_at(tp)?;
            let members = self.mem.read_ptr(field(tp, members_at)?)?;
            if members != 0 {
                if let Some(offset) = self.member_offset(members, name)? {
                    if offset < self.layout.pyobject.header_size()
                        || offset % 8 != 0
                        || offset.checked_add(8).is_none_or(|end| end > t.basicsize)
                    {
                        return Err(ReadError::corrupt(members, "type: member offset"));
                    }
                    let v = self.mem.read_ptr(field(obj, offset)?)?;
                    return Ok((v != 0).then_some(v));
                }
            }
            if t.base == 0 || t.base == tp {
                break;
            }
            tp = t.base;
        }
        Ok(None)
    }

    /// The offset of the `T_OBJECT_EX` member `name` in the `PyMemberDef` array at `members`.
    fn member_offset(&self, members: u64, name: &str) -> Result<Option<u64>, ReadError> {
        for i in 0..MAX_MEMBERS as u64 {
            let def = field(members, i * MEMBER_DEF_SIZE)?;
            let name_ptr = self.mem.read_ptr(def)?;
            if name_ptr == 0 {
                return Ok(None);
            }
            let kind = self.mem.read_i32(field(def, MEMBER_DEF_TYPE)?)?;
            if kind != T_OBJECT_EX {
                continue;
            }
            if self.mem.read_cstr(name_ptr, MAX_MEMBER_NAME)? == name.as_bytes() {
                let offset = self.mem.read_i64(field(def, MEMBER_DEF_OFFSET)?)?;
                return u64::try_from(offset)
                    .map(Some)
                    .map_err(|_| ReadError::corrupt(def, "type: member offset"));
            }
        }
        Ok(None)
    }

    /// The calls of a socket's methods named one of `methods` on a value stack (`slots`, from
    /// [`Snapshot::value_stack_slots`]), bottom first: a `method_descriptor` of
    /// `_socket.socket` right below a socket (`sock.recv(n)` pushes the method, then `self`),
    /// or a builtin method bound to a socket. The lowest one is the live call: slots above the
    /// live top may be stale.
    pub fn socket_calls(&self, slots: &[Option<u64>], methods: &[&str]) -> Vec<SocketCall> {
        let mut out = Vec::new();
        for (i, v) in slots.iter().enumerate() {
            let Some(v) = *v else { continue };
            let Ok(t) = self.type_of(v) else { continue };
            let found = if is_cfunction_type(&t.name) {
                self.cfunction_name_and_self(v).ok()
            } else if t.name == "method_descriptor" {
                let Some(Some(this)) = slots.get(i + 1).copied() else {
                    continue;
                };
                self.method_descriptor_name_and_type(v)
                    .ok()
                    .filter(|(_, d_type)| {
                        self.type_at(*d_type).is_ok_and(|d| d.name == SOCKET_TYPE)
                    })
                    .map(|(name, _)| (name, this))
            } else {
                None
            };
            let Some((name, this)) = found else { continue };
            if this != 0 && methods.contains(&name.as_str()) && self.is_socket(this) {
                out.push(SocketCall {
                    slot: i,
                    method: name,
                    sock: this,
                });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpython::{Layout, Version};
    use crate::memory::FakeMemory;

    // Type objects: ob_type at +8, tp_name at +24, tp_basicsize at +32, tp_flags, tp_members
    // at +240, tp_base at +256 (3.12's layout).
    const META: u64 = 0x1000;
    const SOCK_T: u64 = 0x2000;
    const SUB_T: u64 = 0x3000;
    const MIXIN_T: u64 = 0x4000;
    const WRAP_T: u64 = 0x5000;
    const DESCR_T: u64 = 0x6000;
    const STR_T: u64 = 0x7000;
    const NAMES: u64 = 0x8000;

    fn put_type(m: &mut FakeMemory, at: u64, name: u64, basicsize: u64, base: u64, members: u64) {
        m.put(at, &[0u8; 0x1a0]);
        m.put_u64(at + 8, META);
        m.put_u64(at + 24, name);
        m.put_u64(at + 32, basicsize);
        m.put_u64(at + 240, members);
        m.put_u64(at + 256, base);
    }

    fn memory() -> FakeMemory {
        let mut m = FakeMemory::new();
        let strings: &[&[u8]] = &[
            b"type\0",
            b"_socket.socket\0",
            b"socket\0",
            b"SocketMixin\0",
            b"gevent._socket3.socket\0",
            b"method_descriptor\0",
            b"_sock\0",
            b"hub\0",
            b"str\0",
        ];
        m.put(NAMES, &[0u8; 0x40 * 16]);
        for (i, s) in strings.iter().enumerate() {
            m.put(NAMES + 0x40 * i as u64, s);
        }
        let name = |i: u64| NAMES + 0x40 * i;
        put_type(&mut m, META, name(0), 0x1a0, 0, 0);
        put_type(&mut m, SOCK_T, name(1), 48, 0, 0);
        put_type(&mut m, SUB_T, name(2), 56, SOCK_T, 0);
        // SocketMixin: slots hub (+16) then _sock (+24), as PyMemberDefs at 0x9000.
        put_type(&mut m, MIXIN_T, name(3), 40, 0, 0x9000);
        m.put(0x9000, &[0u8; 120]);
        m.put_u64(0x9000, name(7));
        m.put(0x9008, &16i32.to_le_bytes());
        m.put_u64(0x9010, 16);
        m.put_u64(0x9028, name(6));
        m.put(0x9030, &16i32.to_le_bytes());
        m.put_u64(0x9038, 24);
        put_type(&mut m, WRAP_T, name(4), 56, MIXIN_T, 0);
        put_type(&mut m, DESCR_T, name(5), 64, 0, 0);
        m
    }

    /// A socket object of type `tp` at `at` with `fd` and `family`.
    fn put_socket(m: &mut FakeMemory, at: u64, tp: u64, fd: i32, family: i32) {
        m.put(at, &[0u8; 56]);
        m.put_u64(at + 8, tp);
        m.put(at + 16, &fd.to_le_bytes());
        m.put(at + 20, &family.to_le_bytes());
    }

    fn snap(m: FakeMemory) -> Snapshot {
        Snapshot::for_test(m, Layout::builtin(Version::new(3, 12, 1)).unwrap())
    }

    #[test]
    fn fd_of_a_socket_and_of_a_subclass() {
        let mut m = memory();
        put_socket(&mut m, 0xa000, SOCK_T, 7, 2);
        put_socket(&mut m, 0xa100, SUB_T, 9, 10);
        put_socket(&mut m, 0xa200, SUB_T, -1, 1);
        let s = snap(m);
        assert_eq!(
            s.socket_object(0xa000).unwrap(),
            SocketObject {
                fd: Some(7),
                family: 2
            }
        );
        assert_eq!(s.socket_object(0xa100).unwrap().fd, Some(9));
        assert_eq!(s.socket_object(0xa200).unwrap().fd, None);
        assert_eq!(s.real_socket(0xa100), Some(0xa100));
    }

    #[test]
    fn corrupt_sockets_are_errors() {
        let mut m = memory();
        put_socket(&mut m, 0xa000, SOCK_T, -7, 2);
        put_socket(&mut m, 0xa100, SOCK_T, 7, 9999);
        put_socket(&mut m, 0xa200, DESCR_T, 7, 2);
        // A type whose base is itself, or a chain longer than the cap: no socket.
        put_type(&mut m, 0xb000, NAMES + 0x40 * 2, 56, 0xb000, 0);
        put_socket(&mut m, 0xa300, 0xb000, 7, 2);
        let s = snap(m);
        for obj in [0xa000, 0xa100, 0xa200, 0xa300, 0, u64::MAX - 8, 0xdead_0000] {
            assert!(s.socket_object(obj).is_err(), "{obj:#x}");
        }
    }

    #[test]
    fn a_wrapper_keeps_the_socket_in_a_slot() {
        let mut m = memory();
        put_socket(&mut m, 0xa000, SOCK_T, 7, 2);
        m.put(0xc000, &[0u8; 56]);
        m.put_u64(0xc008, WRAP_T);
        m.put_u64(0xc018, 0xa000);
        let mut empty = m.clone();
        empty.put_u64(0xc018, 0);
        let s = snap(m);
        assert_eq!(s.slot_attr(0xc000, "_sock").unwrap(), Some(0xa000));
        assert_eq!(s.slot_attr(0xc000, "nothing").unwrap(), None);
        assert_eq!(s.real_socket(0xc000), Some(0xa000));
        assert_eq!(snap(empty).real_socket(0xc000), None);
    }

    #[test]
    fn corrupt_members_are_bounded() {
        let mut m = memory();
        put_socket(&mut m, 0xa000, SOCK_T, 7, 2);
        m.put(0xc000, &[0u8; 56]);
        m.put_u64(0xc008, WRAP_T);
        m.put_u64(0xc018, 0xa000);
        // An offset past the object, a negative one, an unaligned one.
        for off in [4096u64, u64::MAX, 25, 8] {
            let mut bad = m.clone();
            bad.put_u64(0x9038, off);
            assert!(snap(bad).slot_attr(0xc000, "_sock").is_err(), "{off}");
        }
        // A members array with no end: MAX_MEMBERS entries read, then nothing found.
        let mut endless = m.clone();
        for i in 0..(MAX_MEMBERS as u64 + 4) {
            let def = 0x20000 + i * MEMBER_DEF_SIZE;
            endless.put_u64(def, NAMES + 0x40 * 7);
            endless.put(def + 8, &16i32.to_le_bytes());
        }
        endless.put_u64(MIXIN_T + 240, 0x20000);
        assert_eq!(snap(endless).slot_attr(0xc000, "_sock").unwrap(), None);
        // tp_members unreadable.
        let mut wild = m;
        wild.put_u64(MIXIN_T + 240, 0xdead_0000);
        assert!(snap(wild).slot_attr(0xc000, "_sock").is_err());
    }

    /// A compact ASCII str (3.12: length +16, state +32, data +40) of type STR_T.
    fn put_str(m: &mut FakeMemory, at: u64, text: &str) {
        m.put(at, &[0u8; 40]);
        m.put_u64(at + 8, STR_T);
        m.put_u64(at + 16, text.len() as u64);
        m.put(at + 32, &((1u32 << 2) | (1 << 5) | (1 << 6)).to_le_bytes());
        m.put(at + 40, text.as_bytes());
    }

    /// A `method_descriptor` at `at` named `name` (a str at `at + 0x100`) of type `tp`.
    fn put_descr(m: &mut FakeMemory, at: u64, name: &str, tp: u64) {
        m.put(at, &[0u8; 48]);
        m.put_u64(at + 8, DESCR_T);
        m.put_u64(at + 16, tp);
        m.put_u64(at + 24, at + 0x100);
        put_str(m, at + 0x100, name);
    }

    #[test]
    fn method_calls_on_the_value_stack() {
        let mut m = memory();
        put_type(&mut m, STR_T, NAMES + 0x40 * 8, 64, 0, 0);
        m.put_u64(
            STR_T + 168,
            crate::cpython::layout::tpflags::UNICODE_SUBCLASS,
        );
        put_socket(&mut m, 0xa000, SUB_T, 7, 2);
        put_socket(&mut m, 0xa100, SOCK_T, 8, 2);
        put_socket(&mut m, 0xa200, DESCR_T, 9, 2);
        put_descr(&mut m, 0xd000, "recv", SOCK_T);
        put_descr(&mut m, 0xd400, "close", SOCK_T);
        put_descr(&mut m, 0xd800, "recv", DESCR_T);
        let s = snap(m);
        let calls = |slots: &[Option<u64>]| s.socket_calls(slots, &["recv", "sendall"]);
        // `sock.recv(n)` on a socket.socket (a subclass): the descriptor then the socket.
        assert_eq!(
            calls(&[None, Some(0xd000), Some(0xa000), None]),
            vec![SocketCall {
                slot: 1,
                method: "recv".into(),
                sock: 0xa000
            }]
        );
        // Bottom first: the lowest is the live one.
        let found = calls(&[Some(0xd000), Some(0xa100), Some(0xd000), Some(0xa000)]);
        assert_eq!(
            found.iter().map(|c| c.sock).collect::<Vec<_>>(),
            [0xa100, 0xa000]
        );
        // Another method; a descriptor of another type; `self` that is no socket; the
        // descriptor last on the stack.
        assert!(calls(&[Some(0xd400), Some(0xa000)]).is_empty());
        assert!(calls(&[Some(0xd800), Some(0xa000)]).is_empty());
        assert!(calls(&[Some(0xd000), Some(0xa200)]).is_empty());
        assert!(calls(&[Some(0xd000)]).is_empty());
    }

    #[test]
    fn wild_value_stacks_find_nothing() {
        let mut m = memory();
        put_socket(&mut m, 0xa000, SOCK_T, 7, 2);
        let s = snap(m);
        let slots = [
            None,
            Some(0xa000),
            Some(0xdead_0000),
            Some(0),
            Some(u64::MAX - 7),
            Some(SOCK_T),
        ];
        assert!(s.socket_calls(&slots, &["recv"]).is_empty());
        assert!(s.socket_calls(&[], &["recv"]).is_empty());
    }
}

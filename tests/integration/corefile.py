"""Read and patch ELF core files by virtual address, for the corrupt-core tests.

Standard library only. A core's PT_LOAD program headers map virtual addresses to file offsets
(p_vaddr, p_offset, p_filesz); a patch writes bytes at the file offset that holds a virtual
address, in a copy of the core.

    core = CoreFile(path)
    core.read_u64(addr)                 # bytes the core holds for addr
    patched = core.patched_copy(dest, {addr: struct.pack("<Q", value)})
    core.mapped_files()                 # NT_FILE: (start, end, file offset, path) of each mapping
    core.stack_pointers()               # NT_PRSTATUS: {LWP: rsp}
    core.system_calls()                 # NT_PRSTATUS: {LWP: (orig_rax, rdi)}
"""

import os
import shutil
import struct

PT_LOAD = 1
PT_NOTE = 4
NT_PRSTATUS = 1
NT_FILE = 0x46494C45
# `struct elf_prstatus` of x86-64 (linux/elfcore.h): pr_pid at 32, pr_reg (user_regs_struct,
# sys/user.h) at 112; rdi, orig_rax and rsp are its 15th, 16th and 20th registers.
PRSTATUS_PID = 32
PRSTATUS_RDI = 112 + 8 * 14
PRSTATUS_ORIG_RAX = 112 + 8 * 15
PRSTATUS_RSP = 112 + 8 * 19


class CoreFileError(Exception):
    """The file is not a 64-bit little-endian ELF core, or an address is not in it."""


def program_headers(path):
    """(e_phoff, [(p_type, p_flags, p_offset, p_vaddr, p_filesz, p_memsz), ...]) of the 64-bit
    little-endian ELF file ``path``."""
    with open(path, "rb") as f:
        header = f.read(64)
        if len(header) < 64 or header[:4] != b"\x7fELF" or header[4] != 2 or header[5] != 1:
            raise CoreFileError("%s is not a 64-bit little-endian ELF file" % path)
        phoff, = struct.unpack_from("<Q", header, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", header, 0x36)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    if len(table) < phentsize * phnum:
        raise CoreFileError("%s: its program headers are cut off" % path)
    return phoff, [(t, fl, o, v, fs, ms) for t, fl, o, v, _paddr, fs, ms, _align in
                   (struct.unpack_from("<IIQQQQQQ", table, i * phentsize) for i in range(phnum))]


class CoreFile:
    def __init__(self, path):
        self.path = str(path)
        self.size = os.path.getsize(self.path)
        _, headers = program_headers(self.path)
        with open(self.path, "rb") as f:
            e_type, = struct.unpack_from("<H", f.read(18), 16)
        if e_type != 4:  # ET_CORE
            raise CoreFileError("%s is not a core file (e_type %d)" % (self.path, e_type))
        # (vaddr, offset, filesz, memsz) of every PT_LOAD with bytes in the file.
        self.loads = []
        # (offset, filesz) of every PT_NOTE (gcore lists its one note segment twice).
        self.note_segments = []
        for p_type, _flags, p_offset, p_vaddr, p_filesz, p_memsz in headers:
            if p_type == PT_LOAD and p_filesz:
                self.loads.append((p_vaddr, p_offset, p_filesz, p_memsz))
            elif p_type == PT_NOTE and p_filesz and (p_offset, p_filesz) not in self.note_segments:
                self.note_segments.append((p_offset, p_filesz))

    def offset_of(self, addr, size=1):
        """The file offset of the ``size`` bytes at virtual address ``addr``."""
        for vaddr, offset, filesz, _ in self.loads:
            if vaddr <= addr and addr + size <= vaddr + filesz:
                return offset + (addr - vaddr)
        raise CoreFileError("%#x (+%d) is not in %s" % (addr, size, self.path))

    def segment_of(self, addr):
        """(vaddr, offset, filesz) of the PT_LOAD holding ``addr``."""
        for vaddr, offset, filesz, _ in self.loads:
            if vaddr <= addr < vaddr + filesz:
                return vaddr, offset, filesz
        raise CoreFileError("%#x is not in %s" % (addr, self.path))

    def has(self, addr, size=1):
        """Whether the file holds the ``size`` bytes at ``addr`` (a cut file may not)."""
        try:
            return self.offset_of(addr, size) + size <= self.size
        except CoreFileError:
            return False

    def notes(self):
        """(n_type, name, desc) of every note, in file order."""
        return [(n_type, name, desc) for n_type, name, desc, _ in self.notes_at()]

    def notes_at(self):
        """(n_type, name, desc, file offset of the desc) of every note, in file order."""
        out = []
        with open(self.path, "rb") as f:
            for offset, filesz in self.note_segments:
                f.seek(offset)
                data = f.read(filesz)
                if len(data) != filesz:
                    raise CoreFileError("%s: its notes are cut off" % self.path)
                pos = 0
                while pos + 12 <= len(data):
                    namesz, descsz, n_type = struct.unpack_from("<III", data, pos)
                    pos += 12
                    name = data[pos:pos + namesz].rstrip(b"\0")
                    pos += (namesz + 3) & ~3
                    out.append((n_type, name, data[pos:pos + descsz], offset + pos))
                    pos += (descsz + 3) & ~3
        return out

    def mapped_files(self):
        """(start, end, file offset, path) of every file mapping (the NT_FILE note)."""
        found = [desc for n_type, name, desc in self.notes()
                 if n_type == NT_FILE and name == b"CORE"]
        if len(found) != 1:
            raise CoreFileError("%s has %d NT_FILE notes" % (self.path, len(found)))
        desc = found[0]
        count, page_size = struct.unpack_from("<QQ", desc, 0)
        paths = desc[16 + 24 * count:].split(b"\0")[:count]
        out = []
        for i, path in enumerate(paths):
            start, end, page = struct.unpack_from("<QQQ", desc, 16 + 24 * i)
            out.append((start, end, page * page_size, os.fsdecode(path)))
        return out

    def stack_pointers(self):
        """{LWP: rsp} of every thread (its NT_PRSTATUS note)."""
        return {struct.unpack_from("<I", desc, PRSTATUS_PID)[0]:
                struct.unpack_from("<Q", desc, PRSTATUS_RSP)[0]
                for n_type, name, desc in self.notes()
                if n_type == NT_PRSTATUS and name == b"CORE"}

    def system_calls(self):
        """{LWP: (orig_rax, rdi)} of every thread (its NT_PRSTATUS note): the number of the
        system call it is in (2**64 - 1 for none) and that call's first argument."""
        return {struct.unpack_from("<I", desc, PRSTATUS_PID)[0]:
                (struct.unpack_from("<Q", desc, PRSTATUS_ORIG_RAX)[0],
                 struct.unpack_from("<Q", desc, PRSTATUS_RDI)[0])
                for n_type, name, desc in self.notes()
                if n_type == NT_PRSTATUS and name == b"CORE"}

    def read(self, addr, size):
        with open(self.path, "rb") as f:
            f.seek(self.offset_of(addr, size))
            data = f.read(size)
        if len(data) != size:
            raise CoreFileError("%#x (+%d) is past the end of %s" % (addr, size, self.path))
        return data

    def read_u64(self, addr):
        return struct.unpack("<Q", self.read(addr, 8))[0]

    def read_i64(self, addr):
        return struct.unpack("<q", self.read(addr, 8))[0]

    def patched_copy(self, dest, patches):
        """Copy the core to ``dest`` and write ``patches`` ({addr: bytes}) into the copy.
        Returns ``dest`` as a string."""
        dest = str(dest)
        shutil.copyfile(self.path, dest)
        with open(dest, "r+b") as f:
            for addr, data in sorted(patches.items()):
                f.seek(self.offset_of(addr, len(data)))
                f.write(data)
        return dest

    def notes_first_copy(self, dest, align=4096):
        """Rewrite the core into ``dest`` in the kernel's layout: program headers, then the
        PT_NOTE data, then the PT_LOAD data in address order (each load ``align``-aligned).
        gcore writes its notes at the END of the file, so cutting a gcore core always loses
        the notes; cutting this copy loses memory (the top of the address space) and keeps the
        notes, as a kernel core cut short by a full disk or a core size limit does.
        Returns a CoreFile for ``dest``."""
        dest = str(dest)
        with open(self.path, "rb") as f:
            header = bytearray(f.read(64))
            phoff, = struct.unpack_from("<Q", header, 0x20)
            phentsize, phnum = struct.unpack_from("<HH", header, 0x36)
            f.seek(phoff)
            table = bytearray(f.read(phentsize * phnum))
            phdrs = [list(struct.unpack_from("<IIQQQQQQ", table, i * phentsize))
                     for i in range(phnum)]
            # Non-load segments with file data first (notes), then loads by address; a
            # segment listed twice (gcore repeats its PT_NOTE header) is written once.
            order = sorted(range(phnum), key=lambda i: (phdrs[i][0] == PT_LOAD, phdrs[i][3]))
            new_phoff = 64
            pos = new_phoff + phentsize * phnum
            placed = {}  # (old offset, filesz) -> new offset
            with open(dest, "wb") as out:
                out.write(b"\0" * pos)
                for i in order:
                    p_type, _, p_offset, _, _, p_filesz, _, _ = phdrs[i]
                    if not p_filesz:
                        phdrs[i][2] = 0
                        continue
                    key = (p_offset, p_filesz)
                    if key not in placed:
                        if p_type == PT_LOAD and pos % align:
                            out.write(b"\0" * (align - pos % align))
                            pos += align - pos % align
                        placed[key] = pos
                        f.seek(p_offset)
                        left = p_filesz
                        while left:
                            chunk = f.read(min(left, 1 << 20))
                            if not chunk:
                                raise CoreFileError("%s is shorter than its headers say"
                                                    % self.path)
                            out.write(chunk)
                            left -= len(chunk)
                        pos += p_filesz
                    phdrs[i][2] = placed[key]
                for i, p in enumerate(phdrs):
                    struct.pack_into("<IIQQQQQQ", table, i * phentsize, *p)
                struct.pack_into("<Q", header, 0x20, new_phoff)
                # No section headers (gcore's describe its layout, not ours; the kernel
                # writes none either): e_shoff, e_shnum, e_shstrndx = 0.
                struct.pack_into("<Q", header, 0x28, 0)
                struct.pack_into("<H", header, 0x3C, 0)
                struct.pack_into("<H", header, 0x3E, 0)
                out.seek(0)
                out.write(header)
                out.seek(new_phoff)
                out.write(table)
        return CoreFile(dest)

    def truncated_copy(self, dest, size):
        """The first ``size`` bytes of the core in ``dest``. Returns ``dest`` as a string."""
        dest = str(dest)
        with open(self.path, "rb") as src, open(dest, "wb") as out:
            left = size
            while left > 0:
                chunk = src.read(min(left, 1 << 20))
                if not chunk:
                    break
                out.write(chunk)
                left -= len(chunk)
        return dest


def u64(value):
    """``value`` as 8 little-endian bytes (for patches)."""
    return struct.pack("<Q", value & 0xFFFFFFFFFFFFFFFF)

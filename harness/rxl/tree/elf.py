"""What an ELF file is, from its header and notes: enough to tell a FreeBSD amd64
kernel from anything else before it is booted.

A FreeBSD amd64 kernel (sys/conf/kern.pre.mk links it with ``ld -m
elf_x86_64_fbsd``) is an ELF64 little-endian ``ET_EXEC`` for ``EM_X86_64``
whose ``e_ident[EI_OSABI]`` is ``ELFOSABI_FREEBSD`` (9: lld sets it for the
``_fbsd`` emulations); a FreeBSD object may instead carry only the brand note,
a ``PT_NOTE`` entry owned by ``"FreeBSD"`` of type ``NT_FREEBSD_ABI_TAG``
(sys/sys/elf_common.h; clang leaves EI_OSABI 0 in programs).  A kernel also
holds newvers.sh's version string (:func:`kernel_version`), which a FreeBSD
program does not.  Pure: reads bytes.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from typing import Optional

ELF_MAGIC = b"\x7fELF"
ELFCLASS64 = 2
ELFDATA2LSB = 1
ELFOSABI_FREEBSD = 9
ET_EXEC = 2
EM_X86_64 = 62
PT_NOTE = 4
NT_FREEBSD_ABI_TAG = 1
ELF_NOTE_FREEBSD = b"FreeBSD"
#: Bytes read of a file: the header and program headers of a kernel are in the
#: first page; the notes they point at are read where they are.
HEAD_BYTES = 4096
#: At most this many program headers are looked at (a kernel has about eight).
MAX_PHDRS = 64

_OSABI = {0: "SYSV", 3: "Linux", 6: "Solaris", 9: "FreeBSD", 12: "OpenBSD", 2: "NetBSD"}
_TYPES = {0: "no file type", 1: "relocatable object (a module?)", 2: "executable",
          3: "shared object or PIE", 4: "core dump"}
_MACHINES = {3: "i386", 40: "ARM", 62: "x86-64", 183: "AArch64", 243: "RISC-V",
             21: "PowerPC64", 8: "MIPS"}
#: The release name a kernel's ``version[]`` and ``kern.version`` start with
#: (sys/conf/newvers.sh: ``VERSION="${TYPE} ${RELEASE}"``, RELEASE
#: ``${REVISION}-${BRANCH}``): ``FreeBSD 14.0-STABLE``, ``FreeBSD 15.0-RELEASE-p1``,
#: and in the rebranded 15.0 snapshot ``Irid 0.0.2-ALPHA``. TYPE is any name.
_RELEASE = rb"[A-Za-z][A-Za-z0-9_]* [0-9]+(?:\.[0-9]+)+-[A-Za-z0-9.]+(?:-p[0-9]+)?"
#: newvers.sh's ``sccs[]``: ``@(#)`` and kern.version's first line, which ``version[]``
#: repeats with a newline after it (reproducible builds leave out ``#N: date``).
_SCCS_RE = re.compile(rb"@\(#\)(" + _RELEASE + rb"[^\n\x00]*)")
#: ``version[]`` alone (a kernel without ``sccs[]``): ``<release> #N ...``.
_VERSION_RE = re.compile(rb"(" + _RELEASE + rb" #[0-9]+[^\n\x00]*)\n")
#: What a file without :func:`kernel_version`'s string lacks, as messages say it.
NO_VERSION = "no '<TYPE> N.N-<BRANCH> #N' version string (sys/conf/newvers.sh)"


@dataclass(frozen=True)
class ElfInfo:
    """What an ELF header (and its brand note) says."""

    bits: int            # 32 or 64
    little: bool
    osabi: int           # e_ident[EI_OSABI]
    type: int            # e_type
    machine: int         # e_machine
    freebsd_note: bool   # a PT_NOTE owned by "FreeBSD", type NT_FREEBSD_ABI_TAG

    @property
    def freebsd(self) -> bool:
        return self.osabi == ELFOSABI_FREEBSD or self.freebsd_note

    @property
    def freebsd_amd64_kernel(self) -> bool:
        """An amd64 kernel FreeBSD's loader boots: ELF64 LSB, x86-64, an
        executable, FreeBSD by its OS/ABI or its brand note."""
        return (self.bits == 64 and self.little and self.machine == EM_X86_64
                and self.type == ET_EXEC and self.freebsd)

    def describe(self) -> str:
        """``an ELF 64-bit LSB executable, x86-64, OS/ABI Linux, no FreeBSD brand note``."""
        machine = _MACHINES.get(self.machine, f"machine {self.machine}")
        osabi = _OSABI.get(self.osabi, str(self.osabi))
        note = "the FreeBSD brand note" if self.freebsd_note else "no FreeBSD brand note"
        return (f"an ELF {self.bits}-bit {'LSB' if self.little else 'MSB'} "
                f"{_TYPES.get(self.type, f'type {self.type}')}, {machine}, "
                f"OS/ABI {osabi}, {note}")


def read_info(path) -> Optional[ElfInfo]:
    """The :class:`ElfInfo` of the file at ``path``, None when it is no ELF file
    (or one too short or damaged to say). Raises OSError when it cannot be read."""
    with open(path, "rb") as f:
        head = f.read(HEAD_BYTES)
        if head[:4] != ELF_MAGIC or len(head) < 52 or head[4] not in (1, 2) \
                or head[5] not in (1, 2):
            return None
        bits = 64 if head[4] == ELFCLASS64 else 32
        little = head[5] == ELFDATA2LSB
        e = "<" if little else ">"
        if bits == 64:
            if len(head) < 64:
                return None
            etype, machine = struct.unpack_from(e + "HH", head, 16)
            phoff, = struct.unpack_from(e + "Q", head, 32)
            phentsize, phnum = struct.unpack_from(e + "HH", head, 54)
        else:
            etype, machine = struct.unpack_from(e + "HH", head, 16)
            phoff, = struct.unpack_from(e + "I", head, 28)
            phentsize, phnum = struct.unpack_from(e + "HH", head, 42)
        note = _has_freebsd_note(f, e, bits, phoff, phentsize, min(phnum, MAX_PHDRS))
        return ElfInfo(bits, little, head[7], etype, machine, note)


def _has_freebsd_note(f, e: str, bits: int, phoff: int, phentsize: int, phnum: int) -> bool:
    """Whether a PT_NOTE segment holds the FreeBSD ABI tag note."""
    want = 56 if bits == 64 else 32
    if phnum == 0 or phentsize < want:
        return False
    f.seek(phoff)
    table = f.read(phentsize * phnum)
    for i in range(len(table) // phentsize):
        ph = table[i * phentsize:(i + 1) * phentsize]
        if bits == 64:
            ptype, = struct.unpack_from(e + "I", ph, 0)
            offset, = struct.unpack_from(e + "Q", ph, 8)
            size, = struct.unpack_from(e + "Q", ph, 32)
        else:
            ptype, offset = struct.unpack_from(e + "II", ph, 0)
            size, = struct.unpack_from(e + "I", ph, 16)
        if ptype != PT_NOTE or not 0 < size <= 65536:
            continue
        f.seek(offset)
        if _notes_hold_tag(f.read(size), e):
            return True
    return False


def _notes_hold_tag(data: bytes, e: str) -> bool:
    """Whether the note entries in ``data`` include ("FreeBSD", NT_FREEBSD_ABI_TAG)."""
    pos = 0
    while pos + 12 <= len(data):
        namesz, descsz, ntype = struct.unpack_from(e + "III", data, pos)
        name = data[pos + 12:pos + 12 + namesz].rstrip(b"\x00")
        if name == ELF_NOTE_FREEBSD and ntype == NT_FREEBSD_ABI_TAG:
            return True
        pos += 12 + (namesz + 3) // 4 * 4 + (descsz + 3) // 4 * 4
    return False


def kernel_version(data) -> Optional[str]:
    """The first line of a kernel's ``version[]`` (what kern.version starts with)
    in ``data`` (bytes, or an mmap of the file): ``sccs[]``'s text when
    ``version[]`` repeats it, else a ``<TYPE> <RELEASE> #N`` line (both made by
    sys/conf/newvers.sh; TYPE may be a rebranding's, ``Irid``).  None when
    ``data`` holds no such string."""
    for m in _SCCS_RE.finditer(data):
        if data.find(m.group(1) + b"\n") != -1:
            return m.group(1).decode("ascii", "replace").strip()
    m = _VERSION_RE.search(data)
    return m.group(1).decode("ascii", "replace").strip() if m else None

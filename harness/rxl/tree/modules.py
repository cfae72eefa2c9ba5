"""Kernel modules: which ones a module boot needs, where buildkernel leaves them, and
whether they link against the kernel they are for.

The test kernel (RXL, GENERIC-based) is built with ``NO_MODULES``; that hid a
broken module once: a series commit added ``sys/net/iflib_spread.c`` to
``sys/conf/files`` but not to ``sys/modules/iflib/Makefile``, so on a kernel
without ``device iflib`` (amd64 MINIMAL) ``iflib.ko`` had an undefined symbol and
``kldload if_em`` failed. A module build therefore builds, with the MINIMAL
kernel (:data:`MODULE_KERNCONF`: amd64's MINIMAL has virtio and vtnet but
neither iflib nor em(4), in 14 and 15), only the modules named
(``MODULES_OVERRIDE``; the snapshots lack blobs some other modules need):

* :data:`NIC_MODULES`: ``em`` (``if_em.ko``; sys/modules/em/Makefile builds em(4)
  and igb(4) into it and installs ``if_igb.ko`` as a link to it), the guest's NIC
  driver, and ``iflib``, which if_em.c names in ``MODULE_DEPEND(em, iflib, 1, 1,
  1)``;
* every module whose sources a series touches (:func:`touched_modules`: a file
  in a module Makefile's ``.PATH`` whose name the Makefile lists, or the
  Makefile itself).

:func:`undefined_symbols` then does what the kernel linker would do at
``kldload``, before any boot: every undefined symbol of each module (``nm -u``)
must be defined by the kernel (``kernel.full``) or by a module loaded before it,
but for a linker set's ``__start_``/``__stop_`` symbols of the module's own
sections, which the kernel linker binds itself (:func:`link_set_symbols`).
:func:`unhandled_relocations` then checks what that cannot see: amd64 modules are
``ld -r`` objects (sys/conf/kmod.mk), relocated by the kernel's own linker
(sys/kern/link_elf_obj.c, sys/amd64/amd64/elf_machdep.c's
``elf_reloc_internal``), which applies only the relocation types its ``case``
labels name; any other fails the load ("kldload: unexpected relocation type 42":
the 14 module boot's msdosfs.ko, a ``R_X86_64_REX_GOTPCRELX`` to
``__stack_chk_guard`` from clang 16, issue 24).
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from rxl.errors import HostError, SourceError

#: The kernel config a module boot uses (sys/amd64/conf/MINIMAL).
MODULE_KERNCONF = "MINIMAL"
#: The guest NIC's driver and what it depends on, in load order.
NIC_MODULES: Tuple[str, ...] = ("iflib", "em")
#: What ``kldload`` is given for the NIC (loads iflib.ko first by its MODULE_DEPEND).
NIC_KLD = "if_em"
#: What the module boot's root needs that MINIMAL lacks: the guest's root is a FAT
#: file system (msdosfs) in an MBR slice (``ada0s1``), and amd64's MINIMAL has
#: neither ``options MSDOSFS`` nor ``GEOM_PART_MBR`` (its g_part core is
#: ``standard`` in sys/conf/files); the loader loads these before the kernel starts
#: (a first module boot without them stopped at ``mountroot>``, 2026-12-03).
#: Directories under sys/modules, in load order (:func:`root_modules` adds the
#: disk's when the config lacks it, :data:`DISK_MODULES`; the loader loads the .ko files
#: their build leaves: :func:`module_path`).
ROOT_MODULES: Tuple[str, ...] = ("msdosfs", "geom/geom_part/geom_part_mbr")
#: What the root disk needs when the kernel config lacks it: (the config's ``device``,
#: the directory under sys/modules that builds it), in load order. The guest's root is
#: an ``ide-hd`` on q35's ICH9 AHCI controller (rxl.guest.qemu: ``bus=ide.0``, FreeBSD's
#: ``ada0``, :data:`rxl.guest.image.ROOTDEV`), so it needs ahci(4) and CAM with its
#: ada(4) driver. ``scbus`` is CAM's device (sys/conf/files: ``cam/cam.c optional
#: scbus``); sys/modules/cam/Makefile (14.0 and 15.0) builds ``cam.ko`` with
#: ``ata_da.c``, ada(4), inside it, so there is no ada module to load;
#: sys/modules/ahci builds ``ahci.ko``, whose ahci.c says ``MODULE_DEPEND(ahci, cam, 1,
#: 1, 1)``: cam first. 15.0's amd64 MINIMAL has ``device ahci`` and ``scbus`` (and
#: ``da``, which builds ata_da.c too); 14.0's has neither, and its module boot stopped
#: at ``mountroot>`` with no driver on the SATA controller (2026-12-07, issue 24).
DISK_MODULES: Tuple[Tuple[str, str], ...] = (("scbus", "cam"), ("ahci", "ahci"))
#: Where config(8) looks for a config's ``include``s and its DEFAULTS, relative to the
#: tree: it runs in ``sys/<machine>/conf`` (Makefile.inc1's ``cd ${KRNLCONFDIR};
#: config``), reads ``DEFAULTS`` there first (usr.sbin/config/main.cc), and opens an
#: include by its name there, then, a name not starting with ``.`` or ``/``, as
#: ``../../conf/<name>`` (lang.l's ``include()``), i.e. sys/conf.
KERNCONF_DEFAULTS = "DEFAULTS"
_CONF_MAX_DEPTH = 16
_CONF_COMMENT = re.compile(r"#[^\n]*")
_CONF_WORD = re.compile(r'"[^"\n]*"|[^\s,;"]+|,')

#: The amd64 kernel linker's relocation code, and the header numbering the types.
ELF_MACHDEP = "sys/amd64/amd64/elf_machdep.c"
ELF_COMMON = "sys/sys/elf_common.h"
#: ``case`` labels of elf_reloc_internal whose body refuses the relocation
#: (``R_X86_64_COPY``: "kldload: unexpected R_COPY relocation", return -1; 14, 15).
REFUSED_CASES: Tuple[str, ...] = ("R_X86_64_COPY",)
_RELOC_FUNC = re.compile(r"^elf_reloc_internal\(.*?^}", re.M | re.S)
_CASE = re.compile(r"\bcase\s+(R_X86_64_\w+)\s*:")
_RELOC_DEFINE = re.compile(r"^#define\s+(R_X86_64_\w+)\s+(\d+)\b", re.M)
SHT_RELA, SHT_REL = 4, 9
SHT_NOBITS = 8
#: Section types link_elf_obj.c lists in a module's progtab (elf_common.h's numbers):
#: SHT_PROGBITS, SHT_NOBITS, SHT_X86_64_UNWIND, SHT_INIT_ARRAY, SHT_FINI_ARRAY.
LOADED_SECTION_TYPES: Tuple[int, ...] = (1, 8, 0x70000001, 14, 15)
SHF_ALLOC = 0x2

_PATH_LINE = re.compile(r"^\.PATH:(.*)$", re.M)
_KMOD = re.compile(r"^KMOD\s*\??=\s*(\S+)", re.M)
_C_WORD = re.compile(r"[A-Za-z0-9_.+-]+\.[ch]\b")


class ModuleError(HostError):
    """A module cannot be checked (no nm, a missing file); the message is one line."""


class ModuleLinkError(SourceError):
    """A built module would not load: missing, or needing a symbol nothing defines."""


def _conf_statements(text: str) -> List[List[str]]:
    """The statements of a kernel config text, each a list of words (commas dropped,
    quotes removed), as config(8)'s lexer (usr.sbin/config/lang.l) splits them: ``#``
    starts a comment to the end of the line; a newline or ``;`` ends a statement, but
    a newline before a blank or tab continues it."""
    text = _CONF_COMMENT.sub("", text)
    out: List[List[str]] = []
    for chunk in re.split(r"\n(?![ \t])|;", text):
        words = [w.strip('"') for w in _CONF_WORD.findall(chunk) if w != ","]
        if words:
            out.append(words)
    return out


def kernconf_devices(src: str, kernconf: str = MODULE_KERNCONF,
                     machine: str = "amd64") -> List[str]:
    """The ``device``s (sorted) the kernel config ``kernconf`` of the tree ``src``
    gives config(8): ``sys/<machine>/conf/DEFAULTS`` when there, then the config,
    each ``include`` read where it stands (found as :data:`KERNCONF_DEFAULTS`'s comment
    says), ``device``/``devices`` adding names, ``nodevice``/``nodevices`` removing
    them. Raises ModuleError when the config or an include cannot be read, or
    includes nest deeper than 16 (a loop)."""
    confdir = Path(src) / "sys" / machine / "conf"
    have: Dict[str, None] = {}

    def find(name: str) -> Optional[Path]:
        for cand in ([confdir / name] + ([confdir / "../../conf" / name]
                                         if not name.startswith((".", "/")) else [])):
            if cand.is_file():
                return cand
        return None

    def read(path: Path, depth: int, shown: str) -> None:
        if depth > _CONF_MAX_DEPTH:
            raise ModuleError(f"{path}: includes nest deeper than {_CONF_MAX_DEPTH} "
                              "(a loop?): the devices of the kernel config are not known")
        try:
            text = path.read_text(errors="replace")
        except OSError as exc:
            raise ModuleError(f"{shown}: cannot read it ({exc.strerror}): the devices "
                              "of the kernel config are not known") from None
        for words in _conf_statements(text):
            key, rest = words[0], words[1:]
            if key == "include" and rest:
                inc = find(rest[0])
                if inc is None:
                    raise ModuleError(f"{path}: include {rest[0]}: not in {confdir} or "
                                      f"{confdir.parent.parent / 'conf'}: the devices of "
                                      "the kernel config are not known")
                read(inc, depth + 1, str(inc))
            elif key in ("device", "devices"):
                have.update(dict.fromkeys(rest))
            elif key in ("nodevice", "nodevices"):
                for d in rest:
                    have.pop(d, None)

    defaults = confdir / KERNCONF_DEFAULTS
    if defaults.is_file():
        read(defaults, 0, str(defaults))
    read(confdir / kernconf, 0, str(confdir / kernconf))
    return sorted(have)


def root_modules(src: str, kernconf: str = MODULE_KERNCONF) -> List[str]:
    """The directories under sys/modules (``geom/geom_part/geom_part_mbr``) a module
    boot of the tree ``src``'s ``kernconf`` must build and the loader load for the
    guest's root, in load order: :data:`ROOT_MODULES` (the FAT file system and the
    MBR slice), then each of :data:`DISK_MODULES` whose device the config (with its
    DEFAULTS and includes: :func:`kernconf_devices`) lacks: ``cam`` without ``device
    scbus``, ``ahci`` without ``device ahci``. For 14.0's MINIMAL ``["msdosfs",
    "geom/geom_part/geom_part_mbr", "cam", "ahci"]``, for 15.0's the first two.
    Decided by reading the config, not by the release. Raises ModuleError as
    :func:`kernconf_devices` does."""
    devices = set(kernconf_devices(src, kernconf))
    return list(ROOT_MODULES) + [mod for dev, mod in DISK_MODULES if dev not in devices]


def module_makefile(name: str) -> str:
    """``sys/modules/<name>/Makefile``."""
    return f"sys/modules/{name}/Makefile"


def kmod_name(makefile_text: str, name: str) -> str:
    """The module's file name without ``.ko``: the Makefile's ``KMOD`` (``if_em`` for
    em), else ``name``."""
    m = _KMOD.search(makefile_text)
    return m.group(1) if m else name


def makefile_sources(makefile_text: str) -> Tuple[List[str], List[str]]:
    """(the ``.PATH`` directories relative to the tree, the ``.c``/``.h`` words) of a
    module Makefile. ``${SRCTOP}/`` is dropped from paths; others (``${.CURDIR}``,
    variables) are left out."""
    dirs: List[str] = []
    for line in _PATH_LINE.findall(makefile_text.replace("\\\n", " ")):
        for w in line.split():
            if w.startswith("${SRCTOP}/"):
                dirs.append(w[len("${SRCTOP}/"):].rstrip("/"))
    return dirs, sorted(set(_C_WORD.findall(makefile_text)))


def touched_modules(src: str, files: Iterable[str]) -> List[str]:
    """Modules (sorted) whose sources include one of ``files`` (paths in the tree),
    or whose Makefile is one of them. Reads every ``sys/modules/*/Makefile``."""
    files = set(files)
    out = set()
    mods = Path(src) / "sys/modules"
    for mk in sorted(mods.glob("*/Makefile")):
        name = mk.parent.name
        if module_makefile(name) in files:
            out.add(name)
            continue
        try:
            dirs, words = makefile_sources(mk.read_text(errors="replace"))
        except OSError:
            continue
        for d in dirs:
            if any(f"{d}/{w}" in files for w in words):
                out.add(name)
                break
    return sorted(out)


def build_list(src: str, series_files: Iterable[str] = ()) -> List[str]:
    """``MODULES_OVERRIDE``'s modules for a module boot of ``src``: :data:`NIC_MODULES`,
    then what the series touches (:func:`touched_modules`) in name order."""
    extra = [m for m in touched_modules(src, series_files) if m not in NIC_MODULES]
    return list(NIC_MODULES) + extra


def module_path(src: str, objdir: str, name: str, kernconf: str = MODULE_KERNCONF,
                kmod: Optional[str] = None) -> Path:
    """Where buildkernel leaves module ``name``: ``<OBJTOP>/sys/<kernconf>/modules/<abs
    src>/sys/modules/<name>/<kmod>.ko`` (Makefile.inc1's layout; ``kmod`` default: the
    Makefile's KMOD, else ``name``)."""
    if kmod is None:
        try:
            kmod = kmod_name((Path(src) / module_makefile(name)).read_text(errors="replace"),
                             name)
        except OSError:
            kmod = name
    srcabs = os.path.abspath(src).lstrip("/")
    return (Path(os.path.abspath(objdir)) / srcabs / "amd64.amd64" / "sys" / kernconf /
            "modules" / srcabs / "sys/modules" / name / f"{kmod}.ko")


def _nm() -> str:
    for cand in ("nm", "llvm-nm-19", "llvm-nm-16", "llvm-nm"):
        tool = shutil.which(cand)
        if tool:
            return tool
    raise ModuleError("no nm to read the modules' symbols (apt-get install -y binutils)")


def symbols(path: str, undefined: bool, nm: Optional[str] = None) -> List[str]:
    """Global symbol names of an ELF file: defined ones, or with ``undefined`` the
    undefined ones. Raises ModuleError when the file cannot be read."""
    argv = [nm or _nm(), "-u" if undefined else "-g", path]
    if not undefined:
        argv.insert(2, "--defined-only")
    cp = subprocess.run(argv, capture_output=True, text=True)
    if cp.returncode != 0:
        raise ModuleError(f"{' '.join(argv)}: {(cp.stderr.strip() or 'failed').splitlines()[-1]}")
    return sorted({ln.split()[-1] for ln in cp.stdout.splitlines() if ln.split()})


def unresolved(kernel_defined: Iterable[str],
               modules: Sequence[Tuple[str, Iterable[str], Iterable[str]]]
               ) -> Dict[str, List[str]]:
    """Pure core of :func:`undefined_symbols`: ``modules`` = (name, defined, undefined)
    in load order; returns name -> its undefined symbols that neither the kernel nor a
    module before it defines (only names with any)."""
    have = set(kernel_defined)
    out: Dict[str, List[str]] = {}
    for name, defined, undef in modules:
        missing = sorted(set(undef) - have)
        if missing:
            out[name] = missing
        have |= set(defined)
    return out


def undefined_symbols(kernel_full: str, kos: Sequence[str]) -> Dict[str, List[str]]:
    """The symbols each module of ``kos`` (paths, load order) needs and nothing loaded
    before it has: ``{ko path: [symbols]}``, empty when all link; a linker set's
    ``__start_``/``__stop_`` symbol of the module's own section is bound by the kernel
    linker (:func:`link_set_symbols`; cam.ko has four). Raises ModuleError when nm is
    missing or a file cannot be read or parsed."""
    nm = _nm()
    kdef = symbols(kernel_full, undefined=False, nm=nm)
    rows = []
    for ko in kos:
        undef = symbols(ko, True, nm)
        try:
            secs = loaded_sections(Path(ko).read_bytes())
        except OSError as exc:
            raise ModuleError(f"{ko}: cannot read it ({exc.strerror})") from None
        except ModuleError as exc:
            raise ModuleError(f"{ko}: {exc}") from None
        own = set(link_set_symbols(undef, secs))
        rows.append((ko, symbols(ko, False, nm), [u for u in undef if u not in own]))
    return unresolved(kdef, rows)


def kernel_relocations(machdep_text: str, common_text: str) -> Dict[int, str]:
    """The relocation types the kernel linker applies (type -> name): the ``case
    R_X86_64_*:`` labels of ``elf_reloc_internal`` in an elf_machdep.c text (from its
    definition to the first ``}`` at the start of a line), less
    :data:`REFUSED_CASES`, numbered by elf_common.h's ``#define``s. Raises
    SourceError when the function or a label's number is not there."""
    m = _RELOC_FUNC.search(machdep_text)
    if m is None:
        raise SourceError(f"{ELF_MACHDEP}: no elf_reloc_internal( at the start of a line")
    numbers = {name: int(n) for name, n in _RELOC_DEFINE.findall(common_text)}
    out: Dict[int, str] = {}
    for name in _CASE.findall(m.group(0)):
        if name in REFUSED_CASES:
            continue
        if name not in numbers:
            raise SourceError(f"{ELF_COMMON}: no #define {name}")
        out[numbers[name]] = name
    return out


def relocation_names(common_text: str) -> Dict[int, str]:
    """Type -> name of every ``R_X86_64_*`` an elf_common.h text defines."""
    return {int(n): name for name, n in reversed(_RELOC_DEFINE.findall(common_text))}


def tree_relocations(src: str) -> Tuple[Dict[int, str], Dict[int, str]]:
    """(:func:`kernel_relocations`, :func:`relocation_names`) of the tree ``src``.
    Raises ModuleError when a file cannot be read, SourceError as
    :func:`kernel_relocations` does."""
    texts = []
    for rel in (ELF_MACHDEP, ELF_COMMON):
        try:
            texts.append((Path(src) / rel).read_text(errors="replace"))
        except OSError as exc:
            raise ModuleError(f"{Path(src) / rel}: cannot read it ({exc.strerror}): the "
                              "relocations the kernel linker applies are not known") from None
    return kernel_relocations(*texts), relocation_names(texts[1])


def _section_table(data: bytes):
    """(the section headers as tuples of Elf64_Shdr's fields, a function giving
    section i's bytes, a function making the ModuleError of a reason) of an ELF64
    little-endian file. Raises ModuleError for bytes that are no such file."""
    def bad(why: str) -> ModuleError:
        return ModuleError(f"not an ELF64 little-endian object: {why}")
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise bad("no ELF64 LSB header")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    if shnum and (shentsize < 64 or shoff + shnum * shentsize > len(data)):
        raise bad("section headers past the end")
    shdrs = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
             for i in range(shnum)]

    def section(i: int) -> bytes:
        if not 0 <= i < len(shdrs):
            raise bad(f"section index {i} out of range")
        off, size = shdrs[i][4], shdrs[i][5]
        if shdrs[i][1] == SHT_NOBITS:
            return b""
        if off + size > len(data):
            raise bad(f"section {i} past the end")
        return data[off:off + size]
    return shdrs, section, bad


def loaded_sections(data: bytes) -> List[str]:
    """Names of the sections of an ELF64 little-endian object (a module) that the
    kernel linker loads and lists (its ``progtab``: sys/kern/link_elf_obj.c's
    link_elf_load_file, 14.0 and 15.0): :data:`LOADED_SECTION_TYPES` with
    ``SHF_ALLOC`` and a size, in section order. Pure. Raises ModuleError as
    :func:`relocations` does."""
    shdrs, section, bad = _section_table(data)
    shstrndx, = struct.unpack_from("<H", data, 0x3E)
    names = section(shstrndx) if shdrs else b""
    out = []
    for sh in shdrs:
        if sh[1] in LOADED_SECTION_TYPES and sh[2] & SHF_ALLOC and sh[5]:
            end = names.find(b"\0", sh[0])
            out.append(names[sh[0]:end if end >= 0 else None].decode("ascii", "replace"))
    return out


def link_set_symbols(undefined: Iterable[str], sections: Iterable[str]) -> List[str]:
    """Those of a module's ``undefined`` symbols the kernel linker binds to the
    module's own sections (``sections``: :func:`loaded_sections`), sorted: an
    undefined ``__start_<s>`` or ``__stop_<s>`` whose ``<s>`` is a loaded section of
    the module (a linker set's ``set_<name>``: ``SET_FOREACH`` in cam's
    cam_xpt.c) gets that section's start or end (link_elf_obj.c's
    link_elf_fix_link_set, before any other lookup). Pure."""
    have = set(sections)
    out = []
    for sym in undefined:
        for prefix in ("__start_", "__stop_"):
            if sym.startswith(prefix) and sym[len(prefix):] in have:
                out.append(sym)
    return sorted(out)


def relocations(data: bytes) -> List[Tuple[int, str]]:
    """(type, symbol name) of every relocation in the ``SHT_RELA`` and ``SHT_REL``
    sections of an ELF64 little-endian object (a module) that apply to a section the
    kernel loads (``SHF_ALLOC``: link_elf_obj.c skips the others, the debug
    sections' among them); the name is ``""`` for symbol 0 or a section symbol
    without one. Pure. Raises ModuleError for bytes that
    are no such ELF file or whose tables run past its end."""
    shdrs, section, bad = _section_table(data)
    out: List[Tuple[int, str]] = []
    for i, sh in enumerate(shdrs):
        sh_type, sh_link, sh_info, entsize = sh[1], sh[6], sh[7], sh[9]
        if sh_type not in (SHT_RELA, SHT_REL):
            continue
        if not 0 <= sh_info < len(shdrs):
            raise bad(f"section index {sh_info} out of range")
        if not shdrs[sh_info][2] & SHF_ALLOC:
            continue
        size = 24 if sh_type == SHT_RELA else 16
        rel = section(i)
        syms = section(sh_link)
        strtab = section(shdrs[sh_link][6])
        for off in range(0, len(rel) - size + 1, entsize or size):
            info, = struct.unpack_from("<Q", rel, off + 8)
            rtype, symidx = info & 0xFFFFFFFF, info >> 32
            name = ""
            if symidx:
                if (symidx + 1) * 24 > len(syms):
                    raise bad(f"symbol {symidx} out of range")
                st_name, = struct.unpack_from("<I", syms, symidx * 24)
                end = strtab.find(b"\0", st_name)
                name = strtab[st_name:end if end >= 0 else None].decode("ascii", "replace")
            out.append((rtype, name))
    return out


def unhandled_relocations(kos: Sequence[str], handled: Mapping[int, str]
                          ) -> Dict[str, List[Tuple[int, str]]]:
    """The relocations of each module of ``kos`` (paths) whose type ``handled`` (type
    -> name: :func:`kernel_relocations`) lacks: ``{ko path: [(type, symbol)]}``, once
    each, in the module's order; empty when every one would be applied. Raises
    ModuleError when a module cannot be read or parsed."""
    out: Dict[str, List[Tuple[int, str]]] = {}
    for ko in kos:
        try:
            data = Path(ko).read_bytes()
        except OSError as exc:
            raise ModuleError(f"{ko}: cannot read it ({exc.strerror})") from None
        try:
            rels = relocations(data)
        except ModuleError as exc:
            raise ModuleError(f"{ko}: {exc}") from None
        seen = list(dict.fromkeys(r for r in rels if r[0] not in handled))
        if seen:
            out[ko] = seen
    return out

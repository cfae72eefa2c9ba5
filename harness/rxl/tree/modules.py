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
must be defined by the kernel (``kernel.full``) or by a module loaded before it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

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
#: Directories under sys/modules, in load order (the loader loads the .ko files
#: their build leaves: :func:`module_path`).
ROOT_MODULES: Tuple[str, ...] = ("msdosfs", "geom/geom_part/geom_part_mbr")

_PATH_LINE = re.compile(r"^\.PATH:(.*)$", re.M)
_KMOD = re.compile(r"^KMOD\s*\??=\s*(\S+)", re.M)
_C_WORD = re.compile(r"[A-Za-z0-9_.+-]+\.[ch]\b")


class ModuleError(HostError):
    """A module cannot be checked (no nm, a missing file); the message is one line."""


class ModuleLinkError(SourceError):
    """A built module would not load: missing, or needing a symbol nothing defines."""


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
    before it has: ``{ko path: [symbols]}``, empty when all link. Raises ModuleError
    when nm is missing or a file cannot be read."""
    nm = _nm()
    kdef = symbols(kernel_full, undefined=False, nm=nm)
    rows = [(ko, symbols(ko, False, nm), symbols(ko, True, nm)) for ko in kos]
    return unresolved(kdef, rows)

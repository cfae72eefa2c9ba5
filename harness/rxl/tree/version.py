"""The FreeBSD version a source tree says it is, and what a build of it needs.

rxl handles a 14 and a 15 tree by what the tree says, not by a flag. Three files
say it, each read as FreeBSD's own build reads it:

* ``sys/sys/param.h``: ``#define __FreeBSD_version 1500068`` (the Porter's
  Handbook encoding ``MMmmRxx``: major 15, minor 0). This is the version the
  harness goes by.
* ``sys/conf/newvers.sh``: ``TYPE``, ``REVISION``, ``BRANCH`` (``FreeBSD``,
  ``15.0``, ``RELEASE`` in a real tree). share/mk/src.sys.env.mk takes
  ``OS_REVISION`` from ``REVISION``, and Makefile.inc1 puts it in the target
  triple (``x86_64-unknown-freebsd${OS_REVISION}``); uname(1) and ``kern.ostype``
  show ``TYPE``. A tree whose ``TYPE`` is not ``FreeBSD`` is *rebranded*
  (:attr:`TreeVersion.rebranded`): the 15.0 snapshot says ``Irid 0.0.2-ALPHA``,
  its own numbering. A ``TYPE="FreeBSD"`` tree's ``REVISION`` must be the
  release ``__FreeBSD_version`` gives (``15.0`` for 1500068), or on a stable
  branch (release digit 5 or more, ``1400507``) that release or the next minor
  (``14.1-PRERELEASE``); any ``REVISION`` is ``N.N[.N]``, digits, as it goes into
  the target triple. A tree that contradicts itself (``FreeBSD 14.0`` over
  1500068, ``abc``) is refused (:func:`check_revision`), never taken as rebranded.
  Its target triple is then ``...-freebsd0.0.2``; clang 16 and 19 give the same
  driver flags for that triple as for ``freebsd15.0`` (compared with ``-###``,
  2026-12-01, docs/results/base15.md), so the build is left to say it.
* ``lib/clang/include/VCSVersion.inc``: ``#define LLVM_REVISION
  "llvmorg-19.1.7-..."``, the LLVM the tree's own compiler is (14.0-STABLE
  snapshot: 17.0.6; 15.0: 19.1.7).

The cross compiler (:func:`cross_llvm`) is the host's clang of the tree's own
LLVM major when Debian 12 has it, else the newest Debian 12 clang below it:
19 for 15.0 (Debian 12 has 19.1.7, the same release), 16 for the 14 base (17 is
not in Debian 12; every 14 build of this project used 16). Below 19 the 15 world
does not link: clang 16 has no ``__float128`` for FreeBSD targets, so
compiler-rt's tf-mode builtins compile to nothing and lib/libgcc_s fails
(``symbol not defined: __trunctfxf2``, measured 2026-12-01).

Below :data:`KMOD_SSP_LLVM` (so for the 14 base, built with clang 16) a kernel
with modules is built without the stack protector
(:data:`rxl.tree.build.NO_SSP_MAKE_VARS`): such a clang reaches
``__stack_chk_guard`` through the GOT even under ``-mcmodel=kernel``, and the
kernel linker cannot load the module.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from rxl.errors import SourceError, show
from rxl.tree import patch as tree_patch

PARAM_H = "sys/sys/param.h"
NEWVERS = "sys/conf/newvers.sh"
VCS_VERSION = "lib/clang/include/VCSVersion.inc"
#: clang majors Debian 12 (bookworm main) packages as clang-N (apt-cache policy,
#: 2026-12-01; clang-19 came with a point release).
DEBIAN_CLANGS: Sequence[int] = (14, 15, 16, 19)
#: The cross compiler for a tree that names no LLVM version and whose release
#: is not in :data:`RELEASE_LLVM` (nor a tree that says no release at all): the
#: 14 base's. A 14 or 15 tree that names no LLVM gets its release's own
#: (:attr:`TreeVersion.cross_llvm`: 15 -> 19, 14 -> 16).
FALLBACK_LLVM = 16
#: The LLVM each release's own tree names (lib/clang/include/VCSVersion.inc of
#: 14.0-RELEASE and 15.0-RELEASE): what a tree not fetched yet is assumed to name.
RELEASE_LLVM = {14: (16, 0, 6), 15: (19, 1, 7)}
#: The first Debian 12 clang whose kernel modules load with ``-fstack-protector``
#: (kern.mk's for ``MK_SSP``). LLVM's insertSSPDeclarations left
#: ``__stack_chk_guard`` not dso_local on every FreeBSD target until llvm-project
#: PR #86665 ("[FreeBSD] Mark __stack_chk_guard dso_local except for PPC64", merged
#: 2024-03-26, in LLVM 19; FreeBSD's own clang had it as a local change, which the
#: 14 tree's 17.0.6 carries). clang 16 therefore loads the guard with
#: ``movq __stack_chk_guard@GOTPCREL(%rip)`` in static code too: relocation
#: ``R_X86_64_REX_GOTPCRELX`` (42), which ``ld -r`` (kmod.mk) leaves in the .ko and
#: sys/amd64/amd64/elf_machdep.c does not handle ("kldload: unexpected relocation
#: type 42", the 14 module boot, 2026-12-04). clang 19: ``R_X86_64_PC32``
#: (measured 2026-12-06 with kern.mk's amd64 flags, docs/results/base15.md).
KMOD_SSP_LLVM = 19

_FREEBSD_VERSION = re.compile(r"^#define[ \t]+__FreeBSD_version[ \t]+(\d+)", re.M)
_NEWVERS_VAR = r'^{}="([^"\n]*)"'
_LLVM_REVISION = re.compile(r'#define[ \t]+LLVM_REVISION[ \t]+"llvmorg-(\d+)\.(\d+)\.(\d+)')


class VersionError(SourceError):
    """The tree does not say which FreeBSD it is (one line naming the file)."""


@dataclass(frozen=True)
class TreeVersion:
    """What a tree says about itself.

    ``freebsd_version``: ``__FreeBSD_version`` (int, ``MMmmRxx``); ``type``,
    ``revision``, ``branch``: newvers.sh's variables as written; ``llvm``: the
    tree's own LLVM (major, minor, patch), or None when the tree does not say.
    """

    freebsd_version: int
    type: str = "FreeBSD"
    revision: str = ""
    branch: str = ""
    llvm: Optional[tuple] = None
    #: Not read from a tree: the version patches/BASE names, for a tree not fetched
    #: yet (:func:`planned_version`).
    assumed: bool = False

    @property
    def major(self) -> int:
        """15 for 1500068."""
        return self.freebsd_version // 100000

    @property
    def minor(self) -> int:
        """0 for 1500068 (the two digits after the major)."""
        return (self.freebsd_version // 1000) % 100

    @property
    def release(self) -> str:
        """``"15.0"``: the release ``__FreeBSD_version`` names."""
        return f"{self.major}.{self.minor}"

    @property
    def rebranded(self) -> bool:
        """newvers.sh's ``TYPE`` is not ``FreeBSD`` (a ``FreeBSD`` tree's
        ``REVISION`` agrees with ``__FreeBSD_version``: :func:`check_revision`)."""
        return self.type != "FreeBSD"

    @property
    def release_llvm(self) -> Optional[int]:
        """The LLVM major of the tree's own compiler: named by VCSVersion.inc, else
        its release's (:data:`RELEASE_LLVM`), else None."""
        if self.llvm:
            return self.llvm[0]
        named = RELEASE_LLVM.get(self.major)
        return named[0] if named else None

    @property
    def target_triple(self) -> str:
        """The triple of a real tree of this release (``x86_64-unknown-freebsd15.0``),
        for what the harness compiles itself (the ATF programs, OpenSSH's configure)."""
        return f"x86_64-unknown-freebsd{self.release}"

    @property
    def cross_llvm(self) -> int:
        """The host clang major that builds this tree (:func:`cross_llvm`)."""
        return cross_llvm(self.release_llvm)

    @property
    def cross_bindir(self) -> str:
        """make.py's ``--cross-bindir``: ``/usr/lib/llvm-<N>/bin`` (Debian's layout)."""
        return f"/usr/lib/llvm-{self.cross_llvm}/bin"

    def describe(self) -> str:
        """One line: ``FreeBSD 15.0 (__FreeBSD_version 1500068, LLVM 19.1.7; newvers.sh
        says Irid 0.0.2-ALPHA: rebranded)``; an assumed one says where from."""
        llvm = ".".join(map(str, self.llvm)) if self.llvm else "not named"
        if not self.llvm and self.major in RELEASE_LLVM:
            llvm += f", {self.major}'s own {'.'.join(map(str, RELEASE_LLVM[self.major]))} assumed"
        if self.assumed:
            return (f"FreeBSD {self.release} (__FreeBSD_version {self.freebsd_version} "
                    f"assumed from patches/BASE, the tree not fetched yet; LLVM {llvm}, "
                    f"{self.release}'s own)")
        said = f"{self.type} {self.revision}-{self.branch}".strip("-")
        brand = f"; newvers.sh says {said}: rebranded" if self.rebranded else ""
        return (f"FreeBSD {self.release} (__FreeBSD_version {self.freebsd_version}, "
                f"LLVM {llvm}{brand})")


def cross_llvm(tree_llvm: Optional[int], available: Sequence[int] = DEBIAN_CLANGS) -> int:
    """The clang major for a tree whose own LLVM major is ``tree_llvm``.

    ``tree_llvm`` itself when ``available`` has it, else the newest below it
    (17 -> 16), else the oldest available above it; None (the tree does not say):
    :data:`FALLBACK_LLVM`. Raises ValueError when ``available`` is empty.
    """
    if not available:
        raise ValueError("cross_llvm: no clang versions to choose from")
    if tree_llvm is None:
        return FALLBACK_LLVM
    if tree_llvm in available:
        return tree_llvm
    below = [v for v in available if v < tree_llvm]
    return max(below) if below else min(available)


def parse_param_h(text: str) -> Optional[int]:
    """``__FreeBSD_version`` of a ``sys/sys/param.h`` text, or None."""
    m = _FREEBSD_VERSION.search(text)
    return int(m.group(1)) if m else None


def parse_newvers(text: str) -> dict:
    """``TYPE``, ``REVISION``, ``BRANCH`` as newvers.sh assigns them (``NAME="value"``
    at the start of a line, the first assignment); absent ones are missing."""
    out = {}
    for name in ("TYPE", "REVISION", "BRANCH"):
        m = re.search(_NEWVERS_VAR.format(name), text, re.M)
        if m:
            out[name] = m.group(1)
    return out


def parse_vcs_version(text: str) -> Optional[tuple]:
    """(major, minor, patch) of ``LLVM_REVISION "llvmorg-X.Y.Z..."``, or None."""
    m = _LLVM_REVISION.search(text)
    return tuple(int(g) for g in m.groups()) if m else None


#: The __FreeBSD_version a release may have: the Porter's Handbook's
#: ``MMmmRxx`` (major, minor, a release digit, two revision digits) is 6 or 7
#: digits (FreeBSD 2.0 was 199411; 10.0 1000510), majors up to 99.
MIN_FREEBSD_VERSION, MAX_FREEBSD_VERSION = 100000, 9999999
#: newvers.sh's variables a tree must assign to say its release.
NEWVERS_NEEDS = ("TYPE", "REVISION")

#: Largest version file read, bytes: param.h is some 15 KiB, newvers.sh 10 KiB.
MAX_FILE_BYTES = 1 << 20


def _kind(mode: int) -> str:
    """What a file that is not a regular one is, for a message."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def _read_file(path: Path, required: bool) -> Optional[str]:
    """The text of one version file of a tree, or None if it is missing and not
    ``required``.  The file is looked at (``stat``, links followed) before it is
    opened: one that is not a regular file (a FIFO would block the open and the
    read for ever, /dev/zero never ends) or is over :data:`MAX_FILE_BYTES` is
    refused with :class:`VersionError`, as is a missing or unreadable required one."""
    try:
        st = os.stat(path)
    except OSError as exc:
        if not required and not os.path.lexists(path):
            return None
        raise VersionError(f"{path}: cannot read it ({exc.strerror}): "
                           "not a FreeBSD source tree") from None
    if not stat.S_ISREG(st.st_mode):
        raise VersionError(f"{path}: {_kind(st.st_mode)}, not a regular file: not a "
                           "FreeBSD source tree")
    if st.st_size > MAX_FILE_BYTES:
        raise VersionError(f"{path}: {st.st_size} bytes, over the {MAX_FILE_BYTES} of any "
                           "FreeBSD tree's: not a FreeBSD source tree")
    try:
        with open(path, "rb") as f:
            return f.read(MAX_FILE_BYTES + 1).decode("utf-8", errors="replace")
    except OSError as exc:
        raise VersionError(f"{path}: cannot read it ({exc.strerror}): "
                           "not a FreeBSD source tree") from None


_REVISION = re.compile(r"(\d{1,3})\.(\d{1,3})(?:\.\d{1,3})?")


def check_revision(fv: int, type_: str, revision: str, param_h: Path,
                   newvers: Path) -> None:
    """Refuse a newvers.sh ``REVISION`` that contradicts ``__FreeBSD_version``
    (:class:`VersionError`, one line naming both files): one that is not
    ``N.N[.N]`` in any tree; in a ``TYPE="FreeBSD"`` tree, one that is not the
    release (``MMmm`` of ``MMmmRxx``), or on a stable branch (``R`` >= 5) that
    release or the next minor. An empty one (not assigned) is left to
    :func:`require_release`."""
    if not revision:
        return
    major, minor, r = fv // 100000, (fv // 1000) % 100, (fv // 100) % 10
    release = f"{major}.{minor}"
    m = _REVISION.fullmatch(revision)
    said = f"{newvers} says {show(type_, 24)} {show(revision, 24)}"
    if m is None:
        raise VersionError(f"{said}, no release (N.N), and {param_h} __FreeBSD_version "
                           f"{fv} ({release}): the tree contradicts itself")
    if type_ != "FreeBSD":
        return  # rebranded: its own numbering (Irid 0.0.2 over 1500068)
    ok = {(major, minor)} | ({(major, minor + 1)} if r >= 5 else set())
    if (int(m.group(1)), int(m.group(2))) not in ok or m.group(0).count(".") > 1:
        also = f" (or {major}.{minor + 1} on its stable branch)" if r >= 5 else ""
        raise VersionError(f"{said}, but {param_h} __FreeBSD_version {fv} is "
                           f"{release}{also}: the tree contradicts itself")


def read_version(src: str) -> TreeVersion:
    """What ``src`` says it is. Raises :class:`VersionError` (one line naming the
    file) when param.h is missing or names no ``__FreeBSD_version``, when
    newvers.sh's ``REVISION`` contradicts it (:func:`check_revision`), or when a
    version file that is there is no regular file (never opened then: a FIFO
    would block); newvers.sh and VCSVersion.inc may be missing (their fields
    are then empty / None)."""
    root = Path(src)
    text = _read_file(root / PARAM_H, required=True)
    fv = parse_param_h(text)
    if fv is None:
        raise VersionError(f"{root / PARAM_H}: no #define __FreeBSD_version")
    if not MIN_FREEBSD_VERSION <= fv <= MAX_FREEBSD_VERSION:
        raise VersionError(f"{root / PARAM_H}: __FreeBSD_version {show(fv, 24)} is no "
                           f"release's (MMmmRxx: {MIN_FREEBSD_VERSION}..."
                           f"{MAX_FREEBSD_VERSION})")
    newvers = _read_file(root / NEWVERS, required=False)
    nv = parse_newvers(newvers) if newvers is not None else {}
    check_revision(fv, nv.get("TYPE", ""), nv.get("REVISION", ""), root / PARAM_H,
                   root / NEWVERS)
    vcs = _read_file(root / VCS_VERSION, required=False)
    llvm = parse_vcs_version(vcs) if vcs is not None else None
    return TreeVersion(fv, nv.get("TYPE", ""), nv.get("REVISION", ""), nv.get("BRANCH", ""),
                       llvm)


def require_release(src: str, why: str) -> TreeVersion:
    """:func:`read_version` of ``--src``, for a command whose build depends on the
    release, with newvers.sh required to assign :data:`NEWVERS_NEEDS` (the
    target triple's revision): raises :class:`VersionError` ``--src SRC: the tree says no release
    (WHAT), and WHY`` (one line; the CLI's exit 2) instead of guessing one."""
    try:
        v = read_version(src)
        newvers = Path(src) / NEWVERS
        if not newvers.exists():
            raise VersionError(f"{newvers}: no such file: not a FreeBSD source tree")
        missing = [n for n in NEWVERS_NEEDS if not getattr(v, n.lower())]
        if missing:
            raise VersionError(f"{newvers}: assigns no {' or '.join(missing)} "
                               '(NAME="value" at the start of a line)')
        return v
    except VersionError as exc:
        raise VersionError(f"--src {src}: the tree says no release ({exc}), and "
                           f"{why}") from None


def version_or_none(src: str) -> Optional[TreeVersion]:
    """:func:`read_version`, or None for a path that is no readable tree (dry runs
    and plans of a tree not there yet)."""
    try:
        return read_version(src)
    except VersionError:
        return None


def base_version(patches_dir: Optional[Path] = None) -> Optional[TreeVersion]:
    """The version of the series' base as ``patches_dir/BASE`` (default the run's,
    :data:`rxl.tree.base.REPO_PATCHES`) names it: its ``__FreeBSD_version``, that
    release's LLVM (:data:`RELEASE_LLVM`), :attr:`TreeVersion.assumed`. None when
    BASE cannot be read."""
    if patches_dir is None:
        from rxl.tree import base as tree_base  # it imports this module
        patches_dir = tree_base.REPO_PATCHES
    try:
        base = tree_patch.read_base(Path(patches_dir))
    except tree_patch.SeriesError:
        return None
    fv = int(base.freebsd_version)
    major, minor = fv // 100000, (fv // 1000) % 100
    return TreeVersion(fv, "FreeBSD", f"{major}.{minor}", "RELEASE", RELEASE_LLVM.get(major),
                       assumed=True)


def planned_version(src: Optional[str]) -> Optional[TreeVersion]:
    """What ``src`` says it is (:func:`version_or_none`), or, for a tree that is not
    there yet (the base a dry run plans to fetch, its work clone), the version
    patches/BASE names (:func:`base_version`): a fetched base is that commit, so a
    plan made before the fetch is the plan of the release it will be. None for a
    tree that is there and says nothing."""
    v = version_or_none(src) if src else None
    if v is None and (not src or not Path(src).exists()):
        return base_version()
    return v


def cross_llvm_of(src: str) -> int:
    """The clang major ``src`` is built with: its :attr:`TreeVersion.cross_llvm` (for a
    tree not there yet, patches/BASE's release's: :func:`planned_version`), or
    :data:`FALLBACK_LLVM` when the tree says nothing."""
    v = planned_version(src)
    return v.cross_llvm if v else FALLBACK_LLVM


def cross_bindir_of(src: str) -> str:
    """``--cross-bindir`` for ``src``: its :attr:`TreeVersion.cross_bindir` (for a
    tree not there yet, patches/BASE's release's: :func:`planned_version`), or the
    fallback's when the tree says nothing."""
    v = planned_version(src)
    return v.cross_bindir if v else f"/usr/lib/llvm-{FALLBACK_LLVM}/bin"

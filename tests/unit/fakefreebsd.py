"""A FreeBSD-shaped git repository and a one-patch series on it, for tests of
the tree stage (rxl.tree.base) and of rxl run with a tree that needs the series."""

import struct
import re
import subprocess
from pathlib import Path

from rxl.tree import patch as S

#: A kernel's newvers.sh strings, sccs[] then version[] (rxl.tree.elf.kernel_version).
VERSION_TAIL = (b"\0@(#)FreeBSD 15.0-RELEASE #0: Thu Dec  3 00:00:00 UTC 2026\n"
                b"\0FreeBSD 15.0-RELEASE #0: Thu Dec  3 00:00:00 UTC 2026\n")


def kernel_bytes(osabi: int = 9, machine: int = 62, etype: int = 2, bits: int = 64,
                 note: bool = False, tail: bytes = VERSION_TAIL) -> bytes:
    """A stand-in FreeBSD amd64 kernel as rxl.tree.build.check_kernel_file reads one:
    an ELF64 LSB header (``etype``: 2 ET_EXEC; ``machine``: 62 EM_X86_64;
    ``osabi``: 9 ELFOSABI_FREEBSD, as ld -m elf_x86_64_fbsd writes it) and, with
    ``note``, one PT_NOTE holding the FreeBSD ABI tag (owner "FreeBSD", type 1,
    __FreeBSD_version 1500068); ``tail`` follows (default a kernel's version
    strings, :data:`VERSION_TAIL`; ``b""`` for a header alone)."""
    ident = b"\x7fELF" + bytes([2 if bits == 64 else 1, 1, 1, osabi]) + bytes(8)
    tag = struct.pack("<III", 8, 4, 1) + b"FreeBSD\x00" + struct.pack("<I", 1500068)
    phoff, ehsize = (64, 64) if bits == 64 else (52, 52)
    phnum = 1 if note else 0
    phsize = 56 if bits == 64 else 32
    noteoff = phoff + phsize * phnum
    if bits == 64:
        hdr = ident + struct.pack("<HHIQQQIHHHHHH", etype, machine, 1, 0x200000,
                                  phoff if note else 0, 0, 0, ehsize, phsize, phnum, 64, 0, 0)
        ph = struct.pack("<IIQQQQQQ", 4, 4, noteoff, 0, 0, len(tag), len(tag), 4)
    else:
        hdr = ident + struct.pack("<HHIIIIIHHHHHH", etype, machine, 1, 0x200000,
                                  phoff if note else 0, 0, 0, ehsize, phsize, phnum, 40, 0, 0)
        ph = struct.pack("<IIIIIIII", 4, noteoff, 0, 0, len(tag), len(tag), 4, 4)
    return hdr + (ph + tag if note else b"") + tail


GIT = ["git", "-c", "user.email=t@example.org", "-c", "user.name=T"]


def _git(d, *args):
    return subprocess.run(GIT + ["-C", str(d), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


#: What the version files say in the two bases (sys/sys/param.h, sys/conf/newvers.sh,
#: lib/clang/include/VCSVersion.inc): the 14.0-STABLE snapshot and the rebranded 15.0 one.
VERSIONS = {
    14: dict(fv=1400507, type="FreeBSD", revision="14.0", branch="STABLE", llvm="17.0.6"),
    15: dict(fv=1500068, type="Irid", revision="0.0.2", branch="ALPHA", llvm="19.1.7"),
}


def version_files(path: Path, major: int = 14, **over) -> None:
    """Write the three files rxl.tree.version reads, as the ``major`` base has them
    (``over`` replaces fields of :data:`VERSIONS`)."""
    v = dict(VERSIONS[major], **over)
    (path / "sys/sys").mkdir(parents=True, exist_ok=True)
    (path / "sys/sys/param.h").write_text(
        "/* param.h */\n#undef __FreeBSD_version\n"
        f"#define __FreeBSD_version {v['fv']}\n")
    (path / "sys/conf").mkdir(parents=True, exist_ok=True)
    (path / "sys/conf/newvers.sh").write_text(
        f'#!/bin/sh\nTYPE="{v["type"]}"\nREVISION="{v["revision"]}"\n'
        f'BRANCH="{v["branch"]}"\nif [ -n "${{BRANCH_OVERRIDE}}" ]; then\n'
        '\tBRANCH=${BRANCH_OVERRIDE}\nfi\n')
    (path / "lib/clang/include").mkdir(parents=True, exist_ok=True)
    (path / "lib/clang/include/VCSVersion.inc").write_text(
        f'#define LLVM_REVISION "llvmorg-{v["llvm"]}-0-g6009708b4367"\n')


def plain_tree(path: Path, major: int = 0, kernconf: str = "") -> Path:
    """A directory that passes for a FreeBSD amd64 source tree (tools/build/make.py,
    sys/amd64/conf/), not a git clone: with :func:`version_files` of ``major``
    (0: none) and a ``kernconf`` file of that name (empty: none). Returns path."""
    (path / "tools/build").mkdir(parents=True)
    (path / "tools/build/make.py").write_text("# make.py\n")
    (path / "sys/amd64/conf").mkdir(parents=True)
    if kernconf:
        (path / "sys/amd64/conf" / kernconf).write_text(f"ident {kernconf}\n")
    if major:
        version_files(path, major=major)
    return path


def _tree(path: Path, salt: str = "", major: int = 0) -> str:
    """A FreeBSD-shaped git repo at ``path``; returns its base commit. ``major`` 14 or
    15: with that base's version files (:func:`version_files`)."""
    (path / "tools/build").mkdir(parents=True)
    (path / "tools/build/make.py").write_text("# make.py\n" + salt)
    (path / "sys/amd64/conf").mkdir(parents=True)
    (path / "sys/amd64/conf/GENERIC").write_text("ident GENERIC\n")
    (path / "sys/kern").mkdir()
    (path / "sys/kern/kern_x.c").write_text("int x;\n")
    if major:
        version_files(path, major)
    subprocess.run(GIT + ["init", "-q", "-b", "main", str(path)], check=True)
    _git(path, "add", ".")
    _git(path, "commit", "-qm", "base")
    return _git(path, "rev-parse", "HEAD")


def _series(tmp_path: Path, src: Path, base: str, text: str = "int y;\n") -> Path:
    """patches/ with BASE = ``base`` and one patch adding sys/kern/kern_y.c."""
    scratch = tmp_path / "scratch"
    subprocess.run(GIT + ["clone", "-q", str(src), str(scratch)], check=True)
    _git(scratch, "checkout", "-q", base)
    (scratch / "sys/kern/kern_y.c").write_text(text)
    _git(scratch, "add", ".")
    _git(scratch, "commit", "-qm", "kern: Add y\n\nWhy: a test.")
    patches = tmp_path / "patches"
    patches.mkdir(exist_ok=True)
    for p in patches.glob("*.patch"):
        p.unlink()
    _git(scratch, "format-patch", "-q", "--zero-commit", "-o", str(patches), "HEAD~1")
    # BASE records the base commit's own __FreeBSD_version (rxl series checks it)
    param = subprocess.run(GIT + ["-C", str(src), "show", f"{base}:sys/sys/param.h"],
                           capture_output=True, text=True)
    fv = re.search(r"__FreeBSD_version (\d+)", param.stdout) if param.returncode == 0 \
        else None
    (patches / "BASE").write_text(S.Base("owner/repo", base,
                                         fv.group(1) if fv else "1400507").text())
    subprocess.run(["rm", "-rf", str(scratch)], check=True)
    return patches

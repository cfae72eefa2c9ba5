"""A FreeBSD-shaped git repository and a one-patch series on it, for tests of
the tree stage (rxl.tree.base) and of rxl run with a tree that needs the series."""

import subprocess
from pathlib import Path

from rxl.tree import patch as S

GIT = ["git", "-c", "user.email=t@example.org", "-c", "user.name=T"]


def _git(d, *args):
    return subprocess.run(GIT + ["-C", str(d), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def _tree(path: Path, salt: str = "") -> str:
    """A FreeBSD-shaped git repo at ``path``; returns its base commit."""
    (path / "tools/build").mkdir(parents=True)
    (path / "tools/build/make.py").write_text("# make.py\n" + salt)
    (path / "sys/amd64/conf").mkdir(parents=True)
    (path / "sys/amd64/conf/GENERIC").write_text("ident GENERIC\n")
    (path / "sys/kern").mkdir()
    (path / "sys/kern/kern_x.c").write_text("int x;\n")
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
    (patches / "BASE").write_text(S.Base("owner/repo", base, "1400507").text())
    subprocess.run(["rm", "-rf", str(scratch)], check=True)
    return patches

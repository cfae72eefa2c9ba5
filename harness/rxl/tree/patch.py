"""The patch series as text: parse, reconstruct, check against the project. Pure.

Parses ``git format-patch`` files (mail header, message, per-file hunks),
reconstructs the content the series gives to the files it adds, checks
that content equals the project's ``sys/`` and ``tests/atf/``, and reads
``patches/BASE``.  Needs no FreeBSD tree, so CI runs all of it.  Errors:
:class:`SeriesError`, one line, user-facing.
"""

from __future__ import annotations

import email.header
import email.utils
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional, Sequence

from rxl.cli.options import file_kind
from rxl.errors import SourceError, show

#: Where the series puts the project's ATF tests in a FreeBSD tree.
ATF_DEST = "tests/sys/netinet"
#: Files the series adds that hold FreeBSD's code, not the project's: 0002
#: moves the lbgroup code out of in_pcb.c into its own file (no functional
#: change), and later commits add to it.  They live in patches/ only; the
#: project keeps in sys/ only files it wrote (docs/design.md, "One copy of
#: the C").
NOT_MIRRORED = frozenset({"sys/netinet/in_pcblb.c"})


class SeriesError(SourceError):
    """A one-line, user-facing error (bad patch, dirty tree, git failure)."""


# --------------------------------------------------------------------------
# The author and the copyright line of the files the series adds.

#: The holder the project's own files name (``sys/``, ``tests/atf/``) until
#: ``rxl series export --author`` names a person.
PROJECT_HOLDER = "The rxl project"
#: The copyright line of a file the project wrote (style(9)'s license
#: header): `` * Copyright (c) YEAR[-YEAR] HOLDER``.
_COPYRIGHT_RE = re.compile(r"^( \* Copyright \(c\) \d{4}(?:-\d{4})?) (.+)$", re.M)
#: ``Name <local@domain.tld>``, as git and FreeBSD's copyright lines write an author.
_AUTHOR_RE = re.compile(r"([^<>@]*[^<>@\s]) <([^<>@\s]+@[^<>@\s.]+(?:\.[^<>@\s.]+)+)>")


def parse_author(text: str) -> tuple[str, str]:
    """``"Name <email>"`` -> ``(name, email)``. Raises :class:`SeriesError`
    (one line) unless it is one line of a name with a letter in it and no
    ``<``, ``>`` or ``@``, one space, and ``<local@domain.tld>``."""
    m = _AUTHOR_RE.fullmatch(text)
    if m is None or not any(c.isalpha() for c in m.group(1)) or m.group(1)[0].isspace() or \
            any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise SeriesError(f"'{show(text)}' is not an author: give 'Name <local@domain.tld>', "
                          "one line (as git writes it)")
    return m.group(1), m.group(2)


def set_copyright(text: str, holder: str, *, was: str = PROJECT_HOLDER) -> str:
    """``text`` with the holder of every copyright line naming ``was`` set to
    ``holder`` (the year kept); lines naming anyone else are left as they are."""
    return _COPYRIGHT_RE.sub(lambda m: f"{m.group(1)} {holder}" if m.group(2) == was
                             else m.group(0), text)


@dataclass
class Hunk:
    """One ``@@ -a,b +c,d @@`` hunk: old start/length, new start/length,
    and its lines, each with its ``' '``, ``'-'`` or ``'+'`` prefix kept."""

    old_start: int
    old_len: int
    new_start: int
    new_len: int
    lines: list[str] = field(default_factory=list)
    #: True when the new side's last line has no newline at end of file.
    new_no_eol: bool = False


@dataclass
class FileDiff:
    """The change one patch makes to one file."""

    old_path: Optional[str]
    new_path: Optional[str]
    new_file: bool = False
    deleted: bool = False
    binary: bool = False
    hunks: list[Hunk] = field(default_factory=list)

    @property
    def path(self) -> str:
        """The file's path after the change (before, for a deletion)."""
        return self.new_path or self.old_path or ""

    def added_content(self) -> str:
        """The whole content of a new file, as the patch adds it.

        Raises :class:`SeriesError` if the file is not new.
        """
        if not self.new_file:
            raise SeriesError(f"{self.path}: not added by this patch")
        return apply_hunks("", self.hunks, self.path)


@dataclass
class Patch:
    """One ``git format-patch`` file: who, when, the message, the diffs."""

    name: str
    author_name: str
    author_email: str
    date: str
    subject: str
    body: str
    files: list[FileDiff] = field(default_factory=list)

    def file(self, path: str) -> Optional[FileDiff]:
        """The diff of ``path`` in this patch, or None."""
        for f in self.files:
            if f.path == path:
                return f
        return None


def _decode_header(value: str) -> str:
    parts = email.header.decode_header(value)
    out = []
    for text, charset in parts:
        if isinstance(text, bytes):
            out.append(text.decode(charset or "utf-8", errors="replace"))
        else:
            out.append(text)
    return "".join(out)


_HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def parse_diff(lines: Sequence[str]) -> list[FileDiff]:
    """Parse the ``diff --git`` sections of a patch into :class:`FileDiff`.

    ``lines`` are the patch's lines without line terminators, starting
    anywhere before the first ``diff --git``.  Raises :class:`SeriesError`
    on a hunk whose line counts do not match its header.
    """
    files: list[FileDiff] = []
    cur: Optional[FileDiff] = None
    hunk: Optional[Hunk] = None
    old_left = new_left = 0
    last_side = ""
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("diff --git "):
            m = re.match(r"^diff --git a/(.*) b/(.*)$", line)
            if not m:
                raise SeriesError(f"unparseable diff header: {line!r}")
            cur = FileDiff(old_path=m.group(1), new_path=m.group(2))
            files.append(cur)
            hunk = None
        elif cur is not None and hunk is None and not line.startswith("@@"):
            if line.startswith("new file mode"):
                cur.new_file = True
            elif line.startswith("deleted file mode"):
                cur.deleted = True
            elif line.startswith("--- "):
                p = line[4:]
                cur.old_path = None if p == "/dev/null" else p[2:]
            elif line.startswith("+++ "):
                p = line[4:]
                cur.new_path = None if p == "/dev/null" else p[2:]
            elif line.startswith("Binary files") or line == "GIT binary patch":
                cur.binary = True
        elif cur is not None and line.startswith("@@"):
            m = _HUNK_RE.match(line)
            if not m:
                raise SeriesError(f"{cur.path}: bad hunk header {line!r}")
            hunk = Hunk(int(m.group(1)), int(m.group(2) or 1),
                        int(m.group(3)), int(m.group(4) or 1))
            cur.hunks.append(hunk)
            old_left, new_left = hunk.old_len, hunk.new_len
        elif hunk is not None and cur is not None:
            if line.startswith("\\ No newline at end of file"):
                if last_side in ("+", " "):
                    hunk.new_no_eol = True
            elif old_left == 0 and new_left == 0:
                # End of the hunk: a trailer line ("-- ", version) or the
                # next section.
                hunk = None
                continue
            elif line[:1] in (" ", "-", "+") or line == "":
                side = line[:1] or " "
                hunk.lines.append(side + line[1:])
                last_side = side
                if side in (" ", "-"):
                    old_left -= 1
                if side in (" ", "+"):
                    new_left -= 1
                if old_left < 0 or new_left < 0:
                    raise SeriesError(f"{cur.path}: hunk longer than its "
                                      "header says")
            else:
                hunk = None
                continue
        i += 1
    for f in files:
        for h in f.hunks:
            n_old = sum(1 for x in h.lines if x[0] in " -")
            n_new = sum(1 for x in h.lines if x[0] in " +")
            if n_old != h.old_len or n_new != h.new_len:
                raise SeriesError(f"{f.path}: truncated hunk "
                                  f"@@ -{h.old_start},{h.old_len} "
                                  f"+{h.new_start},{h.new_len} @@")
    return files


def parse_patch(text: str, name: str = "<patch>") -> Patch:
    """Parse one ``git format-patch`` file.

    Returns a :class:`Patch` with the author, the subject without its
    ``[PATCH n/m]`` prefix, the message body (up to the ``---`` line) and
    the file diffs.  Raises :class:`SeriesError` when the mail header lacks
    ``From:`` or ``Subject:``.
    """
    lines = text.split("\n")
    headers: dict[str, str] = {}
    i = 0
    if lines and lines[0].startswith("From "):
        i = 1
    last = None
    while i < len(lines) and lines[i] != "":
        line = lines[i]
        if line[:1] in (" ", "\t") and last is not None:
            headers[last] += " " + line.strip()
        else:
            k, _, v = line.partition(":")
            last = k.strip().lower()
            headers[last] = v.strip()
        i += 1
    if "from" not in headers or "subject" not in headers:
        raise SeriesError(f"{name}: not a format-patch mail (no From/Subject)")
    author_name, author_email = email.utils.parseaddr(
        _decode_header(headers["from"]))
    subject = _decode_header(headers["subject"])
    subject = re.sub(r"^\[PATCH[^\]]*\]\s*", "", subject)
    i += 1
    body_lines = []
    while i < len(lines) and lines[i] != "---" and \
            not lines[i].startswith("diff --git "):
        body_lines.append(lines[i])
        i += 1
    body = "\n".join(body_lines).strip("\n")
    files = parse_diff(lines[i:])
    return Patch(name=name, author_name=author_name,
                 author_email=author_email, date=headers.get("date", ""),
                 subject=subject, body=body, files=files)


def apply_hunks(old: str, hunks: Sequence[Hunk], path: str = "<file>") -> str:
    """Apply unified-diff hunks to ``old`` and return the new text.

    Context and removed lines must match exactly at the stated positions
    (no fuzz).  Raises :class:`SeriesError` on a mismatch.
    """
    old_lines = old.split("\n")
    if old_lines and old_lines[-1] == "":
        old_lines.pop()
    out: list[str] = []
    pos = 0
    no_eol = False
    for h in hunks:
        start = h.old_start - 1 if h.old_len > 0 else h.old_start
        if start < pos:
            raise SeriesError(f"{path}: overlapping hunks")
        out.extend(old_lines[pos:start])
        pos = start
        for line in h.lines:
            side, text = line[0], line[1:]
            if side in (" ", "-"):
                if pos >= len(old_lines) or old_lines[pos] != text:
                    raise SeriesError(f"{path}: hunk at line {h.old_start} "
                                      "does not apply")
                pos += 1
            if side in (" ", "+"):
                out.append(text)
        no_eol = h.new_no_eol
    out.extend(old_lines[pos:])
    if not out:
        return ""
    return "\n".join(out) + ("" if no_eol and pos >= len(old_lines) else "\n")


def series_added_files(patches: Sequence[Patch]) -> dict[str, str]:
    """Final content of every file the series adds, by its path in the tree.

    A file added by one patch and changed by later ones gets the later
    changes applied.  A file deleted later is dropped.  Files the series
    only modifies are not included (their content depends on the base).
    """
    added: dict[str, str] = {}
    for p in patches:
        for f in p.files:
            if f.binary:
                continue
            if f.new_file:
                added[f.path] = f.added_content()
            elif f.deleted:
                added.pop(f.old_path or f.path, None)
            elif f.path in added:
                if f.old_path and f.old_path != f.new_path:
                    added[f.new_path or f.path] = added.pop(f.old_path)
                added[f.path] = apply_hunks(added[f.path], f.hunks, f.path)
    return added


def project_path_for(tree_path: str) -> Optional[str]:
    """The project file that must equal a file the series adds, or None.

    ``sys/...`` maps to itself, except :data:`NOT_MIRRORED`;
    ``tests/sys/netinet/NAME`` to ``tests/atf/NAME``.  Anything else is not
    mirrored in the project.
    """
    if tree_path in NOT_MIRRORED:
        return None
    if tree_path.startswith("sys/"):
        return tree_path
    if tree_path.startswith(ATF_DEST + "/") and tree_path.endswith(".c"):
        return "tests/atf/" + tree_path[len(ATF_DEST) + 1:]
    return None


def check_consistency(patches: Sequence[Patch], project: Path,
                      dirs: Iterable[str] = ("sys", "tests/atf")
                      ) -> list[str]:
    """Compare the project's ``sys/`` and ``tests/atf/`` with the series.

    Returns one problem string per mismatch: a project file that no patch
    adds, a file the series adds that the project lacks, or different
    content (the first differing line is named).  Empty list: consistent.
    """
    problems = []
    added = series_added_files(patches)
    # Exported with --author, the series' files name its author where the
    # project's name the project.
    authors = {f"{p.author_name} <{p.author_email}>" for p in patches}
    expected: dict[str, str] = {}
    for tree_path, content in added.items():
        proj = project_path_for(tree_path)
        if proj is not None:
            for who in authors:
                content = set_copyright(content, PROJECT_HOLDER, was=who)
            expected[proj] = content
    present: set[str] = set()
    for d in dirs:
        base = project / d
        if not base.is_dir():
            continue
        for p in sorted(base.rglob("*")):
            if p.is_file() and not p.name.startswith(".") and \
                    "__pycache__" not in p.parts:
                present.add(p.relative_to(project).as_posix())
    for rel in sorted(present - set(expected)):
        problems.append(f"{rel}: in the project but added by no patch")
    for rel in sorted(set(expected) - present):
        problems.append(f"{rel}: added by the series but missing from the "
                        "project")
    for rel in sorted(present & set(expected)):
        have = (project / rel).read_text(errors="replace")
        want = expected[rel]
        if have != want:
            hl, wl = have.split("\n"), want.split("\n")
            n = next((k for k in range(min(len(hl), len(wl)))
                      if hl[k] != wl[k]), min(len(hl), len(wl)))
            problems.append(f"{rel}: differs from the content its patch "
                            f"adds (first difference at line {n + 1})")
    return problems


@dataclass
class Base:
    """The tree the series applies to (``patches/BASE``)."""

    repository: str
    commit: str
    freebsd_version: str

    def text(self) -> str:
        """The ``BASE`` file's content."""
        return (f"repository: {self.repository}\ncommit: {self.commit}\n"
                f"__FreeBSD_version: {self.freebsd_version}\n")


def parse_base(text: str) -> Base:
    """Parse ``patches/BASE`` (``key: value`` lines).

    Raises :class:`SeriesError` if a key is missing or the commit is not 40
    hex digits.
    """
    kv = {}
    for line in text.splitlines():
        if ":" in line and not line.lstrip().startswith("#"):
            k, _, v = line.partition(":")
            kv[k.strip()] = v.strip()
    for k in ("repository", "commit", "__FreeBSD_version"):
        if k not in kv:
            raise SeriesError(f"BASE: no {k!r} line")
    if not re.fullmatch(r"[0-9a-f]{40}", kv["commit"]):
        raise SeriesError(f"BASE: commit {kv['commit']!r} is not a full "
                          "sha1")
    # sys/sys/param.h: seven digits, major * 100000 + minor * 1000 + patch level
    if not re.fullmatch(r"[1-9][0-9]{6}", kv["__FreeBSD_version"]):
        raise SeriesError(f"BASE: __FreeBSD_version {kv['__FreeBSD_version']!r} is not "
                          "a seven-digit __FreeBSD_version")
    return Base(kv["repository"], kv["commit"], kv["__FreeBSD_version"])


def read_base(patches_dir: Path) -> Base:
    """``patches_dir/BASE`` read and parsed (:func:`parse_base`). Raises
    :class:`SeriesError` naming the file in words: missing, not a file (a
    FIFO, whose open would wait for a writer, or a device: never opened),
    not readable, not UTF-8 text, or malformed."""
    path = Path(patches_dir) / "BASE"
    try:
        check_regular(path, "the series' BASE file")
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise SeriesError(f"{show(patches_dir)}: no BASE file (not the series' patches/)") \
            from None
    except IsADirectoryError:
        raise SeriesError(f"{show(path)}: a directory, not the series' BASE file") from None
    except OSError as exc:
        raise SeriesError(f"{show(path)}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise SeriesError(f"{show(path)}: not UTF-8 text") from None
    try:
        return parse_base(text)
    except SeriesError as exc:
        raise SeriesError(f"{show(path)}: {str(exc).removeprefix('BASE: ')}") from None


def check_regular(path: Path, noun: str) -> None:
    """Raise :class:`SeriesError` when ``path`` is there but no regular file:
    a FIFO (its open waits for a writer, for ever with none), a device (/dev/zero
    reads for ever), a socket; said to be what it is, before it is opened. A
    directory is left to the caller's words; a missing path to its open."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        raise SeriesError(f"{show(path)}: {file_kind(mode)}, not {noun}")


def patch_files(patches_dir: Path) -> list[Path]:
    """The series' patch files, in order (``NNNN-*.patch``), as absolute paths: they
    are handed to git run in another directory (``git -C SRC am``, ``apply``), where
    a relative ``--patches`` would name nothing."""
    return sorted(p for p in Path(os.path.abspath(patches_dir)).glob("*.patch")
                  if re.match(r"^\d{4}-", p.name))


def load_series(patches_dir: Path) -> list[Patch]:
    """Parse every patch of the series.  Raises :class:`SeriesError`."""
    files = patch_files(patches_dir)
    if not files:
        raise SeriesError(f"{patches_dir}: no NNNN-*.patch files")
    out = []
    for p in files:
        check_regular(p, "a patch file")
        try:
            text = p.read_text(errors="replace")
        except OSError as exc:
            raise SeriesError(f"{show(p)}: {exc.strerror}") from None
        out.append(parse_patch(text, p.name))
    return out


def touched_man_pages(patches: Sequence[Patch]) -> list[str]:
    """Paths of man pages (``*.[1-9]``) the series adds or changes."""
    out = []
    for p in patches:
        for f in p.files:
            if not f.deleted and re.search(r"\.[1-9]$", f.path) and \
                    f.path not in out:
                out.append(f.path)
    return out

"""The rxl patch series: parsing, checking, applying and exporting it.

``patches/`` holds the series as ``git format-patch`` output
(``0001-*.patch`` ...) and a ``BASE`` file naming the tree it applies to.
The pure part of this module parses patch text (mail header, message,
per-file hunks), reconstructs the content a patch series gives to the files
it adds, and checks commit messages; it needs no FreeBSD tree, so CI runs
it.  The impure part drives git in a source tree.

Facts this module relies on, and where they come from:

* Commit messages follow FreeBSD's committer's guide: a subject
  ``area: Summary`` shorter than 67 characters (:data:`SUBJECT_MAX`), a
  blank line, a body saying what and why, body lines of at most 72
  characters (:data:`BODY_LINE_MAX`), and trailers (``Reviewed by:``,
  ``Sponsored by:`` ...) only in the last paragraph.
* The files the series adds under ``sys/`` are the project's own copies in
  ``sys/`` (same path); the ATF tests in ``tests/atf/NAME`` are added as
  ``tests/sys/netinet/NAME`` (:data:`ATF_DEST`).
* The snapshot tree in ``/work/.mirror`` lacks the blobs of files of 4 MiB
  and more.  git refuses to write a tree that names a missing blob unless
  the repository has a promisor remote and the entry is marked
  skip-worktree (git's cache-tree.c); :func:`prepare_snapshot` does that
  for exactly the files whose blobs are absent, so ``git am`` works.
"""

from __future__ import annotations

import email.header
import email.utils
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional, Sequence

#: Subjects must be shorter than this (FreeBSD committer's guide).
SUBJECT_MAX = 67
#: Body lines wrap at 72 columns.
BODY_LINE_MAX = 72
#: Where the series puts the project's ATF tests in a FreeBSD tree.
ATF_DEST = "tests/sys/netinet"
#: Trailer keys used in FreeBSD commit messages (and git's common ones).
TRAILER_KEYS = (
    "Approved by", "Co-authored-by", "Differential Revision", "Discussed with",
    "Fixes", "MFC after", "MFC with", "Obtained from", "PR", "Pull Request",
    "Relnotes", "Reported by", "Requested by", "Reviewed by", "Security",
    "Signed-off-by", "Sponsored by", "Submitted by", "Tested by",
)
_TRAILER_RE = re.compile(r"^(%s):\s+\S" % "|".join(
    re.escape(k) for k in TRAILER_KEYS))
_SUBJECT_RE = re.compile(r"^([A-Za-z0-9_.+/-]+(?:, ?[A-Za-z0-9_.+/-]+)*): (\S.*)$")
#: Default branch the series is applied on.
DEFAULT_BRANCH = "rxl"


class SeriesError(Exception):
    """A one-line, user-facing error (bad patch, dirty tree, git failure)."""


# --------------------------------------------------------------------------
# Parsing (pure).

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

    ``sys/...`` maps to itself; ``tests/sys/netinet/NAME`` to
    ``tests/atf/NAME``.  Anything else is not mirrored in the project.
    """
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
    expected: dict[str, str] = {}
    for tree_path, content in added.items():
        proj = project_path_for(tree_path)
        if proj is not None:
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


# --------------------------------------------------------------------------
# Commit message rules (pure).

def split_paragraphs(body: str) -> list[list[str]]:
    """Split a message body into paragraphs (lists of lines)."""
    paras: list[list[str]] = [[]]
    for line in body.split("\n"):
        if line.strip() == "":
            if paras[-1]:
                paras.append([])
        else:
            paras[-1].append(line)
    return [p for p in paras if p]


def check_message(subject: str, body: str) -> list[str]:
    """Check one commit message against the series' rules.

    Returns the problems found (empty: the message is fine):

    * subject ``area: Summary`` with a lower-case-free-form area, the
      summary starting with a capital letter, no trailing period, shorter
      than :data:`SUBJECT_MAX` characters;
    * a non-empty body of at least one paragraph of prose (not only
      trailers), lines at most :data:`BODY_LINE_MAX` characters, URLs
      excepted;
    * trailers (:data:`TRAILER_KEYS`) only in the last paragraph, which
      then holds nothing else.
    """
    problems = []
    if "\n" in subject:
        problems.append("subject spans several lines")
    if len(subject) >= SUBJECT_MAX:
        problems.append(f"subject is {len(subject)} characters, must be "
                        f"under {SUBJECT_MAX}")
    m = _SUBJECT_RE.match(subject)
    if not m:
        problems.append("subject is not of the form 'area: Summary'")
    else:
        summary = m.group(2)
        if not summary[0].isupper():
            problems.append("summary after 'area: ' must start with a "
                            "capital letter")
        if summary.endswith("."):
            problems.append("subject ends with a period")
    paras = split_paragraphs(body)
    if not paras:
        problems.append("body is empty: say what and why")
        return problems
    for n, para in enumerate(paras):
        is_last = n == len(paras) - 1
        trailers = [ln for ln in para if _TRAILER_RE.match(ln)]
        if trailers and not is_last:
            problems.append(f"trailer {trailers[0].split(':')[0]!r} is not "
                            "in the last paragraph")
        if trailers and is_last and len(trailers) != len(para):
            problems.append("the trailer paragraph mixes trailers and prose")
    prose = [p for p in paras if not all(_TRAILER_RE.match(ln) for ln in p)]
    if not prose:
        problems.append("body has only trailers: say what and why")
    for ln in body.split("\n"):
        if len(ln) > BODY_LINE_MAX and "://" not in ln:
            problems.append(f"body line longer than {BODY_LINE_MAX} "
                            f"characters: {ln[:40]!r}...")
            break
    return problems


def check_authors(patches: Sequence[Patch],
                  identity: Optional[tuple[str, str]] = None) -> list[str]:
    """All patches by one author; that author is ``identity`` if given."""
    problems = []
    authors = {(p.author_name, p.author_email) for p in patches}
    if len(authors) > 1:
        problems.append("patches have different authors: " + ", ".join(
            f"{n} <{e}>" for n, e in sorted(authors)))
    if identity is not None:
        for p in patches:
            if (p.author_name, p.author_email) != identity:
                problems.append(f"{p.name}: author {p.author_name} "
                                f"<{p.author_email}> is not the configured "
                                f"identity {identity[0]} <{identity[1]}>")
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
    return Base(kv["repository"], kv["commit"], kv["__FreeBSD_version"])


def patch_files(patches_dir: Path) -> list[Path]:
    """The series' patch files, in order (``NNNN-*.patch``)."""
    return sorted(p for p in Path(patches_dir).glob("*.patch")
                  if re.match(r"^\d{4}-", p.name))


def load_series(patches_dir: Path) -> list[Patch]:
    """Parse every patch of the series.  Raises :class:`SeriesError`."""
    files = patch_files(patches_dir)
    if not files:
        raise SeriesError(f"{patches_dir}: no NNNN-*.patch files")
    return [parse_patch(p.read_text(errors="replace"), p.name) for p in files]


def touched_man_pages(patches: Sequence[Patch]) -> list[str]:
    """Paths of man pages (``*.[1-9]``) the series adds or changes."""
    out = []
    for p in patches:
        for f in p.files:
            if not f.deleted and re.search(r"\.[1-9]$", f.path) and \
                    f.path not in out:
                out.append(f.path)
    return out


# --------------------------------------------------------------------------
# Running git (impure).

def _git(src: Path, *args: str, check: bool = True,
         input: Optional[str] = None) -> subprocess.CompletedProcess:
    try:
        cp = subprocess.run(["git", "-C", str(src), *args], text=True,
                            capture_output=True, input=input)
    except FileNotFoundError:
        raise SeriesError("git is not installed")
    if check and cp.returncode != 0:
        msg = (cp.stderr.strip() or cp.stdout.strip()).splitlines()
        raise SeriesError(f"git {args[0]} failed in {src}: "
                          f"{msg[-1] if msg else 'exit ' + str(cp.returncode)}")
    return cp


def git_identity(repo: Optional[Path] = None) -> Optional[tuple[str, str]]:
    """``(user.name, user.email)`` from git's configuration, or None."""
    args = ["git"] + (["-C", str(repo)] if repo else []) + ["config"]
    try:
        name = subprocess.run(args + ["user.name"], text=True,
                              capture_output=True).stdout.strip()
        mail = subprocess.run(args + ["user.email"], text=True,
                              capture_output=True).stdout.strip()
    except FileNotFoundError:
        return None
    return (name, mail) if name and mail else None


def missing_blob_paths(src: Path) -> list[str]:
    """Tracked files deleted from the work tree whose blobs git lacks.

    These are the snapshot's absent large files, not local changes.
    """
    cp = _git(src, "ls-files", "--deleted", "-s", check=False)
    if cp.returncode != 0:
        return []
    entries = []
    for line in cp.stdout.splitlines():
        meta, _, path = line.partition("\t")
        parts = meta.split()
        if len(parts) >= 2:
            entries.append((parts[1], path))
    if not entries:
        return []
    # One batch query, never fetching: in a repository already declared a
    # partial clone every missing object would otherwise cost a fetch
    # attempt from the promisor remote (about 20 s each, measured).
    env = dict(os.environ, GIT_NO_LAZY_FETCH="1")
    bc = subprocess.run(["git", "-C", str(src), "cat-file", "--batch-check"],
                        input="".join(b + "\n" for b, _ in entries),
                        text=True, capture_output=True, env=env)
    missing = {ln.split()[0] for ln in bc.stdout.splitlines()
               if ln.endswith(" missing")}
    out: list[str] = []
    for blob, path in entries:
        # ls-files -s --deleted can list an entry twice; report it once.
        if blob in missing and path not in out:
            out.append(path)
    return out


def prepare_snapshot(src: Path, echo=print) -> list[str]:
    """Let git commit in a tree whose large blobs are absent.

    Rebuilds an empty index from HEAD (what a clone of the snapshot leaves
    behind), marks the files whose blobs are missing skip-worktree and, if
    there are any, declares ``origin`` a promisor remote (git then accepts
    the missing blobs when writing trees).  Returns the paths.  A complete
    tree is left untouched.
    """
    # A clone of the snapshot stops its checkout at the first missing blob:
    # every file is written but the index stays empty.  Rebuild the index
    # from HEAD; the work tree is not touched.
    if _git(src, "rev-parse", "--verify", "--quiet", "HEAD",
            check=False).returncode == 0:
        probe = subprocess.run(["git", "-C", str(src), "ls-files"],
                               stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL)
        if not probe.stdout.strip():
            _git(src, "read-tree", "HEAD")
            echo("note: the index was empty (the clone's checkout stopped "
                 "at a missing blob); rebuilt it from HEAD")
    paths = missing_blob_paths(src)
    if not paths:
        return []
    _git(src, "update-index", "--skip-worktree", "--", *paths)
    if _git(src, "config", "extensions.partialClone",
            check=False).stdout.strip() == "":
        _git(src, "config", "core.repositoryformatversion", "1")
        _git(src, "config", "extensions.partialClone", "origin")
        _git(src, "config", "remote.origin.promisor", "true")
    echo(f"note: {len(paths)} file(s) of the snapshot have no blob (e.g. "
         f"{paths[0]}); marked skip-worktree so git can commit")
    return paths


def dirty_paths(src: Path) -> list[str]:
    """Uncommitted changes to tracked files (skip-worktree ones ignored)."""
    cp = _git(src, "status", "--porcelain", "--untracked-files=no")
    return [ln[3:] for ln in cp.stdout.splitlines() if ln.strip()]


def ensure_git_tree(src: Path) -> None:
    """Raise :class:`SeriesError` unless ``src`` is a git work tree."""
    if not Path(src).is_dir():
        raise SeriesError(f"{src}: no such directory")
    cp = _git(src, "rev-parse", "--is-inside-work-tree", check=False)
    if cp.returncode != 0 or cp.stdout.strip() != "true":
        raise SeriesError(f"{src}: not a git work tree")


def _locked(argv: list[str], lock: Optional[Path]) -> list[str]:
    return ["flock", str(lock), *argv] if lock else argv


def apply_series(src: Path, patches_dir: Path, *,
                 branch: str = DEFAULT_BRANCH,
                 lock: Optional[Path] = None, echo=print) -> str:
    """Create ``branch`` at the recorded base and ``git am`` the series.

    Refuses (raising :class:`SeriesError`, changing nothing) when the tree
    has uncommitted changes, the base commit is unknown, or ``branch``
    already exists.  On a failed ``git am`` the am is aborted and the
    branch stays at the base; nothing is deleted.  Returns the new HEAD.
    """
    src = Path(src)
    ensure_git_tree(src)
    base = parse_base((Path(patches_dir) / "BASE").read_text())
    files = patch_files(patches_dir)
    if not files:
        raise SeriesError(f"{patches_dir}: no patches to apply")
    if _git(src, "cat-file", "-e", base.commit + "^{commit}",
            check=False).returncode != 0:
        raise SeriesError(f"{src}: base commit {base.commit[:12]} "
                          f"({base.repository}) is not in this repository")
    prepare_snapshot(src, echo)
    dirty = dirty_paths(src)
    if dirty:
        raise SeriesError(f"{src} has uncommitted changes ({len(dirty)} "
                          f"file(s), e.g. {dirty[0]}); commit or stash "
                          "them first")
    if _git(src, "rev-parse", "--verify", "--quiet", "refs/heads/" + branch,
            check=False).returncode == 0:
        raise SeriesError(f"branch {branch!r} already exists in {src}; "
                          "rename or delete it, or pass --branch")
    run = subprocess.run(_locked(["git", "-C", str(src), "checkout", "-q",
                                  "-b", branch, base.commit], lock),
                         text=True, capture_output=True)
    if run.returncode != 0:
        raise SeriesError(f"git checkout -b {branch} failed: "
                          f"{run.stderr.strip().splitlines()[-1:]}")
    run = subprocess.run(_locked(["git", "-C", str(src), "am", "-q",
                                  *map(str, files)], lock),
                         text=True, capture_output=True)
    if run.returncode != 0:
        subprocess.run(_locked(["git", "-C", str(src), "am", "--abort"],
                               lock), capture_output=True)
        last = (run.stderr.strip() or run.stdout.strip()).splitlines()
        raise SeriesError(f"git am failed ({last[0] if last else 'error'}); "
                          f"branch {branch} left at the base")
    head = _git(src, "rev-parse", "HEAD").stdout.strip()
    echo(f"applied {len(files)} patch(es) on {branch} in {src}: "
         f"{base.commit[:12]}..{head[:12]}")
    return head


def export_series(src: Path, patches_dir: Path, *,
                  branch: str = DEFAULT_BRANCH, echo=print) -> list[Path]:
    """Regenerate ``patches/NNNN-*.patch`` from ``base..branch``.

    Uses ``git format-patch --zero-commit --no-signature`` so that the
    files change only when the commits do.  Old patch files that the new
    series does not produce are removed (and named).  ``BASE`` is kept.
    Returns the written files.
    """
    src = Path(src)
    ensure_git_tree(src)
    patches_dir = Path(patches_dir)
    base = parse_base((patches_dir / "BASE").read_text())
    if _git(src, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}",
            check=False).returncode != 0:
        raise SeriesError(f"no branch {branch} in {src} (rxl series apply "
                          "creates it)")
    if _git(src, "cat-file", "-e", base.commit + "^{commit}",
            check=False).returncode != 0:
        raise SeriesError(f"{src}: base commit {base.commit[:12]} "
                          f"({base.repository}) is not in this repository")
    with tempfile.TemporaryDirectory() as tmp:
        _git(src, "format-patch", "-q", "--zero-commit", "--no-signature",
             "-o", tmp, f"{base.commit}..{branch}")
        new = sorted(Path(tmp).glob("*.patch"))
        if not new:
            raise SeriesError(f"{branch} has no commits over the base")
        written = []
        for p in new:
            dest = patches_dir / p.name
            shutil.copyfile(p, dest)
            written.append(dest)
    for old in patch_files(patches_dir):
        if old not in written:
            old.unlink()
            echo(f"removed stale {old.name}")
    echo(f"exported {len(written)} patch(es) to {patches_dir}")
    return written


def sync_project_files(src: Path, project: Path, *,
                       branch: str = DEFAULT_BRANCH,
                       lock: Optional[Path] = None, echo=print) -> list[str]:
    """Fold the project's current ``sys/`` and ``tests/atf/`` files into
    the commits of ``branch`` that add them.

    For every project file whose copy in the tree differs, the file is
    copied into the tree and committed as a ``fixup!`` of the commit that
    added it; one ``git rebase -i --autosquash`` (no editor) then folds the
    fixups in.  ``branch`` must be checked out and the tree clean.  Returns
    the tree paths updated (empty: nothing to do).  Raises
    :class:`SeriesError` when a file is added by no commit of the branch,
    or when git fails (a failed rebase is aborted, leaving the branch as it
    was).
    """
    src, project = Path(src), Path(project)
    ensure_git_tree(src)
    base = parse_base((project / "patches/BASE").read_text())
    head = _git(src, "rev-parse", "--abbrev-ref", "HEAD").stdout.strip()
    if head != branch:
        raise SeriesError(f"{src} is on {head!r}, not {branch!r}")
    if dirty_paths(src):
        raise SeriesError(f"{src} has uncommitted changes; commit or stash "
                          "them first")
    files = []
    for d in ("sys", "tests/atf"):
        for p in sorted((project / d).rglob("*")) if (project / d).is_dir() \
                else []:
            if p.is_file() and "__pycache__" not in p.parts:
                rel = p.relative_to(project).as_posix()
                tree = rel if rel.startswith("sys/") else \
                    f"{ATF_DEST}/{p.name}"
                files.append((p, tree))
    updated = []
    for p, tree in files:
        dest = src / tree
        if dest.is_file() and dest.read_bytes() == p.read_bytes():
            continue
        adder = _git(src, "log", "--diff-filter=A", "--format=%H",
                     f"{base.commit}..{branch}", "--", tree).stdout.split()
        if not adder:
            raise SeriesError(f"{tree}: added by no commit on {branch}")
        shutil.copyfile(p, dest)
        _git(src, "add", "--", tree)
        _git(src, "commit", "-q", f"--fixup={adder[-1]}", "--", tree)
        updated.append(tree)
        echo(f"{tree}: fixup of {adder[-1][:12]}")
    if not updated:
        echo("tree copies already equal the project's files")
        return []
    env = dict(os.environ, GIT_SEQUENCE_EDITOR=":", GIT_EDITOR=":")
    run = subprocess.run(_locked(["git", "-C", str(src), "rebase", "-q", "-i",
                                  "--autosquash", base.commit], lock),
                         text=True, capture_output=True, env=env)
    if run.returncode != 0:
        subprocess.run(_locked(["git", "-C", str(src), "rebase", "--abort"],
                               lock), capture_output=True)
        raise SeriesError("git rebase --autosquash failed; aborted, "
                          f"{branch} unchanged apart from the fixup commits")
    echo(f"folded {len(updated)} file(s) into their commits on {branch}")
    return updated


@dataclass
class CheckReport:
    """Outcome of :func:`check_series`: problems and notes, by check."""

    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def check_series(project: Path, src: Optional[Path] = None,
                 identity: Optional[tuple[str, str]] = None) -> CheckReport:
    """Every check ``rxl series check`` runs.

    Without ``src``: consistency of ``sys/`` and ``tests/atf/`` with the
    patches, commit-message rules, authors.  With ``src`` (a tree on which
    the series is applied, at HEAD): ``mandoc -Tlint -W warning`` on the
    touched man pages and ``tools/build/checkstyle9.pl`` on every patch.
    """
    rep = CheckReport()
    patches_dir = Path(project) / "patches"
    try:
        base = parse_base((patches_dir / "BASE").read_text())
        rep.notes.append(f"base {base.repository} {base.commit[:12]} "
                         f"(__FreeBSD_version {base.freebsd_version})")
    except (OSError, SeriesError) as e:
        rep.problems.append(f"patches/BASE: {e}")
    try:
        patches = load_series(patches_dir)
    except SeriesError as e:
        rep.problems.append(str(e))
        return rep
    rep.problems += check_consistency(patches, Path(project))
    for p in patches:
        rep.problems += [f"{p.name}: {m}" for m in
                         check_message(p.subject, p.body)]
    rep.problems += check_authors(patches, identity)
    if src is None:
        rep.notes.append("no --src: mandoc and checkstyle9.pl not run")
        return rep
    src = Path(src)
    mans = []
    for m in touched_man_pages(patches):
        if (src / m).is_file():
            mans.append(m)
        else:
            rep.problems.append(f"{m}: not in the tree")
    if shutil.which("mandoc") is None:
        rep.problems.append("mandoc is not installed (apt-get install "
                            "mandoc)")
    else:
        base_commit = None
        try:
            base_commit = parse_base((patches_dir / "BASE").read_text()).commit
        except (OSError, SeriesError):
            pass
        for m in mans:
            new = _mandoc_lint(src / m)
            old: list[str] = []
            if base_commit is not None:
                cp = _git(src, "show", f"{base_commit}:{m}", check=False)
                if cp.returncode == 0:
                    with tempfile.NamedTemporaryFile(
                            "w", suffix=Path(m).suffix) as tf:
                        tf.write(cp.stdout)
                        tf.flush()
                        old = _mandoc_lint(Path(tf.name))
            for msg in new_lint_messages(old, new):
                rep.problems.append(f"mandoc -Tlint {m}: {msg}")
        rep.notes.append(f"mandoc -Tlint -W warning: {len(mans)} man "
                         "page(s) checked (messages the base already had "
                         "are not counted)")
    script = src / "tools/build/checkstyle9.pl"
    if not script.is_file():
        rep.problems.append(f"{script}: not found")
    else:
        for f in patch_files(patches_dir):
            cp = subprocess.run(["perl", str(script), "--patch", "--terse",
                                 "--no-summary", "--color=never", str(f)],
                                text=True, capture_output=True)
            bad = [ln for ln in cp.stdout.splitlines()
                   if "ERROR:" in ln or "WARNING:" in ln]
            bad = [ln for ln in bad if "highly experimental" not in ln]
            if cp.returncode != 0 or bad:
                rep.problems.append(f"checkstyle9.pl {f.name}: " +
                                    (bad[0] if bad else
                                     f"exit {cp.returncode}"))
        rep.notes.append("checkstyle9.pl: "
                         f"{len(patch_files(patches_dir))} patch(es) checked")
    return rep


_LINT_PREFIX = re.compile(r"^(?:mandoc: )?[^:]*:\d+:\d+: ")


def new_lint_messages(old: Sequence[str], new: Sequence[str]) -> list[str]:
    """Lint messages of ``new`` that ``old`` does not have.

    Both are ``mandoc -Tlint`` output lines (``mandoc: FILE:LINE:COL:
    LEVEL: message``).  File and position are ignored, so a message the
    unpatched page already had does not count again just because lines
    moved; the comparison is by multiset.  Returns the new lines, as given.
    """
    def key(line: str) -> str:
        return _LINT_PREFIX.sub("", line.strip())

    budget: dict[str, int] = {}
    for line in old:
        budget[key(line)] = budget.get(key(line), 0) + 1
    out = []
    for line in new:
        k = key(line)
        if budget.get(k, 0) > 0:
            budget[k] -= 1
        else:
            out.append(line.strip())
    return out


def _mandoc_lint(path: Path) -> list[str]:
    cp = subprocess.run(["mandoc", "-Tlint", "-W", "warning", str(path)],
                        text=True, capture_output=True)
    return [ln for ln in (cp.stdout + cp.stderr).splitlines() if ln.strip()]


def write_base(patches_dir: Path, base: Base) -> Path:
    """Write ``patches/BASE``."""
    path = Path(patches_dir) / "BASE"
    path.write_text(base.text())
    return path


def freebsd_version(src: Path) -> str:
    """``__FreeBSD_version`` from ``sys/sys/param.h`` of a tree."""
    text = (Path(src) / "sys/sys/param.h").read_text(errors="replace")
    m = re.search(r"^#define\s+__FreeBSD_version\s+(\d+)", text, re.M)
    if not m:
        raise SeriesError(f"{src}: no __FreeBSD_version in sys/sys/param.h")
    return m.group(1)


__all__ = [n for n in dir() if not n.startswith("_") and n not in (
    "annotations", "email", "os", "re", "shutil", "subprocess", "tempfile")]

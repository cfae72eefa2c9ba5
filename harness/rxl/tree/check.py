"""``rxl series check``: the series' commit messages, authors, files and man pages.

Commit message rules (FreeBSD committer's guide: subject ``area: Summary``
under :data:`SUBJECT_MAX` characters, body wrapped at :data:`BODY_LINE_MAX`,
trailers last), one author for every patch, the added files equal to the
project's, and, given a tree, ``mandoc -Tlint`` on the man pages the series
touches with only new messages counted.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

from rxl.tree.patch import (Patch, SeriesError, check_consistency, load_series, read_base,
                            patch_files, touched_man_pages)
from rxl.tree import version as tree_version
from rxl.tree.series import SeriesState, run_git, series_state

#: Subjects must be shorter than this (FreeBSD committer's guide).
SUBJECT_MAX = 67

#: Body lines wrap at 72 columns.
BODY_LINE_MAX = 72

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
class CheckReport:
    """Outcome of :func:`check_series`: problems and notes, by check.

    ``tree_problems``: what is wrong with ``--src`` (another release, the
    series not at HEAD): bad input, not a problem of the series."""

    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    tree_problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and not self.tree_problems


def check_series(project: Path, src: Optional[Path] = None,
                 identity: Optional[tuple[str, str]] = None) -> CheckReport:
    """Every check ``rxl series check`` runs.

    Without ``src``: consistency of ``sys/`` and ``tests/atf/`` with the
    patches, commit-message rules, authors.  With ``src`` (a tree on which
    the series is applied, at HEAD): ``mandoc -Tlint -W warning`` on the
    touched man pages and ``tools/build/checkstyle9.pl`` on every patch; first,
    that the tree is of the series' base release and carries the series at HEAD
    (:func:`rxl.tree.series.series_state`): a tree of another release or
    without the series is a tree problem (``tree_problems``: bad ``--src``,
    said with whether the series applies there), and nothing else is checked
    on it.
    """
    rep = CheckReport()
    patches_dir = Path(project) / "patches"
    try:
        base = read_base(patches_dir)
        rep.notes.append(f"base {base.repository} {base.commit[:12]} "
                         f"(__FreeBSD_version {base.freebsd_version})")
    except SeriesError as e:
        rep.problems.append(str(e))
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
    tree_v = tree_version.version_or_none(str(src))
    if tree_v is not None:
        rep.notes.append(f"tree {src}: {tree_v.describe()}")
        try:
            want = int(read_base(patches_dir).freebsd_version)
        except (OSError, SeriesError, ValueError):
            want = None
        if want is not None and want // 100000 != tree_v.major:
            rep.tree_problems.append(f"--src {src} is FreeBSD {tree_v.release} "
                                f"({tree_v.freebsd_version}), the series' base is "
                                f"__FreeBSD_version {want}")
    try:
        state, detail = series_state(src, patch_files(patches_dir))
    except SeriesError as e:
        state, detail = SeriesState.NEITHER, str(e)
    if state != SeriesState.APPLIED:
        how = ("apply it first: rxl series apply --src " + str(src)
               if state == SeriesState.APPLICABLE else "")
        rep.tree_problems.append(f"--src {src} does not carry the series at HEAD: {detail}"
                            + (f"; {how}" if how else ""))
        rep.notes.append("mandoc and checkstyle9.pl not run: they check the series' "
                         "man pages in a tree that has the series")
        return rep
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
            base_commit = read_base(patches_dir).commit
        except (OSError, SeriesError):
            pass
        for m in mans:
            new = _mandoc_lint(src / m)
            old: list[str] = []
            if base_commit is not None:
                cp = run_git(src, "show", f"{base_commit}:{m}", check=False)
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

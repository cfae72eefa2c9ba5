"""The rxl patch series in a FreeBSD tree: applying and exporting it with git.

``patches/`` holds the series as ``git format-patch`` output
(``0001-*.patch`` ...) and a ``BASE`` file naming the tree it applies to.
Parsing the patch text is :mod:`rxl.tree.patch` (pure, CI runs it), the
checks of ``rxl series check`` are :mod:`rxl.tree.check`; this module
drives git in a source tree.

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

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Optional

from rxl.cli.options import missing
from rxl.errors import BadOption, SourceError, show
from rxl.tree.patch import ATF_DEST, SeriesError, patch_files, read_base, set_copyright
from rxl.tree.version import PARAM_H, parse_param_h

#: Default branch the series is applied on.
DEFAULT_BRANCH = "rxl"


# --------------------------------------------------------------------------
# Running git (impure).

def run_git(src: Path, *args: str, check: bool = True,
            input: Optional[str] = None, env: Optional[dict] = None
            ) -> subprocess.CompletedProcess:
    """``git -C src ARGS`` (text, output captured; ``env``: the whole environment).

    Raises :class:`SeriesError` (one line: git's last message) when git is
    missing, or exits non-zero and ``check`` is true.
    """
    try:
        cp = subprocess.run(["git", "-C", str(src), *args], text=True,
                            capture_output=True, input=input, env=env)
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


#: Committer of the commits the harness makes (git am, the fixups of sync)
#: when git has no identity configured, as on a fresh machine: git refuses to
#: commit without one ("Committer identity unknown" on a fresh machine). The authors
#: stay the patches' own.
FALLBACK_COMMITTER = ("rxl harness", "rxl@localhost")


def committer_env(src: Optional[Path] = None, env: Optional[dict] = None, *,
                  author: bool = False) -> dict:
    """The environment for a git command that commits in ``src``: ``env`` (default
    os.environ) as it is when git has an identity there or GIT_COMMITTER_NAME and
    GIT_COMMITTER_EMAIL are set, else with :data:`FALLBACK_COMMITTER` as those two
    (and as GIT_AUTHOR_NAME/EMAIL with ``author``: a new commit, not git am)."""
    env = dict(os.environ if env is None else env)
    if (env.get("GIT_COMMITTER_NAME") and env.get("GIT_COMMITTER_EMAIL")) \
            or git_identity(src) is not None:
        return env
    roles = ("COMMITTER", "AUTHOR") if author else ("COMMITTER",)
    for role in roles:
        env[f"GIT_{role}_NAME"], env[f"GIT_{role}_EMAIL"] = FALLBACK_COMMITTER
    return env


def missing_blob_paths(src: Path) -> list[str]:
    """Tracked files deleted from the work tree whose blobs git lacks.

    These are the snapshot's absent large files, not local changes.
    """
    cp = run_git(src, "ls-files", "--deleted", "-s", check=False)
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
    if run_git(src, "rev-parse", "--verify", "--quiet", "HEAD",
            check=False).returncode == 0:
        probe = subprocess.run(["git", "-C", str(src), "ls-files"],
                               stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL)
        if not probe.stdout.strip():
            run_git(src, "read-tree", "HEAD")
            echo("note: the index was empty (the clone's checkout stopped "
                 "at a missing blob); rebuilt it from HEAD")
    paths = missing_blob_paths(src)
    if not paths:
        return []
    run_git(src, "update-index", "--skip-worktree", "--", *paths)
    if run_git(src, "config", "extensions.partialClone",
            check=False).stdout.strip() == "":
        run_git(src, "config", "core.repositoryformatversion", "1")
        run_git(src, "config", "extensions.partialClone", "origin")
        run_git(src, "config", "remote.origin.promisor", "true")
    echo(f"note: {len(paths)} file(s) of the snapshot have no blob (e.g. "
         f"{paths[0]}); marked skip-worktree so git can commit")
    return paths


def dirty_paths(src: Path) -> list[str]:
    """Uncommitted changes to tracked files (skip-worktree ones ignored)."""
    cp = run_git(src, "status", "--porcelain", "--untracked-files=no")
    return [ln[3:] for ln in cp.stdout.splitlines() if ln.strip()]


def ensure_git_tree(src: Path) -> None:
    """Raise :class:`SeriesError` unless ``src`` is the top of a git work tree
    (a folder inside one is refused: git would act on the enclosing tree)."""
    if not Path(src).is_dir():
        raise SeriesError(f"{src}: {missing(src, 'directory')}")
    cp = run_git(src, "rev-parse", "--show-toplevel", check=False)
    if cp.returncode != 0:
        raise SeriesError(f"{src}: not a git work tree")
    top = cp.stdout.strip()
    if os.path.realpath(top) != os.path.realpath(src):
        raise SeriesError(f"{src} is a folder inside the git tree {top}; give its top")


def check_base_commit(src: Path, base) -> None:
    """Raise :class:`rxl.errors.BadOption` (``--src``: exit 2, bad input) unless
    ``src`` holds ``base``'s commit (a :class:`rxl.tree.patch.Base`): what every
    series command that works from the base needs, said as ``rxl run --src`` says
    it, with the fetch that brings the commit."""
    if run_git(src, "cat-file", "-e", base.commit + "^{commit}",
               check=False).returncode == 0:
        check_base_version(src, base)
        return
    from rxl.tree.base import base_url  # rxl.tree.base imports this module
    try:
        url = base_url(base.repository)
    except SourceError:
        url = base.repository
    raise BadOption(f"{src}: does not have the base commit {base.commit[:12]} "
                    f"(patches/BASE): it is in {base.repository}; fetch it (git -C {src} "
                    f"fetch {url} {base.commit}), or give a clone of that repository", "--src")


def check_base_version(src: Path, base) -> None:
    """Raise :class:`rxl.errors.BadOption` (``--patches``) when the base commit's
    sys/sys/param.h in ``src`` names another ``__FreeBSD_version`` than
    patches/BASE records: BASE's is what a dry run or --check-only plans the
    release and the compilers from before the base is fetched (rxl.tree.version
    .planned_version), so a wrong one would go unseen until the build. A commit
    without a readable param.h is not compared (the tree checks say what it is)."""
    cp = run_git(src, "show", f"{base.commit}:{PARAM_H}", check=False)
    fv = parse_param_h(cp.stdout) if cp.returncode == 0 else None
    if fv is not None and str(fv) != str(base.freebsd_version):
        raise BadOption(f"BASE says __FreeBSD_version {show(base.freebsd_version, 24)}, but "
                        f"{PARAM_H} of its commit {base.commit[:12]} in {src} says {fv}: "
                        "the runs plan the release from BASE before the base is fetched; "
                        "correct BASE", "--patches")


def check_branch_name(src: Path, branch: str) -> None:
    """Raise :class:`rxl.errors.BadOption` (``--branch``) unless ``branch`` is a
    name ``git checkout -b`` takes as it is (``git check-ref-format --branch``:
    no blank, ``..``, ``~``, leading ``-``, ``@{-N}`` ...)."""
    cp = run_git(src, "check-ref-format", "--branch", branch, check=False) \
        if branch and not branch.startswith("-") else None
    if cp is None or cp.returncode != 0 or cp.stdout.strip() != branch:
        raise BadOption(f"{show(branch) or chr(39) * 2}: not a git branch name", "--branch")


def _git_says(cp: subprocess.CompletedProcess) -> str:
    """What a failed git command said, its lines joined in one (or its exit status)."""
    out = ""
    for ln in (cp.stderr.strip() or cp.stdout.strip()).splitlines():
        if ln.strip():
            out += ("" if not out else " " if out[-1] in ":.;," else "; ") + ln.strip()
    return out or f"exit {cp.returncode}"


def _locked(argv: list[str], lock: Optional[Path]) -> list[str]:
    return ["flock", str(lock), *argv] if lock else argv


def apply_series(src: Path, patches_dir: Path, *,
                 branch: str = DEFAULT_BRANCH,
                 lock: Optional[Path] = None, echo=print,
                 at: Optional[str] = None) -> str:
    """Create ``branch`` at the recorded base (or at commit ``at``: a tree of the
    same release from another history, such as a releng/15.0 checkout) and ``git
    am`` the series.

    Refuses, changing nothing (every check comes before the snapshot's index,
    config and skip-worktree marks are written): a ``branch`` that is no git
    branch name or already exists (:class:`rxl.errors.BadOption` naming
    ``--branch``); a ``src`` without the base commit (:func:`check_base_commit`:
    BadOption naming ``--src``); ``src`` not the top of a git tree, uncommitted
    changes, an ``at`` it lacks (:class:`SeriesError`).  On a failed ``git am`` the am
    is aborted, the checkout goes back to the branch (or commit) it was on and
    the new branch, which holds nothing but the base, is deleted: a retry finds
    the tree as it was (the message says so, or where it was left when git
    could not go back).  Returns the new HEAD.
    """
    src = Path(src)
    ensure_git_tree(src)
    check_branch_name(src, branch)
    base = read_base(Path(patches_dir))
    files = patch_files(patches_dir)
    if not files:
        raise SeriesError(f"{patches_dir}: no patches to apply")
    start = at or base.commit
    if at is None:
        check_base_commit(src, base)
    elif run_git(src, "cat-file", "-e", at + "^{commit}", check=False).returncode != 0:
        raise SeriesError(f"{src}: commit {at[:12]} is not in this repository")
    if run_git(src, "rev-parse", "--verify", "--quiet", "refs/heads/" + branch,
            check=False).returncode == 0:
        raise BadOption(f"branch {branch} already exists in {src}; rename or delete it, "
                        "or give another", "--branch")
    # Every refusal comes before prepare_snapshot, the first write (config, index).
    empty_index = not run_git(src, "ls-files", check=False).stdout.strip()
    dirty = [] if empty_index else sorted(set(dirty_paths(src)) - set(missing_blob_paths(src)))
    if dirty:
        raise SeriesError(f"{src} has uncommitted changes ({len(dirty)} "
                          f"file(s), e.g. {dirty[0]}); commit or stash "
                          "them first")
    prepare_snapshot(src, echo)
    # where the checkout is (a branch, else a detached commit), to go back to on failure
    on = run_git(src, "symbolic-ref", "-q", "--short", "HEAD", check=False).stdout.strip()
    was = on or run_git(src, "rev-parse", "--verify", "--quiet", "HEAD",
                        check=False).stdout.strip()
    run = subprocess.run(_locked(["git", "-C", str(src), "checkout", "-q",
                                  "-b", branch, start], lock),
                         text=True, capture_output=True)
    if run.returncode != 0:
        raise SeriesError(f"git checkout -b {branch} failed: {_git_says(run)}")
    run = subprocess.run(_locked(["git", "-C", str(src), "am", "-q",
                                  *map(str, files)], lock),
                         text=True, capture_output=True, env=committer_env(src))
    if run.returncode != 0:
        subprocess.run(_locked(["git", "-C", str(src), "am", "--abort"],
                               lock), capture_output=True)
        last = (run.stderr.strip() or run.stdout.strip()).splitlines()
        said = f"git am failed ({last[0] if last else 'error'})"
        back = bool(was) and subprocess.run(
            _locked(["git", "-C", str(src), "checkout", "-q", was, "--"], lock),
            capture_output=True).returncode == 0
        if not back:
            raise SeriesError(f"{said}; the checkout is left on branch {branch}, at the "
                              f"base: delete it (git branch -D {branch}) before a retry")
        gone = subprocess.run(_locked(["git", "-C", str(src), "branch", "-q", "-D", branch],
                                      lock), capture_output=True).returncode == 0
        raise SeriesError(f"{said}; the checkout is back on "
                          f"{f'branch {on}' if on else f'commit {was[:12]}'}"
                          + (f", branch {branch} deleted" if gone else
                             f"; branch {branch} is left at the base: delete it before a "
                             "retry"))
    head = run_git(src, "rev-parse", "HEAD").stdout.strip()
    echo(f"applied {len(files)} patch(es) on {branch} in {src}: "
         f"{start[:12]}..{head[:12]}")
    return head


def _git_bytes(src: Path, *args: str, input: Optional[bytes] = None,
               env: Optional[dict] = None) -> bytes:
    """``git -C src ARGS``'s standard output as bytes (file contents, commit
    objects: no newline or encoding translation). Raises :class:`SeriesError`."""
    try:
        cp = subprocess.run(["git", "-C", str(src), *args], capture_output=True,
                            input=input, env=env)
    except FileNotFoundError:
        raise SeriesError("git is not installed")
    if cp.returncode != 0:
        msg = cp.stderr.decode(errors="replace").strip().splitlines()
        raise SeriesError(f"git {args[0]} failed in {src}: "
                          f"{msg[-1] if msg else 'exit ' + str(cp.returncode)}")
    return cp.stdout


def authored_commits(src: Path, base: str, branch: str, author: tuple[str, str]) -> str:
    """The commits of ``base..branch`` made again by ``author`` (name, email), each
    with the project's copyright line (:data:`rxl.tree.patch.PROJECT_HOLDER`) of
    every file the series adds naming ``author``; messages, author dates and
    every other file as they were. The new commits are objects only (no ref,
    no checkout, the branch untouched: a temporary index per commit, ``git
    commit-tree``). Returns the new tip's id."""
    holder = f"{author[0]} <{author[1]}>"
    added = [p for p in run_git(src, "diff", "--no-renames", "--name-only", "--diff-filter=A",
                                "-z", base, branch).stdout.split("\0") if p]
    commits = run_git(src, "rev-list", "--reverse", f"{base}..{branch}").stdout.split()
    parent = base
    with tempfile.TemporaryDirectory() as tmp:
        ienv = dict(os.environ, GIT_INDEX_FILE=str(Path(tmp) / "index"))
        for c in commits:
            run_git(src, "read-tree", c, env=ienv)
            for row in run_git(src, "ls-tree", "-z", c, "--", *added).stdout.split("\0"):
                if not row:
                    continue
                meta, path = row.split("\t", 1)
                mode, _, blob = meta.split()
                old = _git_bytes(src, "cat-file", "blob", blob)
                new = set_copyright(old.decode("utf-8", "surrogateescape"), holder)
                data = new.encode("utf-8", "surrogateescape")
                if data != old:
                    sha = _git_bytes(src, "hash-object", "-w", "--stdin", input=data)
                    run_git(src, "update-index", "--cacheinfo",
                            f"{mode},{sha.decode().strip()},{path}", env=ienv)
            # --missing-ok: the snapshot's blobs of 4 MiB and more are absent
            tree = run_git(src, "write-tree", "--missing-ok", env=ienv).stdout.strip()
            raw = _git_bytes(src, "cat-file", "commit", c)
            message = raw.split(b"\n\n", 1)[1] if b"\n\n" in raw else b""
            date = run_git(src, "log", "-1", "--format=%ad", "--date=raw", c).stdout.strip()
            cenv = committer_env(src)
            cenv.update(GIT_AUTHOR_NAME=author[0], GIT_AUTHOR_EMAIL=author[1],
                        GIT_AUTHOR_DATE=date)
            parent = _git_bytes(src, "commit-tree", tree, "-p", parent, input=message,
                                env=cenv).decode().strip()
    return parent


def export_series(src: Path, patches_dir: Path, *,
                  branch: str = DEFAULT_BRANCH, author: Optional[tuple[str, str]] = None,
                  echo=print) -> list[Path]:
    """Regenerate ``patches/NNNN-*.patch`` from ``base..branch``.

    Uses ``git format-patch --zero-commit --no-signature`` so that the
    files change only when the commits do.  Old patch files that the new
    series does not produce are removed (and named).  ``BASE`` is kept.
    ``author`` (name, email; :func:`rxl.tree.patch.parse_author`): every
    patch's ``From:`` and the copyright line of every file the series adds
    name that person instead of the project (:func:`authored_commits`; the
    branch and the tree are left as they are; FreeBSD's own copyright lines,
    as in the moved ``in_pcblb.c``, are never touched); without it the
    commits' own authors and the project's copyright lines are kept.
    Refuses, writing nothing, a ``branch`` that does not exist, is not built on
    ``BASE``'s commit or has no commits over it (:class:`rxl.errors.BadOption`
    naming ``--branch``), and a base commit the tree lacks (:func:`check_base_commit`,
    naming ``--src``). Returns the written files.
    """
    src = Path(src)
    ensure_git_tree(src)
    patches_dir = Path(patches_dir)
    base = read_base(patches_dir)
    if run_git(src, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}",
            check=False).returncode != 0:
        raise BadOption(f"no branch {show(branch)} in {src} (rxl series apply "
                        "creates it)", "--branch")
    check_base_commit(src, base)
    # base..branch of a branch not built on the base is that branch's own history:
    # exported, it would replace the series (and remove its patches as stale).
    if run_git(src, "merge-base", "--is-ancestor", base.commit, f"refs/heads/{branch}",
               check=False).returncode != 0:
        raise BadOption(f"{show(branch)} is not built on the base commit "
                        f"{base.commit[:12]} of {patches_dir / 'BASE'}: nothing exported, "
                        "patches unchanged", "--branch")
    if run_git(src, "rev-list", "--count", f"{base.commit}..refs/heads/{branch}"
               ).stdout.strip() == "0":
        raise BadOption(f"{show(branch)} has no commits over the base commit "
                        f"{base.commit[:12]}: nothing exported, patches unchanged", "--branch")
    tip = authored_commits(src, base.commit, branch, author) if author \
        else f"refs/heads/{branch}"
    with tempfile.TemporaryDirectory() as tmp:
        run_git(src, "format-patch", "-q", "--zero-commit", "--no-signature",
             "-o", tmp, f"{base.commit}..{tip}")
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
    echo(f"exported {len(written)} patch(es) to {patches_dir}"
         + (f", by {author[0]} <{author[1]}>" if author else ""))
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
    :class:`rxl.errors.BadOption` (``--src``) when ``src`` lacks the base commit,
    :class:`SeriesError` when a file is added by no commit of the branch,
    or when git fails (a failed rebase is aborted, leaving the branch as it
    was).
    """
    src, project = Path(src), Path(project)
    ensure_git_tree(src)
    base = read_base(project / "patches")
    check_base_commit(src, base)  # base..branch is where the files' adders are looked for
    head = run_git(src, "rev-parse", "--abbrev-ref", "HEAD").stdout.strip()
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
        adder = run_git(src, "log", "--diff-filter=A", "--format=%H",
                     f"{base.commit}..{branch}", "--", tree).stdout.split()
        if not adder:
            raise SeriesError(f"{tree}: added by no commit on {branch}")
        shutil.copyfile(p, dest)
        run_git(src, "add", "--", tree)
        run_git(src, "commit", "-q", f"--fixup={adder[-1]}", "--", tree,
                env=committer_env(src, author=True))
        updated.append(tree)
        echo(f"{tree}: fixup of {adder[-1][:12]}")
    if not updated:
        echo("tree copies already equal the project's files")
        return []
    env = dict(committer_env(src), GIT_SEQUENCE_EDITOR=":", GIT_EDITOR=":")
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


class SeriesState:
    """What :func:`series_state` found (strings, for messages and tests)."""

    APPLIED = "applied"        # HEAD carries every patch: reversing them all applies
    APPLICABLE = "applicable"  # HEAD carries none: they all apply on it, in order
    NEITHER = "neither"        # a part, another version, or another tree


def series_state(src: Path, patches: list[Path]) -> tuple[str, str]:
    """Whether ``src``'s HEAD carries the series, read-only: (state, detail).

    With a scratch index made from HEAD (``GIT_INDEX_FILE``; the work tree and the
    real index are not touched): the patches reversed, last first, all apply
    (``git apply --cached -R``): :attr:`SeriesState.APPLIED`; else, from HEAD again,
    all apply in order: :attr:`SeriesState.APPLICABLE`; else
    :attr:`SeriesState.NEITHER`, with the patch and git's message that stopped it.
    Raises :class:`SeriesError` when ``src`` is not a git tree with a HEAD.
    """
    ensure_git_tree(Path(src))

    def attempt(order: list[Path], reverse: bool) -> Optional[str]:
        with tempfile.TemporaryDirectory() as d:
            env = dict(os.environ, GIT_INDEX_FILE=os.path.join(d, "index"),
                       GIT_NO_LAZY_FETCH="1")
            run_git(Path(src), "read-tree", "HEAD", env=env)
            for p in order:
                cp = run_git(Path(src), "apply", "--cached", *(["-R"] if reverse else []),
                             str(p), check=False, env=env)
                if cp.returncode != 0:
                    msg = (cp.stderr.strip() or "exit %d" % cp.returncode).splitlines()[0]
                    return f"{Path(p).name}: {msg}"
        return None

    back = attempt(list(reversed(patches)), True)
    if back is None:
        return SeriesState.APPLIED, f"HEAD carries all {len(patches)} patches"
    fwd = attempt(list(patches), False)
    if fwd is None:
        return SeriesState.APPLICABLE, f"none of the {len(patches)} patches is applied; " \
            "all apply on HEAD"
    return SeriesState.NEITHER, f"not applied ({back}) and does not apply ({fwd})"

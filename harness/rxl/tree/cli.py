"""``rxl series`` (apply, export and check the kernel patch series) and
``rxl build`` (cross-build the patched kernel with make.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click

from rxl import paths
from rxl.cli.options import (DIRECTORY, FILE, EmptyIsNone, check_lock_file, check_out_dir,
                             missing)
from rxl.cli.surface import command, group
from rxl.errors import SourceError, UsageError, reason
from rxl.tree import build as tree_build
from rxl.tree import check as tree_check
from rxl.tree import modules as tree_modules
from rxl.tree import patch as tree_patch
from rxl.tree import series as tree_series
from rxl.tree import version as tree_version
from rxl.tree.kernconf import check_kernconf, kernconf_path, kernconf_text

#: The project root: harness/rxl/tree/cli.py -> ../../../
PROJECT = Path(__file__).resolve().parents[3]


def _fail(msg: str) -> None:
    """A failure at run time: ``Error: msg`` on stderr, exit 1 (rxl's one surface)."""
    raise click.ClickException(msg)


def _git_top(src: str) -> Path:
    """``--src`` checked read-only before anything runs: the top of a git work tree,
    else a usage error (exit 2) naming the cause (no such directory, not a git
    work tree, a folder inside one)."""
    try:
        tree_series.ensure_git_tree(Path(src))
    except tree_patch.SeriesError as e:
        raise click.BadParameter(str(e), param_hint="'--src'") from None
    return Path(src)


def _patches(patches_dir: str, *, series: bool = False) -> Path:
    """``--patches`` checked before anything runs: a directory whose ``BASE``
    names the base's repository, commit and __FreeBSD_version, and with
    ``series`` (what ``apply`` reads) whose ``NNNN-*.patch`` files are the
    series' mails; else a usage error (exit 2) naming the file and the fault."""
    p = Path(patches_dir)
    if not p.is_dir():
        raise click.BadParameter(f"{patches_dir}: {missing(p, 'directory')}", param_hint="'--patches'")
    try:
        tree_patch.read_base(p)
        if series:
            tree_patch.load_series(p)
    except tree_patch.SeriesError as e:
        raise click.BadParameter(str(e), param_hint="'--patches'") from None
    return p


def _project(project: str, *, base: bool) -> Path:
    """``--project`` checked before anything runs: a directory holding
    ``patches/`` (the rxl project's top, or a copy of it), with ``base`` its
    ``patches/BASE`` readable and well-formed; else a usage error (exit 2)."""
    p = Path(project)
    if not p.is_dir():
        raise click.BadParameter(f"{project}: {missing(p, 'directory')}", param_hint="'--project'")
    if not (p / "patches").is_dir():
        raise click.BadParameter(f"{project}: no patches/ directory (not the rxl project)",
                                 param_hint="'--project'")
    if base:
        try:
            tree_patch.read_base(p / "patches")
        except tree_patch.SeriesError as e:
            raise click.BadParameter(str(e), param_hint="'--project'") from None
    return p


@group()
def series():
    """The four-commit FreeBSD patch series in patches/."""


#: Options several series commands share, defined once.
patches_option = click.option("--patches", "patches_dir", default=str(PROJECT / "patches"),
                              show_default=True, type=DIRECTORY)
project_option = click.option("--project", default=str(PROJECT), show_default=True,
                              type=DIRECTORY)
tree_option = click.option("--src", required=True, type=DIRECTORY)
branch_option = click.option("--branch", default=tree_series.DEFAULT_BRANCH, show_default=True)


def _lock(lock):
    """The --lock given, else the shared build lock if it is there; either
    checked (rxl.cli.options.check_lock_file: a FIFO there blocked flock(1)
    for ever, a symlink loop was taken as no lock)."""
    if lock is None and os.path.lexists(paths.LOCK):
        lock = paths.LOCK
    if lock is not None:
        check_lock_file(lock)
    return Path(lock) if lock else None


@series.command("apply")
@click.option("--src", required=True, type=DIRECTORY,
              help="FreeBSD source tree (a git work tree holding the base).")
@click.option("--branch", default=tree_series.DEFAULT_BRANCH, show_default=True,
              help="Branch to create at the base.")
@patches_option
@click.option("--lock", default=None, type=FILE,
              help="Hold this flock(1) lock around checkout and am "
                   "(default: $RXL_WORK/build.lock if it exists).")
def apply_cmd(src, branch, patches_dir, lock):
    """Branch from patches/BASE and git am the series."""
    lock = _lock(lock)
    src, patches = _git_top(src), _patches(patches_dir, series=True)
    try:
        tree_series.apply_series(src, patches, branch=branch,
                       lock=lock, echo=click.echo)
    except (tree_patch.SeriesError, OSError) as e:
        _fail(reason(e))


def _author(ctx, param, value):
    """``--author``: ``Name <email>`` -> (name, email), else a usage error (exit 2)."""
    if value is None:
        return None
    try:
        return tree_patch.parse_author(value)
    except tree_patch.SeriesError as e:
        raise click.BadParameter(str(e)) from None


@series.command("export")
@tree_option
@branch_option
@patches_option
@click.option("--author", default=None, callback=_author, metavar="'NAME <EMAIL>'",
              help="Name this person as every patch's author (From:) and in the "
                   "copyright line of every file the series adds (FreeBSD's own "
                   "lines are kept). Default: the commits' authors and the "
                   "project's copyright.")
def export_cmd(src, branch, patches_dir, author):
    """Regenerate patches/ with git format-patch from the branch."""
    src, patches = _git_top(src), _patches(patches_dir)
    try:
        tree_series.export_series(src, patches, branch=branch, author=author,
                        echo=click.echo)
    except (tree_patch.SeriesError, OSError) as e:
        _fail(reason(e))


#: The keys of ``series check --json``'s object, in its order (its help names them).
CHECK_JSON_KEYS = ("ok", "problems", "tree_problems", "notes")


@series.command("check")
@click.option("--src", default=None, type=DIRECTORY,
              help="Tree with the series applied: also run mandoc -Tlint "
                   "and checkstyle9.pl.")
@project_option
@click.option("--author/--no-author", default=False, show_default=True,
              help="Also require the patches' author to be git's configured "
                   "identity (skipped when none is configured); off by "
                   "default, so anyone can check the series. All patches "
                   "having one author is checked either way.")
@click.option("--json", "as_json", is_flag=True,
              help=f"Print {{{', '.join(map(json.dumps, CHECK_JSON_KEYS))}}} as JSON "
                   "(tree_problems: why --src is no tree of the series); with a problem the "
                   "Error line too: exit 1, or 2 for a tree problem.")
def check_cmd(src, project, author, as_json):
    """Consistency with sys/ and tests/atf/, messages, man pages, style."""
    if src is not None and not Path(src).is_dir():
        raise click.BadParameter(f"{src}: {missing(src, 'directory')}", param_hint="'--src'")
    if src is not None and not (Path(src) / "sys").is_dir():
        raise click.BadParameter(f"{src}: not a FreeBSD source tree (no sys/ directory)",
                                 param_hint="'--src'")
    if src is not None:  # the series is checked at its HEAD: bad input, not a problem
        try:
            tree_series.ensure_git_tree(Path(src))
        except tree_series.SeriesError as exc:
            raise click.BadParameter(str(exc), param_hint="'--src'") from None
    project = _project(project, base=False)
    ident = tree_series.git_identity(Path(project)) if author else None
    rep = tree_check.check_series(Path(project), Path(src) if src else None, ident)
    if as_json:
        notes = list(rep.notes) + (["no git identity configured; author not compared"]
                                   if author and ident is None else [])
        values = (rep.ok, rep.problems, rep.tree_problems, notes)  # as the help names them
        click.echo(json.dumps(dict(zip(CHECK_JSON_KEYS, values)), indent=2))
        _problems(rep)
        return
    for n in rep.notes:
        click.echo(f"note: {n}")
    if author and ident is None:
        click.echo("note: no git identity configured; author not compared")
    for p in rep.problems:
        click.echo(f"problem: {p}")
    if rep.ok:
        click.echo("series check: clean")
    elif rep.problems:
        click.echo(f"series check: {len(rep.problems)} problem(s)")
    _problems(rep)


def _problems(rep) -> None:
    """The one ``Error:`` line on stderr: a ``--src`` that is not a tree of the
    series (rep.tree_problems: bad input, exit 2, whatever else was found),
    else, exit 1, the series' problems (already on stdout), as rxl doctor
    has for what is missing."""
    if rep.tree_problems:
        more = f"; and {len(rep.problems)} problem(s) in the series (listed on stdout)" \
            if rep.problems else ""
        raise UsageError("; ".join(rep.tree_problems) + more)
    if rep.problems:
        n = len(rep.problems)  # "problem(s)" as the stdout summary says it
        raise SourceError(f"{n} problem(s) in the series (listed on stdout)")


@series.command("sync")
@tree_option
@branch_option
@project_option
@click.option("--lock", default=None, type=FILE,
              help="flock(1) lock around the rebase (default: "
                   "$RXL_WORK/build.lock if it exists).")
def sync_cmd(src, branch, project, lock):
    """Fold changed sys/ and tests/atf/ files into the commits adding them."""
    lock = _lock(lock)
    src, project = _git_top(src), _project(project, base=True)
    try:
        tree_series.sync_project_files(src, project, branch=branch,
                             lock=lock, echo=click.echo)
    except (tree_patch.SeriesError, OSError) as e:
        _fail(reason(e))


@command("build")
@click.option("--src", required=True, type=DIRECTORY,
              help="FreeBSD source tree.")
@click.option("--objdir", default=tree_build.DEFAULT_OBJDIR, show_default=True,
              type=DIRECTORY, help="MAKEOBJDIRPREFIX.")
@click.option("--kernconf", default=None,
              help="Kernel config [default: RXL, or MINIMAL with --modules]; RXL (GENERIC + "
                   "INVARIANTS, INVARIANT_SUPPORT, WITNESS; device epair) is written "
                   "into the tree.")
@click.option("--modules", "with_modules", is_flag=True,
              help="Build the kernel with the modules a module boot needs (iflib, em and "
                   "what the series touches; MODULES_OVERRIDE) and check that they link.")
@click.option("--logdir", default=paths.LOGS, show_default=True,
              type=DIRECTORY,
              help="Full log of each stage goes here.")
@click.option("--jobs", "-j", default=tree_build.DEFAULT_JOBS, show_default=True,
              type=click.IntRange(1, 256))
@click.option("--lock", default=tree_build.DEFAULT_LOCK, show_default=True, cls=EmptyIsNone,
              help="flock(1) lock held by every make.py run; '' for none.")
@click.option("--clean", is_flag=True,
              help="Clean kernel build (default: -DNO_KERNELCLEAN).")
@click.option("--dry-run", is_flag=True,
              help="Print the make.py command lines and exit.")
def build(src, objdir, kernconf, with_modules, logdir, jobs, lock, clean, dry_run):
    """kernel-toolchain once, then buildkernel KERNCONF (and modules)."""
    if not os.path.isdir(src):
        raise click.BadParameter(f"{src}: {missing(src, 'directory')}", param_hint="'--src'")
    if not os.path.isfile(os.path.join(src, "tools/build/make.py")):
        raise click.BadParameter(f"{src}: not a FreeBSD source tree (no tools/build/make.py)",
                                 param_hint="'--src'")
    lock = lock or None
    # the default's directory is made with the cache's; the default is checked
    # once it is there (a FIFO there would block flock(1) for ever)
    if lock is not None and (lock != tree_build.DEFAULT_LOCK or os.path.lexists(lock)):
        check_lock_file(lock)
    # the object directory is checked as run checks it (dry run too): a FIFO,
    # a device or a symlink loop there passed and the plan was printed
    check_out_dir(objdir, "--objdir")
    if kernconf is None:
        kernconf = tree_modules.MODULE_KERNCONF if with_modules else tree_build.DEFAULT_KERNCONF
    check_kernconf(src, kernconf)
    if logdir != paths.LOGS:  # under $RXL_WORK, build_kernel says what is wrong with it
        check_out_dir(logdir, "--logdir")  # the one check of an output dir, dry run too
    try:  # the cross compiler is the release's: never guessed, dry run too
        tree_version.require_release(src, "the cross compiler is chosen by it")
    except tree_version.VersionError as exc:
        raise click.BadParameter(str(exc).partition(" ")[2], param_hint="'--src'") from None
    modules = (tree_modules.build_list(src, _series_files()) if with_modules else [])
    stages = tree_build.plan_stages(src, objdir, kernconf=kernconf,
                           toolchain=not tree_build.toolchain_done(objdir, src),
                           jobs=jobs, lock=lock, clean_kernel=clean, modules=modules)
    if dry_run:
        v = tree_version.version_or_none(src)
        if v is not None:
            click.echo(f"# {src}: {v.describe()}; cross compiler {v.cross_bindir}")
        if kernconf == tree_build.DEFAULT_KERNCONF:
            click.echo(f"# would write {kernconf_path(src, kernconf)}:")
            for line in kernconf_text(kernconf).splitlines():
                click.echo(f"#   {line}")
        if tree_build.toolchain_done(objdir, src):
            click.echo(f"# kernel-toolchain already done in {objdir}")
        for line in tree_build.shell_lines(stages):
            click.echo(line)
        return
    try:
        res = tree_build.build_kernel(src, objdir, kernconf=kernconf, logdir=logdir,
                             lock=lock, jobs=jobs, clean_kernel=clean, modules=modules,
                             echo=click.echo)
    except (tree_build.BuildError, tree_build.BuildSetupError, tree_modules.ModuleError,
            tree_modules.ModuleLinkError, ValueError) as e:
        raise click.ClickException(str(e)) from None
    except OSError as e:  # build_kernel's own FileNotFoundError has only a message
        raise click.ClickException(f"{e.filename or src}: {e.strerror}" if e.strerror
                                   else str(e)) from None
    for r in res:
        extra = ""
        if r.extra.get("wait_seconds"):
            extra += f", {r.extra['wait_seconds']} s waiting for the lock"
        if "make_seconds" in r.extra:
            extra += f", make says {r.extra['make_seconds']} s"
        click.echo(f"{r.name}: {r.seconds:.0f} s{extra}, log {r.log}")
    kern = res[-1].extra.get("kernel") if res else None
    if kern:
        click.echo(f"kernel: {kern}")
    for name, ko in (res[-1].extra.get("modules") or {}).items() if res else ():
        click.echo(f"module {name}: {ko}")


def _series_files() -> list:
    """Paths the project's series touches (none when it cannot be read)."""
    try:
        return [f.path for p in tree_patch.load_series(PROJECT / "patches") for f in p.files]
    except tree_patch.SeriesError:
        return []

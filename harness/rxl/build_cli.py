"""``rxl build``: cross-build the patched kernel with make.py."""

from __future__ import annotations

from rxl import paths

import sys

import click

from rxl import build as B


@click.command("build")
@click.option("--src", required=True, type=click.Path(file_okay=False),
              help="FreeBSD source tree.")
@click.option("--objdir", default=B.DEFAULT_OBJDIR, show_default=True,
              type=click.Path(file_okay=False), help="MAKEOBJDIRPREFIX.")
@click.option("--kernconf", default=B.DEFAULT_KERNCONF, show_default=True,
              help="Kernel config; RXL (GENERIC + INVARIANTS, "
                   "INVARIANT_SUPPORT, WITNESS) is written into the tree.")
@click.option("--logdir", default=paths.LOGS, show_default=True,
              type=click.Path(file_okay=False),
              help="Full log of each stage goes here.")
@click.option("--jobs", "-j", default=B.DEFAULT_JOBS, show_default=True,
              type=click.IntRange(1, 256))
@click.option("--lock", default=B.DEFAULT_LOCK, show_default=True,
              help="flock(1) lock held by every make.py run; '' for none.")
@click.option("--clean", is_flag=True,
              help="Clean kernel build (default: -DNO_KERNELCLEAN).")
@click.option("--dry-run", is_flag=True,
              help="Print the make.py command lines and exit.")
def build(src, objdir, kernconf, logdir, jobs, lock, clean, dry_run):
    """kernel-toolchain once, then buildkernel KERNCONF."""
    lock = lock or None
    stages = B.plan_stages(src, objdir, kernconf=kernconf,
                           toolchain=not B.toolchain_done(objdir, src),
                           jobs=jobs, lock=lock, clean_kernel=clean)
    if dry_run:
        if kernconf == B.DEFAULT_KERNCONF:
            click.echo(f"# would write {B.kernconf_path(src, kernconf)}:")
            for line in B.kernconf_text(kernconf).splitlines():
                click.echo(f"#   {line}")
        if B.toolchain_done(objdir, src):
            click.echo(f"# kernel-toolchain already done in {objdir}")
        for st in stages:
            click.echo(st.shell())
        return
    try:
        res = B.build_kernel(src, objdir, kernconf=kernconf, logdir=logdir,
                             lock=lock, jobs=jobs, clean_kernel=clean,
                             echo=click.echo)
    except (B.BuildError, B.BuildSetupError, FileNotFoundError,
            ValueError) as e:
        click.echo(f"rxl build: error: {e}", err=True)
        sys.exit(1)
    except OSError as e:
        click.echo(f"rxl build: error: {e.filename or src}: {e.strerror}",
                   err=True)
        sys.exit(1)
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

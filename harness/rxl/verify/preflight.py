"""What ``rxl run`` checks before its first stage, so nothing fails late.

:func:`check_options` refuses, with a usage error naming the option, every
input that would otherwise fail only after the builds (the slow stages take
20-40 minutes cold): the guest, the output directories, the test programs,
the kernels and trees given, and ``--src`` itself (rxl.tree.base.classify).
:data:`CHECKED` is what ``rxl run --check-only`` says of each kind of tree.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Optional

import click

from rxl.verify.job import RunOptions, guest_config


#: Longest --case-timeout, s: a day. The guest's rc hands it to timeout(1),
#: which refuses a duration it cannot represent, so every case would "fail"
#: after the builds; no ATF case of the run takes more than minutes.
MAX_CASE_TIMEOUT = 86400


def check_options(opts: RunOptions) -> Optional[str]:
    """Refuse, in one line (click.BadParameter: exit 2), everything that would
    otherwise fail only after the builds: the guest (--memory, at most the host's
    RAM), --out/--guest-dir/--objdir where a file is in the way, --case-timeout,
    --test sources, names given to --new-program, --kernel, --pristine-kernel and
    --pristine-src, and --src (rxl.tree.base.classify: no such directory, not a
    FreeBSD tree, the base commit missing, a plain tree without a pristine
    kernel), and with an SSH target its --workdir (:func:`check_workdir`).
    Returns what --src is (rxl.tree.base.SrcKind), "target" with an SSH
    target, None without --src."""
    from rxl.decide import checks
    from rxl.guest import qemu as qemu_mod
    from rxl.tree import base as base_mod
    from rxl.tree import world as world_mod
    if not 1 <= opts.case_timeout <= MAX_CASE_TIMEOUT:
        raise click.BadParameter(f"{checks.show(opts.case_timeout, 24)}: must be 1..."
                                 f"{MAX_CASE_TIMEOUT} (seconds per case)",
                                 param_hint="'--case-timeout'")
    for path, opt in ((opts.out, "--out"), (opts.guest_dir, "--guest-dir"),
                      (opts.objdir, "--objdir"), (opts.work, "$RXL_WORK")):
        if path:
            checks.check_out_dir(path, opt)
    root = str(Path(opts.guest_dir) / Path(opts.out).name / "patched")
    try:
        # The firmware is looked for at boot (rxl doctor checks it); only the
        # configuration is checked here.
        cfg = guest_config(root, opts)
        qemu_mod.validate(cfg)
    except qemu_mod.QemuConfigError as exc:
        if "memory_mib" in str(exc):
            raise click.BadParameter(f"{opts.memory_mib}: {exc}", param_hint="'--memory'")
        raise click.ClickException(f"guest configuration: {exc}") from None
    checks.check_guest(cfg.vcpus, opts.memory_mib)
    names = [n for n, _ in world_mod.BASE_TESTS]
    for name, source in opts.extra_tests:
        if name in names:
            raise click.BadParameter(f"{name}: a test program of that name is already "
                                     "built (--atf-dir or an earlier --test)",
                                     param_hint="'--test'")
        names.append(name)
        if not Path(source).is_file():
            raise click.BadParameter(f"{name}={source}: no such file", param_hint="'--test'")
    unknown = [n for n in opts.new_programs if n not in names]
    if unknown:
        raise click.BadParameter(f"{', '.join(unknown)}: not a test program of this run "
                                 f"(known: {', '.join(names)})",
                                 param_hint="'--new-program'")
    if opts.kernel and not Path(opts.kernel).is_file():
        raise click.BadParameter(f"{opts.kernel}: no such file", param_hint="'--kernel'")
    if opts.pristine_kernel and not Path(opts.pristine_kernel).is_file():
        raise click.BadParameter(f"{opts.pristine_kernel}: no such file",
                                 param_hint="'--pristine-kernel'")
    if opts.pristine_src:
        try:
            base_mod.check_tree_dir(opts.pristine_src, "--pristine-src")
        except base_mod.TreeError as exc:
            raise click.BadParameter(str(exc).partition(" ")[2],
                                     param_hint="'--pristine-src'") from None
    if opts.target is not None:
        check_workdir(opts.workdir)
        # An SSH target's stages check the tree they use (remote_stages).
        return "target"
    if opts.src is None:
        if shutil.which("git") is None:
            raise click.ClickException("git is not installed, so the base cannot be "
                                       "fetched: rxl doctor --install, or give --src")
        return None
    try:
        kind = base_mod.classify(opts.src)
    except base_mod.TreeError as exc:
        raise click.BadParameter(str(exc).partition(" ")[2], param_hint="'--src'") from None
    if kind == base_mod.SrcKind.PLAIN_APPLIED and not opts.pristine_kernel \
            and not opts.pristine_src:
        raise click.BadParameter(f"{opts.src} is not a git clone, so no pristine kernel can "
                                 "be built from it and the verdict would be FAIL; give "
                                 "--pristine-kernel or --pristine-src, or a git clone",
                                 param_hint="'--src'")
    return kind


#: Characters a target's work directory may hold: it goes into remote shell
#: commands and into the printed undo (``rm -rf WORKDIR``).
_WORKDIR_CHARS = re.compile(r"[A-Za-z0-9._/-]+")
#: Shared directories two levels deep a work directory may not be (any top-level
#: directory, the root and all of /boot are refused by :func:`check_workdir` itself).
_WORKDIR_REFUSED = ("/var/tmp", "/usr/local", "/var/db", "/var/log")


def check_workdir(workdir: str) -> None:
    """Refuse (click.BadParameter, exit 2) a ``--workdir`` that is not an
    absolute path of plain characters (:data:`_WORKDIR_CHARS`), or that is /, a
    top-level directory, one of :data:`_WORKDIR_REFUSED` or under /boot:
    everything in it is removed by the printed undo. /var/tmp/rxl (the default)
    and /tmp/x are fine."""
    hint = "'--workdir'"
    if not workdir.startswith("/") or not _WORKDIR_CHARS.fullmatch(workdir):
        raise click.BadParameter(f"{workdir!r}: must be an absolute path of letters, digits "
                                 "and . _ / - (it goes into remote commands)", param_hint=hint)
    norm = os.path.normpath(workdir)
    if norm in _WORKDIR_REFUSED or norm.startswith("/boot/") or norm.count("/") < 2:
        raise click.BadParameter(f"{workdir}: the undo would be rm -rf {norm}; give a "
                                 "directory of its own, e.g. /var/tmp/rxl", param_hint=hint)


#: What ``--check-only`` says of each kind of --src (rxl.tree.base.SrcKind),
#: and of a --src whose run goes to an SSH target.
CHECKED = {"applied": "the series is applied; it is built as it is",
           "base": "holds the base; the series will be applied in a work clone under "
                   "$RXL_WORK (the tree itself is not touched)",
           "plain": "not a git tree; the series' files are there; built as it is",
           "target": "the test programs are built from it (or --programs); the target's "
                     "kernel runs them"}

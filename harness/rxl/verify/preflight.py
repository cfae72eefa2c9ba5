"""What ``rxl run`` checks before its first stage, so nothing fails late.

:func:`check_request` refuses, with a usage error naming the option, every
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

from rxl.cli.options import check_guest, check_out_dir
from rxl.errors import BadOption, DataError, HostError, show
from rxl.guest import qemu
from rxl.tree import base as tree_base
from rxl.tree import world as tree_world
from rxl.verify.ownguest import guest_config
from rxl.verify.request import RunRequest

#: Longest --case-timeout, s: a day. The guest's rc hands it to timeout(1),
#: which refuses a duration it cannot represent, so every case would "fail"
#: after the builds; no ATF case of the run takes more than minutes.
MAX_CASE_TIMEOUT = 86400


def check_request(req: RunRequest) -> Optional[str]:
    """Refuse, in one line (rxl.errors.BadOption: exit 2), everything that would
    otherwise fail only after the builds: the guest (--memory, at most the host's
    RAM), --out/--guest-dir/--objdir where a file is in the way, --case-timeout,
    --test sources, names given to --new-program, --kernel, --pristine-kernel and
    --pristine-src, and --src (rxl.tree.base.classify: no such directory, not a
    FreeBSD tree, the base commit missing, a plain tree without a pristine
    kernel), and with an SSH target its --workdir (:func:`check_workdir`).
    Returns what --src is (rxl.tree.base.SrcKind), "target" with an SSH
    target, None without --src."""
    if not 1 <= req.case_timeout <= MAX_CASE_TIMEOUT:
        raise BadOption(f"{show(req.case_timeout, 24)}: must be 1..."
                        f"{MAX_CASE_TIMEOUT} (seconds per case)", "--case-timeout")
    for path, opt in ((req.out, "--out"), (req.guest_dir, "--guest-dir"),
                      (req.objdir, "--objdir"), (req.work, "$RXL_WORK")):
        if path:
            check_out_dir(path, opt)
    root = str(Path(req.guest_dir) / Path(req.out).name / "patched")
    try:
        # The firmware is looked for at boot (rxl doctor checks it); only the
        # configuration is checked here.
        cfg = guest_config(root, req)
        qemu.validate(cfg)
    except qemu.QemuConfigError as exc:
        if "memory_mib" in str(exc):
            raise BadOption(f"{req.memory_mib}: {exc}", "--memory")
        raise DataError(f"guest configuration: {exc}") from None
    check_guest(cfg.vcpus, req.memory_mib)
    names = [n for n, _ in tree_world.BASE_TESTS]
    for name, source in req.extra_tests:
        if name in names:
            raise BadOption(f"{name}: a test program of that name is already "
                            "built (--atf-dir or an earlier --test)", "--test")
        names.append(name)
        if not Path(source).is_file():
            raise BadOption(f"{name}={source}: no such file", "--test")
    unknown = [n for n in req.new_programs if n not in names]
    if unknown:
        raise BadOption(f"{', '.join(unknown)}: not a test program of this run "
                        f"(known: {', '.join(names)})", "--new-program")
    if req.kernel and not Path(req.kernel).is_file():
        raise BadOption(f"{req.kernel}: no such file", "--kernel")
    if req.pristine_kernel and not Path(req.pristine_kernel).is_file():
        raise BadOption(f"{req.pristine_kernel}: no such file", "--pristine-kernel")
    if req.pristine_src:
        try:
            tree_base.check_tree_dir(req.pristine_src, "--pristine-src")
        except tree_base.TreeError as exc:
            raise BadOption(str(exc).partition(" ")[2], "--pristine-src") from None
    if req.target is not None:
        check_workdir(req.workdir)
        # An SSH target's stages check the tree they use (rxl.verify.target).
        return "target"
    if req.src is None:
        if shutil.which("git") is None:
            raise HostError("git is not installed, so the base cannot be fetched: "
                            "rxl doctor --install, or give --src")
        return None
    try:
        kind = tree_base.classify(req.src)
    except tree_base.TreeError as exc:
        raise BadOption(str(exc).partition(" ")[2], "--src") from None
    if kind == tree_base.SrcKind.PLAIN_APPLIED and not req.pristine_kernel \
            and not req.pristine_src:
        raise BadOption(f"{req.src} is not a git clone, so no pristine kernel can "
                        "be built from it and the verdict would be FAIL; give "
                        "--pristine-kernel or --pristine-src, or a git clone", "--src")
    return kind


#: Characters a target's work directory may hold: it goes into remote shell
#: commands and into the printed undo (``rm -rf WORKDIR``).
_WORKDIR_CHARS = re.compile(r"[A-Za-z0-9._/-]+")
#: Where a work directory may be: the directories for temporary files every
#: FreeBSD machine has (hier(7)), whose contents nothing else depends on.
WORKDIR_PARENTS = ("/tmp", "/var/tmp")


def check_workdir(workdir: str) -> None:
    """Refuse (rxl.errors.BadOption, exit 2) a ``--workdir`` the harness cannot
    own: it must be written plainly (absolute, normalised: no ``.``, ``..``,
    ``//`` or trailing ``/``; letters, digits and ``. _ / -``) and lie below
    /tmp or /var/tmp (:data:`WORKDIR_PARENTS`), never one of them or any
    other system directory, because the printed undo is ``rm -rf WORKDIR``.
    On the target the directory must then be new or marked as the harness's
    (rxl.verify.remote.claim_command). /var/tmp/rxl (the default) and
    /tmp/rxl-2 are fine."""
    hint = "--workdir"
    if not workdir.startswith("/") or not _WORKDIR_CHARS.fullmatch(workdir):
        raise BadOption(f"{show(workdir)}: must be an absolute path of letters, digits "
                        "and . _ / - (it goes into remote commands)", hint)
    norm = os.path.normpath(workdir)
    if norm != workdir or workdir.startswith("//"):
        raise BadOption(f"{workdir}: give it as {norm} (no '.', '..', '//' or trailing "
                        "'/': the undo removes exactly this path)", hint)
    if not any(workdir.startswith(p + "/") for p in WORKDIR_PARENTS) or \
            any(part.startswith(".") for part in workdir.split("/")[2:]):
        raise BadOption(f"{workdir}: a work directory is one of the harness's own below "
                        f"/tmp or /var/tmp (the undo is rm -rf {workdir}), e.g. "
                        "/var/tmp/rxl", hint)


#: What ``--check-only`` says of each kind of --src (rxl.tree.base.SrcKind),
#: and of a --src whose run goes to an SSH target.
CHECKED = {"applied": "the series is applied; it is built as it is",
           "base": "holds the base; the series will be applied in a work clone under "
                   "$RXL_WORK (the tree itself is not touched)",
           "plain": "not a git tree; the series' files are there; built as it is",
           "target": "the test programs are built from it (or --programs); the target's "
                     "kernel runs them"}

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
import subprocess
import urllib.parse
from pathlib import Path
from typing import Optional

from rxl.cli.options import check_guest, check_out_dir, missing
from rxl.errors import BadOption, DataError, HostError, show
from rxl.guest import qemu, sshkeys
from rxl.tree import base as tree_base
from rxl.tree import modules as tree_modules
from rxl.tree.kernconf import check_kernconf
from rxl.tree import build as tree_build
from rxl.tree import version as tree_version
from rxl.tree import world as tree_world
from rxl.tree.patch import parse_base
from rxl.verify.ownguest import check_qemu, guest_config
from rxl.verify.request import RunRequest
from rxl.verify.target import programs_in

#: Longest --case-timeout, s: a day. The guest's rc hands it to timeout(1),
#: which refuses a duration it cannot represent, so every case would "fail"
#: after the builds; no ATF case of the run takes more than minutes.
MAX_CASE_TIMEOUT = 86400


#: What every ATF C test program defines (rxl.tree.world.ATF_TCS).
ATF_TCS = tree_world.ATF_TCS


def check_test_source(name: str, source: str) -> None:
    """Refuse (BadOption, ``--test``) a test source that would fail only when it
    is compiled, after the builds: not a regular ``.c`` file, not text (not
    UTF-8, NUL bytes), or no ATF C test program (no :data:`ATF_TCS`):
    rxl.tree.world.atf_source_reason, the check an ``--atf-dir``'s programs
    get too. The compiler itself needs the built tree's headers, so it is
    not run here."""
    why = tree_world.atf_source_reason(source, "NAME=PATH.c: the build compiles it as C")
    if why:
        raise BadOption(f"{name}={show(source)}: {why}", "--test")


def check_request(req: RunRequest, *, ssh: bool = True,
                  check_only: bool = False) -> Optional[str]:
    """Refuse, in one line (rxl.errors.BadOption: exit 2), everything that would
    otherwise fail only after the builds: the guest (--memory, at most the host's
    RAM), --out/--guest-dir/--objdir where a file is in the way, --case-timeout,
    --test sources, names given to --new-program, --kernel, --pristine-kernel (not
    the same file as --kernel) and --pristine-src (a tree of the run's release:
    rxl.tree.build.check_tree_release), --src (rxl.tree.base.classify:
    no such directory, not a FreeBSD tree, the base commit missing, a plain tree
    without a pristine kernel; with --modules its MINIMAL: :func:`check_module_config`)
    or, without it, where the base is fetched from (:func:`check_base_url`);
    --workdir (:func:`check_workdir`, the own guest's and a target's); with an
    SSH target --programs (rxl.verify.target.programs_in) and the client key; and the harness key
    whenever SSH may be used (``ssh``: not ``--transport serial``); for the
    own guest of a real run, the installed QEMU against the shape
    (rxl.verify.ownguest.check_qemu: HostError, exit 1), but not under
    ``check_only``, which make run runs before rxl doctor --install brings
    the QEMU it needs.
    Returns what --src is (rxl.tree.base.SrcKind), None without --src."""
    if not 1 <= req.case_timeout <= MAX_CASE_TIMEOUT:
        raise BadOption(f"{show(req.case_timeout, 24)}: must be 1.."
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
    except qemu.QemuMemoryError as exc:
        raise BadOption(exc.why, "--memory") from None
    except qemu.QemuConfigError as exc:
        raise DataError(f"guest configuration: {exc}") from None
    check_guest(cfg.vcpus, req.memory_mib)
    if req.target is None and not req.dry_run and not check_only:
        try:
            check_qemu(cfg)
        except qemu.QemuConfigError as exc:
            raise HostError(str(exc)) from None
    names = [n for n, _ in tree_world.BASE_TESTS]
    for name, source in req.extra_tests:
        if name in names:
            raise BadOption(f"{name}: a test program of that name is already "
                            "built (--atf-dir or an earlier --test)", "--test")
        names.append(name)
        check_test_source(name, source)
    own = [n for n in req.new_programs if n in dict(tree_world.BASE_TESTS)]
    if own:
        raise BadOption(f"{', '.join(own)}: FreeBSD's own test program, which must pass "
                        "on pristine too; a new program is one of --atf-dir or --test",
                        "--new-program")
    if req.programs_dir is None:  # else the programs are DIR's: checked with it, below
        check_new_programs(req.new_programs, names)
    for kernel, opt in ((req.kernel, "--kernel"), (req.pristine_kernel, "--pristine-kernel")):
        if kernel:  # the one check of a kernel to boot, its version string too (what
            # --install-kernel's plan reads), for the own guest and a target alike
            tree_build.check_kernel_file(kernel, opt)
            tree_build.check_kernel_release(kernel, opt, req.src)
    if req.kernel and req.pristine_kernel:
        tree_build.check_kernel_pair(req.kernel, req.pristine_kernel,
                                     "the run boots the patched and the pristine kernel to "
                                     "compare them, and the series' cases would pass on both "
                                     "(the verdict would be FAIL)")
    if req.pristine_src:
        try:
            tree_base.check_tree_dir(req.pristine_src, "--pristine-src")
        except tree_base.TreeError as exc:
            raise BadOption(str(exc).partition(" ")[2], "--pristine-src") from None
        tree_build.check_tree_release(req.pristine_src, "--pristine-src", req.src)
    if req.target is not None or ssh:
        check_keys(req)
    # the own guest runs the tests in --workdir as a target does: one check
    check_workdir(req.workdir)
    if req.target is not None:
        if req.programs_dir is not None:  # a target's programs are DIR's, no others
            check_new_programs(req.new_programs, sorted(programs_in(req.programs_dir)),
                               f", the programs of --programs {show(req.programs_dir)}")
        if not target_needs_tree(req):
            return None  # no tree is used: the programs are given, no kernel is built
    if req.src is not None and not req.series:
        try:
            tree_base.check_tree_dir(req.src)
            # the tree is built as it is: its release picks the compilers
            tree_version.require_release(req.src, "the cross compiler and the test "
                                         "programs' target are chosen by it")
        except (tree_base.TreeError, tree_version.VersionError) as exc:
            raise BadOption(str(exc).partition(" ")[2], "--src") from None
        check_module_config(req)
        return "as-is"
    if req.src is None:
        if shutil.which("git") is None:
            raise HostError("git is not installed, so the base cannot be fetched: "
                            "rxl doctor --install, or give --src")
        check_base_url(req.base_url)
        return None
    try:
        kind = tree_base.classify(req.src)
    except tree_base.TreeError as exc:
        raise BadOption(str(exc).partition(" ")[2], "--src") from None
    if kind == tree_base.SrcKind.PLAIN_APPLIED and req.target is None \
            and not req.pristine_kernel and not req.pristine_src:
        raise BadOption(f"{req.src} is not a git clone, so no pristine kernel can "
                        "be built from it and the verdict would be FAIL; give "
                        "--pristine-kernel or --pristine-src, or a git clone", "--src")
    check_module_config(req)
    return kind


def check_new_programs(new_programs, names, where: str = "") -> None:
    """Refuse (BadOption, ``--new-program``) a new program that is none of the
    run's programs ``names`` (``where``: whose they are)."""
    unknown = [n for n in new_programs if n not in names]
    if unknown:
        raise BadOption(f"{', '.join(unknown)}: not a test program of this run "
                        f"(known: {', '.join(names)}{where})", "--new-program")


def check_module_config(req: RunRequest) -> None:
    """With ``--modules`` and a ``--src`` tree (checked), refuse a tree without
    the kernel config the module boot builds (rxl.tree.modules.MODULE_KERNCONF,
    MINIMAL; the series leaves it alone), as ``rxl build --modules`` does
    (rxl.tree.kernconf.check_kernconf). Raises BadOption naming --modules."""
    if req.modules and req.src:
        check_kernconf(req.src, tree_modules.MODULE_KERNCONF, "--modules")


def target_needs_tree(req: RunRequest) -> bool:
    """Whether a run on an SSH target uses a FreeBSD tree: to build the test
    programs (no ``--programs``) or the kernel ``--install-kernel`` boots (no
    ``--kernel``)."""
    return req.programs_dir is None or (req.install_kernel and not req.kernel)


def check_keys(req: RunRequest) -> None:
    """Refuse a client key SSH could not log in with, before anything runs: the
    target's ``key:`` (rxl.guest.targets checks it when the target is named),
    else the harness key when it exists (it is made on first use otherwise).
    Raises rxl.guest.sshkeys.KeyFileError (exit 2)."""
    if req.target is not None and req.target.key:
        sshkeys.check_key_file(req.target.key)
        return
    own = sshkeys.ssh_dir(Path(req.work) if req.work else None) / "id_ed25519"
    if own.exists() or own.is_symlink():
        sshkeys.harness_key(Path(req.work) if req.work else None)


def check_base_url(override: Optional[str]) -> None:
    """Refuse a base the series stage could not fetch: ``--base-url`` (or
    ``$RXL_BASE_URL``) naming a local directory that does not exist, is not a
    git repository or lacks patches/BASE's commit, a URL whose scheme git
    cannot fetch over, one holding a blank or control character, a host
    (URL or scp ``host:path`` form) starting with '-' (git would pass it to
    ssh as an option), or git's ``TRANSPORT::ADDRESS`` form (``ext::`` runs a
    command). A remote URL is not contacted (that is the series stage's
    work); GitHub's default is not checked."""
    if override is not None:
        url, opt = override, "--base-url"
    elif os.environ.get(tree_base.URL_ENV):
        url, opt = os.environ[tree_base.URL_ENV], f"${tree_base.URL_ENV}"
    else:
        return
    if any(c.isspace() or not c.isprintable() for c in url):
        raise BadOption(f"{show(url)}: holds a blank or control character: no URL or "
                        "path git fetches from", opt)
    scheme, sep, rest = url.partition("://")
    if not sep and re.match(r"[A-Za-z][A-Za-z0-9+.-]*::", url):
        raise BadOption(f"{show(url)}: git's TRANSPORT::ADDRESS form runs a remote helper "
                        "(ext:: a command): give an https, http, git, ssh or file URL", opt)
    if sep:
        if scheme not in ("https", "http", "git", "ssh", "file"):
            raise BadOption(f"{show(url)}: git fetches over https, http, git, ssh or file "
                            f"URLs, not {show(scheme, 20)}", opt)
        try:  # what git refuses at fetch time: an unclosed '[' (a bracketed host is
            # an IPv6 address), an http(s)/git port that is no number in 0..65535
            parts = urllib.parse.urlsplit(url)
            if scheme in ("https", "http", "git"):
                parts.port  # noqa: B018 (read for its ValueError)
        except ValueError as exc:
            raise BadOption(f"{show(url)}: not a URL ({exc})", opt) from None
        if scheme != "file":
            host = rest.split("/", 1)[0].rpartition("@")[2]
            if not host or host.startswith("-"):
                raise BadOption(f"{show(url)}: " + ("no host" if not host else
                                f"the host {show(host, 40)} starts with '-' (ssh would read "
                                "an option)"), opt)
            return
        url = rest
    elif re.fullmatch(r"[^/:]+:.*", url):  # git's host:path (scp) form
        host = url.split(":", 1)[0].rpartition("@")[2]
        if host.startswith("-"):
            raise BadOption(f"{show(url)}: the host {show(host, 40)} starts with '-' (ssh "
                            "would read an option)", opt)
        return
    path = Path(url).expanduser()
    if not path.is_dir():
        raise BadOption(f"{show(url)}: {missing(path, 'directory')} (a local base is a git "
                        "repository holding patches/BASE's commit)", opt)
    base = parse_base((tree_base.REPO_PATCHES / "BASE").read_text())

    def git(*args: str) -> int:
        return subprocess.run(["git", "-C", str(path), *args], capture_output=True).returncode

    if git("rev-parse", "--git-dir") != 0:
        raise BadOption(f"{show(url)}: not a git repository", opt)
    if git("cat-file", "-e", f"{base.commit}^{{commit}}") != 0:
        raise BadOption(f"{show(url)}: does not have the base commit {base.commit[:12]} "
                        f"(patches/BASE, from {base.repository})", opt)


#: Characters a target's work directory may hold: it goes into remote shell
#: commands and into the printed undo (``rm -rf WORKDIR``).
_WORKDIR_CHARS = re.compile(r"[A-Za-z0-9._/-]+")
#: Where a work directory may be: the directories for temporary files every
#: FreeBSD machine has (hier(7)), whose contents nothing else depends on.
WORKDIR_PARENTS = ("/tmp", "/var/tmp")
#: FreeBSD's longest file name and path, the NUL included (sys/sys/syslimits.h).
NAME_MAX, PATH_MAX = 255, 1024


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
    long = next((part for part in workdir.split("/") if len(part) > NAME_MAX), None)
    if long is not None or len(workdir) >= PATH_MAX:
        raise BadOption(f"{show(workdir)}: " + (
            f"a name of {len(long)} characters, over FreeBSD's NAME_MAX of {NAME_MAX}"
            if long is not None else f"over FreeBSD's PATH_MAX of {PATH_MAX} bytes") +
            ": the target cannot make it", hint)
    norm = "/" + os.path.normpath(workdir).lstrip("/")  # POSIX keeps a leading //

    def below(path: str) -> bool:
        return any(path.startswith(p + "/") for p in WORKDIR_PARENTS)

    if not below(norm):
        raise BadOption(f"{workdir}: a work directory is one of the harness's own below "
                        f"/tmp or /var/tmp (the undo is rm -rf {norm}), e.g. "
                        "/var/tmp/rxl", hint)
    if norm != workdir:
        raise BadOption(f"{workdir}: give it as {norm} (no '.', '..', '//' or trailing "
                        "'/': the undo removes exactly this path)", hint)
    dot = next((part for part in workdir.split("/")[2:] if part.startswith(".")), None)
    if dot is not None:
        raise BadOption(f"{workdir}: no name in it may start with '.' ({dot}: a hidden "
                        "directory such as .ssh is not the harness's to remove)", hint)


#: What ``--check-only`` says of each kind of --src (rxl.tree.base.SrcKind).
CHECKED = {"applied": "the series is applied; it is built as it is",
           "base": "holds the base; the series will be applied in a work clone under "
                   "$RXL_WORK (the tree itself is not touched)",
           "plain": "not a git tree; the series' files are there; built as it is",
           "own-applied": "of the series' release from another history, carrying the "
                          "series; built as it is",
           "own-base": "of the series' release from another history; the series will be "
                       "applied on its HEAD in a work clone under $RXL_WORK, and the tree "
                       "itself is the pristine one",
           "as-is": "--no-series: built and booted as it is; the series' cases are absent"}
#: What it adds when the run goes to an SSH target and builds from the tree.
CHECKED_TARGET = "; the test programs are built from it and the target's kernel runs them"

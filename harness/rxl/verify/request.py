"""What one ``rxl run`` is asked to do: a request type per stage, composed.

As Linux KUnit's ``KunitBuildRequest`` extends its config request, each
request here holds the options its stages read and extends the one whose
stages come first; :class:`RunRequest` is all of them, the one object the
pipeline hands to every stage.  A stage's signature names the narrowest
type it reads.  Each type is filled by one option group of ``rxl run``
(:mod:`rxl.cli.groups`); the request is never rewritten once made.  Paths
are absolute.

=====================  ====================================  =====================
request                its stages                            option group
=====================  ====================================  =====================
:class:`ReportRequest` every stage: ``--out``, ``--dry-run``  ``report``
:class:`TreeRequest`   series: the FreeBSD tree               ``tree``
:class:`BuildRequest`  build: the kernels                     ``build``
:class:`CasesRequest`  world, the cases, the verdict          ``cases``
:class:`GuestRequest`  image, boot, parse: the own guest      ``guest``
:class:`TargetRequest` target, tests: a machine over SSH      ``target``
=====================  ====================================  =====================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from rxl.guest.ssh import SSHTarget
from rxl.guest.targets import Shape


@dataclass
class ReportRequest:
    """``out``: the directory of logs and reports; ``dry_run``: only plan, and
    print every command."""

    out: str = ""
    dry_run: bool = False


@dataclass
class TreeRequest(ReportRequest):
    """The tree of the patched kernel. ``src``: the FreeBSD tree given (None:
    fetch the base); ``base_url``: where to fetch it from
    (rxl.tree.base.base_url); ``work``: the root of fetched trees and work
    clones ($RXL_WORK); ``lock``: the build lock, held while a tree there changes;
    ``series``: False (``--no-series``): the tree is built and booted as it is, without
    the series, whose cases are then absent."""

    src: Optional[str] = None
    base_url: Optional[str] = None
    work: str = ""
    lock: Optional[str] = None
    series: bool = True


@dataclass
class BuildRequest(TreeRequest):
    """The kernels. ``objdir``: MAKEOBJDIRPREFIX; ``kernel`` /
    ``pristine_kernel``: kernels to boot instead of building; ``pristine_src``:
    a checkout of the base to build the pristine kernel from; ``auto_pristine``:
    without either, check out patches/BASE's commit from the tree and build it;
    ``guest_dir``: where run roots, test binaries and pristine checkouts go."""

    objdir: str = ""
    guest_dir: str = ""
    kernel: Optional[str] = None
    pristine_kernel: Optional[str] = None
    pristine_src: Optional[str] = None
    auto_pristine: bool = True


@dataclass
class CasesRequest(ReportRequest):
    """The ATF programs and their cases. ``extra_tests``: (name, C source)
    built besides FreeBSD's own; ``new_programs``: programs that must fail on
    the pristine kernel; ``case_timeout``: seconds per case; ``atf_vars``:
    (name, value) ATF configuration variables every case gets as ``-v
    name=value``; ``rebuild_world``: ignore the userland's stamp."""

    extra_tests: Tuple[Tuple[str, str], ...] = ()
    new_programs: Tuple[str, ...] = ()
    case_timeout: int = 300
    atf_vars: Tuple[Tuple[str, str], ...] = ()
    rebuild_world: bool = False


@dataclass
class GuestRequest(ReportRequest):
    """The own QEMU guest. ``memory_mib``: guest memory; ``shape``: a named
    shape (rxl.guest.targets.Shape) instead; ``spread``: also boot commit 1's
    core_spread=1 and =2; ``tests_on_spread``: the suite on those boots too;
    ``ssh_wait``: seconds a boot over SSH waits for sshd
    (rxl.guest.up.UP_TIMEOUT by default); ``ssh_fallback``: a boot whose SSH
    never answers (and whose console shows no panic) runs again on the serial
    console (``--transport auto``, not ``ssh``); ``modules``: also boot MINIMAL
    with the NIC's modules, which ``kldload`` must load (rxl.verify.modboot);
    ``boot_jobs``: how many of those boots run at once (rxl.verify.schedule; 1:
    one after another, in order), ``boot_jobs_default``: it is ``--boot-jobs``'
    default (rxl.verify.schedule.default_jobs), not given."""

    memory_mib: int = 1024
    shape: Optional[Shape] = None
    spread: bool = True
    tests_on_spread: bool = False
    ssh_wait: float = 300.0
    ssh_fallback: bool = True
    modules: bool = False
    boot_jobs: int = 1
    boot_jobs_default: bool = False


@dataclass
class TargetRequest(ReportRequest):
    """A machine reached over SSH (and the own guest's SSH session).
    ``target``: where (None: the own guest); ``install_kernel``: boot the
    patched kernel there once; ``workdir``: the one directory the run writes
    there; ``kyua``: None = use kyua on the own guest over SSH (its userland has
    it) and on a target that has it; ``programs_dir``:
    ATF programs built already."""

    target: Optional[SSHTarget] = None
    install_kernel: bool = False
    workdir: str = "/var/tmp/rxl"
    kyua: Optional[bool] = None
    programs_dir: Optional[str] = None


@dataclass
class RunRequest(BuildRequest, CasesRequest, GuestRequest, TargetRequest):
    """Everything one ``rxl run`` is asked: the union of the requests above."""

"""The module boot of ``rxl run --modules``: a MINIMAL kernel that loads its NIC driver.

The test kernels are built without modules (``NO_MODULES``), so a series that
breaks a module Makefile passes every other check: issue 23 found a commit
that added ``iflib_spread.c`` to ``sys/conf/files`` but not to
``sys/modules/iflib/Makefile``, and ``kldload if_em`` failed on a kernel without
``device iflib``. With ``--modules`` the run adds one stage, ``modules``, on the
own guest, whatever the transport (the check is the boot itself, so the serial
console serves both):

1. build MINIMAL (amd64's has neither iflib nor em(4)) with the modules
   :func:`rxl.tree.modules.build_list` names (iflib, em and those the series
   touches), and check that they link against it
   (:func:`rxl.tree.build.check_modules`: a missing symbol, or a relocation type
   the kernel linker does not apply, fails here, before a boot); below clang 19
   (the 14 base's clang 16) without the stack protector
   (:data:`rxl.tree.build.NO_SSP_MAKE_VARS`);
2. stage a console root: the run's userland, the MINIMAL kernel, the modules in
   ``/boot/kernel`` (the loader loads what the root needs and MINIMAL lacks,
   :func:`rxl.tree.modules.root_modules`: msdosfs and geom_part_mbr, and, when the
   tree's MINIMAL has no ``device ahci`` (14.0's), cam and ahci), and an rc whose
   only cases are this boot's two (:func:`rc_lines`): ``modules:kldload``
   (``kldload if_em`` exits 0) and ``modules:nic`` (``ifconfig -l`` then lists
   the guest NIC's first interface, ``igb0`` or ``em0`` by the guest's shape);
3. boot it with the console watched (``console-modules.log``) and parse it into
   the run's results as the ``modules`` run: the report and JUnit show it like any
   run, and :func:`reasons` makes both cases a condition of the verdict.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import List, Mapping

from rxl.errors import RxlError, counted, reason
from rxl.guest import console, image, qemu
from rxl.guest.protocol import MARK
from rxl.tree import build as tree_build
from rxl.tree import modules as tree_modules
from rxl.tree import patch as tree_patch
from rxl.tree import base as tree_base
from rxl.verify import parse
from rxl.verify.pipeline import RunState, StageFailed, StageRecord
from rxl.verify.request import RunRequest

#: The run label of the module boot, and its cases' program name.
LABEL = "modules"
#: Its cases, in order.
CASES = ("kldload", "nic")


def rc_lines(kld: str, nic: str, mark: str = MARK) -> List[str]:
    """The rc's shell lines of the module boot (run inside its ATF block,
    :func:`render_rc`): list both cases, then
    ``kldload <kld>`` (``modules:kldload`` passes on exit 0, else fails with
    kldload's message and kldstat's list) and ``ifconfig -l`` holding ``nic``
    (``modules:nic``). Raises ValueError for a word that is not plain."""
    for w in (kld, nic):
        if not w or not all(c.isalnum() or c in "_." for c in w):
            raise ValueError(f"module boot: {w!r} is not a plain name")
    p = LABEL
    return [
        f'echo "{mark} LIST {p} kldload"',
        f'echo "{mark} LIST {p} nic"',
        f'out=$(kldload {kld} 2>&1); rc=$?',
        'if [ $rc -eq 0 ]; then res=passed; else '
        f'res="failed: kldload {kld}: $(echo $out) (loaded: $(kldstat -q 2>/dev/null | '
        'tr -s \' \\n\' \' \'))"; fi',
        f'echo "{mark} CASE {p} kldload rc=$rc t=0 $res"',
        'ifs=$(ifconfig -l)',
        f'case " $ifs " in *" {nic} "*) rc=0; res=passed ;; '
        f'*) rc=1; res="failed: no {nic} among the interfaces: $ifs" ;; esac',
        f'echo "{mark} CASE {p} nic rc=$rc t=0 $res"',
    ]


def render_rc(nic_driver: str) -> str:
    """The module boot's ``/etc/rc``: :func:`rc_lines` inside the rc's ATF
    block, where the console parser counts LIST and CASE lines."""
    return image.render_rc(LABEL, [], atf_lines=rc_lines(tree_modules.NIC_KLD,
                                                         f"{nic_driver}0"))


def _series_files() -> List[str]:
    try:
        return [f.path for p in tree_patch.load_series(tree_base.REPO_PATCHES) for f in p.files]
    except tree_patch.SeriesError:
        return []


def stage(req: RunRequest, st: RunState, guest_config, nic_driver: str) -> StageRecord:
    """The ``modules`` stage (see the module docstring), for a run with ``--modules``.
    ``guest_config(root, req)``: the own guest's QEMU config of a root;
    ``nic_driver``: its NIC's driver (``igb``). Raises StageFailed naming the log."""
    src, objdir = st.src, req.objdir
    kconf = tree_modules.MODULE_KERNCONF
    unread = []
    try:
        root_mods = tree_modules.root_modules(src, kconf)
    except tree_modules.ModuleError as exc:
        if not req.dry_run:
            raise StageFailed(f"modules: {reason(exc)}") from None
        # a dry run of a tree not there yet (the base before its fetch)
        root_mods = list(tree_modules.ROOT_MODULES)
        unread = [f"# root disk: {exc}; cam and ahci are added when {kconf} lacks "
                  "device scbus and device ahci"]
    mods = tree_modules.build_list(src, _series_files())
    mods += [m for m in root_mods if m not in mods]
    stages = tree_build.plan_stages(src, objdir, kernconf=kconf, toolchain=False,
                                    modules=mods)
    cmds = tree_build.shell_lines(stages)
    root = str(st.stage_dir / LABEL)
    kernel = str(tree_build.kernel_path(src, objdir, kconf))
    log = str(Path(req.out) / f"console-{LABEL}.log")
    if req.dry_run:
        argv = qemu.build_argv(guest_config(root, req),
                               firmware=qemu.find_ovmf() or qemu.OVMF_CANDIDATES[0])
        ssp = ([f"# WITHOUT_SSP: {tree_build.NO_SSP_WHY}"]
               if all(f"{k}={v}" in stages[-1].argv
                      for k, v in tree_build.NO_SSP_MAKE_VARS.items()) else [])
        cmds += ssp + unread + [f"# loader loads {', '.join(root_mods)} before the kernel "
                                "starts (the root's file system, slice and disk)",
                                f"# link check: nm of {', '.join(mods)} against {kconf}'s kernel.full, "
                       f"their relocation types against {tree_modules.ELF_MACHDEP}'s",
                       f"# root {root}: the userland, {kernel}, the modules in /boot/kernel; "
                       f"the rc runs kldload {tree_modules.NIC_KLD} and looks for "
                       f"{nic_driver}0", shlex.join(argv)]
        st.logs[LABEL] = log
        return StageRecord(LABEL, "planned", commands=cmds,
                           detail=f"{kconf} with {' '.join(mods)}")
    try:
        res = tree_build.build_kernel(src, objdir, kernconf=kconf, modules=mods,
                                      logdir=req.out, echo=st.echo)
    except RxlError as exc:   # a failed build, a module that would not load, no nm
        raise StageFailed(f"modules: {reason(exc)}") from None
    kos: Mapping[str, str] = res[-1].extra["modules"]
    progs = {g: str(p) for g, p in st.world.programs.items()}
    progs.update({f"/boot/kernel/{Path(p).name}": p for p in kos.values()})
    try:
        libs = image.resolve_libs([p for g, p in progs.items()
                                   if not g.startswith(("/libexec/ld-elf", "/boot/"))],
                                  str(st.world.sysroot))
        acts = image.plan_root(loader_efi=str(st.world.loader_efi), kernel=kernel,
                               programs=progs, libs=libs, tests={},
                               loader_rc=image.render_loader_rc({}, modules=[
                                   Path(kos[m]).stem for m in root_mods]),
                               rc=render_rc(nic_driver))
        image.stage_root(root, acts)
        argv = qemu.build_argv(guest_config(root, req), firmware=qemu.find_ovmf())
    except (RxlError, ValueError, OSError) as exc:
        raise StageFailed(f"modules: image: {reason(exc)}") from None
    cmds.append(shlex.join(argv))
    st.logs[LABEL] = log
    st.echo(f"modules: QEMU started, console {log}")
    try:
        console.watch(console.SerialTransport(argv), log,
                      echo=lambda s: st.echo(f"  [{LABEL}] {s}"))
    except console.GuestError as exc:
        st.runs[LABEL] = parse.parse_file(log)
        raise StageFailed(f"modules: guest {exc.kind}: {exc}") from None
    except FileNotFoundError as exc:
        raise StageFailed(f"modules: {reason(exc)}") from None
    st.runs[LABEL] = run = parse.parse_file(log)
    bad = reasons(st.runs)
    return StageRecord(LABEL, "failed" if bad else "ok", commands=cmds, log=log,
                       detail=f"{kconf} with {' '.join(mods)}; " +
                       ("; ".join(bad) if bad else
                        f"kldload {tree_modules.NIC_KLD} ok, {nic_driver}0 attached "
                        f"({counted(len(run.cases), 'case')})"))


def reasons(runs: Mapping[str, parse.RunResult]) -> List[str]:
    """The verdict's rule for the module boot: when there is a ``modules`` run, each of
    :data:`CASES` is in it and passed. Empty when there is no such run."""
    run = runs.get(LABEL)
    if run is None:
        return []
    got = {c.case: c for c in run.cases if c.prog == LABEL}
    out = []
    for case in CASES:
        c = got.get(case)
        if c is None:
            out.append(f"{LABEL}:{case}: not run")
        elif c.status != "passed":
            out.append(f"{LABEL}:{case}: {c.status}" + (f" ({c.reason})" if c.reason else ""))
    return out

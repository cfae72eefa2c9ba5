"""The own QEMU guest, two of the run interface's machines: the serial console and SSH.

Both boot the same guests (:func:`boots`: patched, the spread boots with
commit 1's tunable, pristine), one QEMU per staged root
(:func:`rxl.guest.qemu.build_argv` of :func:`guest_config`).

:class:`SerialGuest` (``--transport serial``): the guest's rc runs the cases
on the console and powers off.

    image   one root per boot (:mod:`rxl.guest.image`): the kernel, the narrowed
            userland, the ATF programs, an rc that runs them between sentinel lines
    boot    QEMU per root, the console teed to ``console-<label>.log`` and watched
            (:func:`rxl.guest.console.watch`) to the rc's end marker, a panic or a hang
    parse   each console log -> results (:mod:`rxl.verify.parse`)

:class:`SSHGuest` (``--transport ssh``, and ``auto``, the default; run on real
guests on 2026-12-01, docs/results/ssh.md, its verdicts compared with the
serial run's there):

    world   the sshd userland with kyua (:mod:`rxl.tree.sshworld`,
            :mod:`rxl.tree.kyuaworld`, own objdir; built when a product is
            missing) and the ATF programs linked against its sysroot
    image   one root per boot (:func:`rxl.guest.sshguest.stage_ssh_root`): sshd, its
            files and a new host key, an rc that starts sshd and holds; no tests in
            the image (they are copied over SFTP)
    boot    per boot: QEMU with the serial console to ``serial-<label>.log`` (the boot
            and panic watch) and a free loopback port forwarded to the guest's port
            22; wait for SSH; then what a target gets (:class:`rxl.verify.remote.RemoteRun`:
            probe, copy the programs and run.sh, run the cases on kyua (``--no-kyua``:
            one by one) streamed to ``console-<label>.log``); stop QEMU
    parse   the SSH stream's sentinel lines as the console's, with the kernel's own
            messages from the serial log (panics, WITNESS warnings, known lock order
            reversals: :func:`kernel_messages`), which never reach the SSH stream

The boots are independent: ``--boot-jobs N`` runs N at a time, the module boot
among them (:meth:`SerialGuest.run_boots`, :mod:`rxl.verify.schedule`), their
logs and results put back in the boots' order before the parse stage.

``report`` is the same for both, so their verdicts compare one to one.  While
it waits for SSH (``--ssh-wait``) a boot watches the serial log and QEMU
(:func:`wait_ssh`): a panic, trap or debugger entry there
(:data:`rxl.guest.protocol.PANIC_PATTERNS`), or QEMU exiting, is a crashed
boot and fails it at once, naming the line and the log.  When SSH never
answers and the console shows no crash, that boot runs again the serial way
(``--transport auto``, :meth:`SSHGuest.fallback`; the sshd userland is a
superset of the serial root's programs); the run's notes and report.txt say
which boot fell back and why.  With ``--transport ssh`` it is a failed boot
instead (docs/design.md says why).  ``--transport auto`` takes SSH whenever
paramiko imports, building the userland on first use (:func:`choose`).
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from rxl import paths
from rxl.errors import MachineError, RxlError, counted, reason
from rxl.guest import console, image, qemu, sshguest
from rxl.guest.protocol import MARK, PANIC_PATTERNS, host_sysctl_snapshot
from rxl.guest.ssh import DEFAULT_CONNECT_TIMEOUT, SSHError, SSHSession, SSHTarget, TimedOut
from rxl.guest.targets import Shape
from rxl.tree import base as tree_base
from rxl.tree import build as tree_build
from rxl.tree import patch as tree_patch
from rxl.tree import sshworld
from rxl.tree import world as tree_world
from rxl.verify import modboot, parse, remote, schedule
from rxl.verify import report as report_mod
from rxl.verify.machine import BASE_PROGRAMS, Machine, planned_tests, quiet, test_cc_lines
from rxl.verify.pipeline import RunState, StageFailed, StageRecord
from rxl.verify.request import BuildRequest, GuestRequest, RunRequest

#: Loader tunable that turns on commit 1's spread for the guest's NIC (iflib
#: device tunable, CTLFLAG_RDTUN under dev.<driver>.0.iflib): :func:`spread_tunable`.
SPREAD_TUNABLE = "dev.{driver}.0.iflib.core_spread"
#: The boots with commit 1's tunable and its value: spread (core_spread=1,
#: cores before SMT siblings, L3 groups in turn, in the NIC's domain).
SPREAD_BOOTS = {"spread": "1"}
#: What to do when the installed QEMU cannot run the guest's shape.
QEMU_ADVICE = ("run `rxl doctor --install` (on Debian 12 it adds bookworm-backports' "
               "QEMU 10), or pick a shape for this QEMU: --target guest-e1000e")


#: The boot stage's note on the host sysctls each rc records (rxl.verify.hostsysctl).
HOST_SYSCTL_PLAN = ("# each boot's rc (run.sh over SSH) records the host's lbgroup sysctls "
                    "before its cases, and after them unless kyua runs them: "
                    + host_sysctl_snapshot("before"))


def shape_of(req: GuestRequest) -> Shape:
    """The guest's shape: ``--target``'s, else the default one with ``--memory``."""
    return req.shape or Shape(memory_mib=req.memory_mib)


def spread_tunable(req: GuestRequest) -> str:
    """The core_spread tunable of the guest's NIC (``dev.igb.0.iflib.core_spread``)."""
    return SPREAD_TUNABLE.format(driver=shape_of(req).driver)


def check_qemu(cfg: qemu.GuestConfig,
               version: Optional[Tuple[int, int]] = None) -> None:
    """Refuse ``cfg`` when the installed QEMU (``cfg.qemu --version``, or ``version``)
    is older than its shape needs (rxl.guest.qemu.required_qemu). Raises
    rxl.guest.qemu.QemuConfigError (a DataError), one line with what to do."""
    qemu.check_qemu(cfg, version if version is not None else
                    qemu.installed_version(cfg.qemu), advice=QEMU_ADVICE)


def boots(req: BuildRequest, patched_kernel: str,
          pristine_kernel: Optional[str] = None) -> List[Tuple[str, str, Dict[str, str]]]:
    """The guest boots of a run: (label, kernel path, loader tunables). Pure.

    ``pristine_kernel``: the base's kernel (default ``req.pristine_kernel``);
    none means no pristine boot.
    """
    pristine_kernel = pristine_kernel or req.pristine_kernel
    out = [(run_label(req), patched_kernel, {})]
    if req.spread:
        for label, value in SPREAD_BOOTS.items():
            out.append((label, patched_kernel, {spread_tunable(req): value}))
    if pristine_kernel:
        out.append(("pristine", pristine_kernel, {}))
    return out


def run_label(req: BuildRequest) -> str:
    """The label of the boot of the tree's kernel: ``patched``, or ``tree`` with
    ``--no-series`` (the tree as it is)."""
    return "patched" if req.series else "tree"


def guest_config(root: str, req: GuestRequest) -> qemu.GuestConfig:
    """The QEMU guest of one boot (:func:`shape_of`)."""
    return shape_of(req).config(root)


def programs_for(req: RunRequest, label: str, guest_tests: Dict[str, str]) -> List[str]:
    """ATF programs a boot runs: all, except on the spread boots (placement only)
    unless --tests-on-spread (TCG: the suite costs minutes per boot)."""
    if label in SPREAD_BOOTS and not req.tests_on_spread:
        return []
    return sorted(guest_tests)


class SerialGuest(Machine):
    """The own guest whose rc runs the cases on the serial console."""

    PREPARE, RUN, COLLECT = "image", "boot", "parse"

    def prepare(self, req: RunRequest, st: RunState) -> StageRecord:
        """One guest root per boot under the run's staging directory."""
        assert st.world is not None and st.kernel is not None
        details = []
        for label, kernel, tunables in boots(req, st.kernel, st.pristine_kernel):
            root = str(st.stage_dir / label)
            st.roots[label] = root
            if req.dry_run:
                details.append(f"{label}: {root} (kernel {kernel}, tunables {tunables or '-'})")
                continue
            details.append(self.stage_console_root(req, st, label, kernel, tunables, root))
        return StageRecord("image", "planned" if req.dry_run else "ok",
                           detail="; ".join(details))

    def stage_console_root(self, req: RunRequest, st: RunState, label: str, kernel: str,
                           tunables: Dict[str, str], root: str) -> str:
        """Stage the root of a boot whose rc runs the cases on the console: the programs
        of ``st.world`` (the narrowed world, or the sshd userland, a superset, when an SSH
        boot falls back), ``kernel``, the ATF programs ``st.tests`` under /rxl/tests, the
        simple loader with ``tunables``. Returns the detail line; raises StageFailed."""
        progs = {g: str(p) for g, p in st.world.programs.items()}
        guest_tests = {f"/rxl/tests/{n}": str(p) for n, p in sorted(st.tests.items())}
        try:
            dyn = [p for g, p in progs.items() if g != "/libexec/ld-elf.so.1"]
            libs = image.resolve_libs(dyn, str(st.world.sysroot))
            acts = image.plan_root(
                loader_efi=str(st.world.loader_efi), kernel=kernel, programs=progs,
                libs=libs, tests=guest_tests,
                loader_rc=image.render_loader_rc(tunables),
                rc=image.render_rc(label, programs_for(req, label, guest_tests),
                                   case_timeout=req.case_timeout, atf_vars=req.atf_vars))
            info = image.stage_root(root, acts)
        except (RxlError, ValueError, OSError) as exc:
            raise StageFailed(f"image: {label}: {reason(exc)}") from None
        return f"{label}: {root} ({info['files']} files, {info['bytes'] >> 20} MiB)"

    def run_cases(self, req: RunRequest, st: RunState) -> StageRecord:
        """QEMU per staged root, its console teed to a log and watched; a guest
        that panics, hangs or times out fails the stage after every boot ran.
        ``--boot-jobs`` above 1: the boots (and the module boot) run that many at a
        time (:meth:`run_boots`)."""
        cmds = [self.schedule_line(req, st)]
        argvs = {}
        for label, root in st.roots.items():
            argvs[label] = argv = self.console_argv(req, root)
            cmds.append(shlex.join(argv))
            if req.dry_run:
                st.logs[label] = str(Path(req.out) / f"console-{label}.log")
        cmds.append(HOST_SYSCTL_PLAN)
        if req.dry_run:
            return StageRecord("boot", "planned", commands=cmds)
        done = self.run_boots(req, st, {label: (lambda lb=label: self.watch_console(
            req, st, lb, argvs[lb])) for label in st.roots})
        details = [d for d, _ in done.values()]
        failures = [f for _, f in done.values() if f]
        rec = StageRecord("boot", "failed" if failures else "ok", commands=cmds,
                          detail="; ".join(details), log=", ".join(st.logs.values()))
        for f in failures:
            st.echo(f"boot: {f}")
        return rec

    # ------------------------------------------------ the boots, N at a time
    def runs_cases(self, req: RunRequest, label: str) -> bool:
        """Whether boot ``label`` runs ATF programs (minutes under TCG), not placement only."""
        return bool(programs_for(req, label, {"-": ""}))

    def modules_beside(self, req: RunRequest) -> bool:
        """Whether the module boot runs in the boot stage's schedule, beside the boots
        (``--modules`` with ``--boot-jobs`` above 1), its stage then handing it on."""
        return req.modules and req.boot_jobs > 1

    def boot_labels(self, req: RunRequest, st: RunState) -> List[str]:
        """The boots in the order they start (rxl.verify.schedule.order), the module
        boot last when it runs beside them."""
        labels = schedule.order(list(st.roots), req.boot_jobs,
                                lambda lb: self.runs_cases(req, lb))
        return labels + ([modboot.LABEL] if self.modules_beside(req) else [])

    def schedule_line(self, req: RunRequest, st: RunState) -> str:
        """The boot stage's comment line saying how the boots are run."""
        source = (f"; its default, os.cpu_count() = {os.cpu_count()}"
                  if req.boot_jobs_default else "")
        line = schedule.describe(self.boot_labels(req, st), req.boot_jobs, source)
        if self.modules_beside(req):
            line += (f" ({modboot.LABEL}: the modules stage's build and boot, done here; "
                     "that stage hands on its record)")
        return line

    def run_boots(self, req: RunRequest, st: RunState,
                  jobs: Dict[str, Callable[[], Any]]) -> Dict[str, Any]:
        """Run ``jobs`` (boot label -> the boot, in the boots' order) ``req.boot_jobs`` at a
        time (rxl.verify.schedule.run_jobs), the module boot among them when
        :meth:`modules_beside` (its outcome kept in ``st.ahead`` for its stage).
        Returns label -> what each boot returned, in the boots' order, with
        ``st.logs`` and ``st.runs`` in that order too, whatever order the boots ended
        in. A boot that raised (StageFailed, an OSError) raises it here, the first in
        the boots' order, once every boot has ended."""
        labels = list(jobs)
        started = self.boot_labels(req, st)
        items = [(lb, jobs[lb]) for lb in started if lb in jobs]
        if self.modules_beside(req):
            items.append((modboot.LABEL, lambda: self.modules_job(req, st)))
        echo = st.echo
        if req.boot_jobs > 1:
            st.echo = schedule.locked_echo(echo)
        try:
            outcomes = schedule.run_jobs(items, req.boot_jobs)
        finally:
            st.echo = echo
        if modboot.LABEL in outcomes and modboot.LABEL not in jobs:
            st.ahead[modboot.LABEL] = outcomes.pop(modboot.LABEL)
        st.logs = schedule.in_order(st.logs, labels)
        st.runs = schedule.in_order(st.runs, labels)
        st.fallbacks = schedule.in_order(st.fallbacks, labels)
        for lb in labels:
            if outcomes[lb].error is not None:
                raise outcomes[lb].error
        return {lb: outcomes[lb].value for lb in labels}

    def modules_job(self, req: RunRequest, st: RunState) -> Tuple[RunState, Any, Any]:
        """The module boot's stage (rxl.verify.modboot.stage) run beside the boots, on a
        copy of ``st`` with logs and runs of its own (the parse stage reads only the
        boots'). Returns (that copy, its record or None, what it raised or None)."""
        view = dataclasses.replace(st, logs={}, runs={})
        try:
            return view, modboot.stage(req, view, guest_config, shape_of(req).driver), None
        except Exception as exc:  # raised again by its own stage, in its place
            return view, None, exc

    def console_argv(self, req: RunRequest, root: str) -> List[str]:
        """QEMU's argv for the console boot of ``root``. Raises StageFailed on a bad shape."""
        fw = qemu.find_ovmf()
        # snapshot=on: the staged directory is never written. The guest's
        # root stays read-only anyway (rc.j2 writes no file).
        cfg = guest_config(root, req)
        try:
            return qemu.build_argv(cfg, firmware=fw or qemu.OVMF_CANDIDATES[0]
                                   if req.dry_run else fw)
        except qemu.QemuConfigError as exc:
            raise StageFailed(f"boot: {reason(exc)}") from None

    def watch_console(self, req: RunRequest, st: RunState, label: str,
                      argv: List[str]) -> Tuple[str, Optional[str]]:
        """Boot ``argv`` with its console teed to ``<out>/console-<label>.log`` (set in
        ``st.logs``) and watched to the rc's end marker. Returns ``(detail, failure)``:
        failure is None, or the one line of a panic, hang or timeout (the log is kept for
        parse). Raises StageFailed when QEMU cannot be started."""
        log = str(Path(req.out) / f"console-{label}.log")
        st.logs[label] = log
        st.echo(f"boot: {label}: QEMU started, console {log}")
        try:
            res = console.watch(console.SerialTransport(argv), log,
                                echo=lambda s, lb=label: st.echo(f"  [{lb}] {s}"))
            return (f"{label}: end marker at {res.end_seen_at:.0f} s, "
                    f"QEMU exit after {res.seconds:.0f} s"), None
        except console.GuestError as exc:
            # Keep going: the other boots still tell us something; parse reports it.
            return (f"{label}: {exc.kind} after {exc.seconds:.0f} s",
                    f"{label}: guest {exc.kind}: {exc}")
        except FileNotFoundError as exc:
            raise StageFailed(f"boot: {reason(exc)}") from None

    def collect(self, req: RunRequest, st: RunState) -> StageRecord:
        """Each console log -> :class:`rxl.verify.parse.RunResult`."""
        if req.dry_run:
            return StageRecord("parse", "planned", detail=", ".join(st.logs.values()))
        for label, log in st.logs.items():
            st.runs[label] = parse.parse_file(log)
        detail = "; ".join(f"{k}: {v.outcome}, {counted(len(v.cases), 'case')}"
                           for k, v in st.runs.items())
        return StageRecord("parse", "ok", detail=detail)

    def modules(self, req: RunRequest, st: RunState) -> StageRecord:
        """``--modules``: the module boot on the console (rxl.verify.modboot); when it
        ran beside the boots (:meth:`modules_beside`), what it left: its log and run
        into ``st``, then its record, or what it raised."""
        ahead = st.ahead.get(modboot.LABEL)
        if ahead is None:
            return modboot.stage(req, st, guest_config, shape_of(req).driver)
        view, rec, exc = ahead.value
        st.logs.update(view.logs)
        st.runs.update(view.runs)
        if exc is not None:
            raise exc
        rec.detail += f"; built and booted beside the boots ({ahead.seconds:.0f} s)"
        return rec

    def case_runs(self, req: RunRequest, st: RunState) -> List[str]:
        """Every boot but the spread ones, which run no programs unless --tests-on-spread."""
        return [label for label in st.runs if label not in SPREAD_BOOTS or req.tests_on_spread]

    def verdict(self, req: RunRequest, st: RunState) -> report_mod.Verdict:
        """Every rule: new cases pass patched and fail pristine, base cases pass on
        both, the runs that ran programs hold cases, the spread boots place their
        queues, every run completed."""
        v = report_mod.verdict(
            st.runs, patched=run_label(req),
            pristine="pristine" if "pristine" in st.runs else None,
            placements={**{label: 0 for label in ("patched", "tree", "pristine")
                           if label in st.runs},
                        **{label: int(value) for label, value in SPREAD_BOOTS.items()
                           if label in st.runs}},
            new_programs=req.new_programs, base_programs=BASE_PROGRAMS,
            need_cases=self.case_runs(req, st))
        if "pristine" not in st.runs and req.series:
            v.ok = False
            v.reasons.append("pristine: no pristine kernel given (--pristine-kernel); "
                             "the must-fail-on-pristine rule is unchecked")
        return v


class CrashedBoot(MachineError):
    """The guest crashed before SSH answered (a panic line, QEMU gone): no fallback."""


class NoSSH(MachineError):
    """SSH never answered within the wait, and the console shows no crash."""

    def __init__(self, wait: float, waited: float, last: str):
        super().__init__(f"ssh never answered within {wait:.0f} s (waited {waited:.0f} s; "
                         f"last: {last})")
        self.wait, self.waited = wait, waited


def crash_line(serial: str) -> str:
    """The first line of the serial log ``serial`` that matches a panic pattern
    (:data:`rxl.guest.protocol.PANIC_PATTERNS`: panic, fatal trap, KDB entry), or ""."""
    try:
        text = Path(serial).read_text(errors="replace")
    except OSError:
        return ""
    return next((ln.strip() for ln in text.splitlines()
                 if any(p.search(ln) for p in PANIC_PATTERNS)), "")


#: The rc's line when sshd exits at start (rxl.guest.sshguest: ``SSHD failed (<status>)``).
SSHD_FAILED = f"{MARK} SSHD failed"
#: The last line sshd_diag prints (rxl.guest.sshguest.diag_lines): after it the guest
#: has said all it will about sshd.
SSHD_DIAG_DONE = "NOTE sshd_diag: -ddd -D"


def sshd_gone(serial: str) -> str:
    """The rc's ``SSHD failed`` line of the serial log ``serial`` once sshd_diag has
    finished (its last note printed, or no diagnostics in this rc), else "": sshd
    exited at start, so SSH will never answer and waiting longer only costs time."""
    try:
        text = Path(serial).read_text(errors="replace")
    except OSError:
        return ""
    lines = [ln.strip() for ln in text.splitlines()]
    failed = next((ln for ln in lines if ln.startswith(SSHD_FAILED)), "")
    if not failed:
        return ""
    diag = any("NOTE sshd_diag:" in ln for ln in lines)
    if diag and not any(SSHD_DIAG_DONE in ln for ln in lines):
        return ""
    return failed


def wait_ssh(session, proc, serial: str, wait: float, *, step: float = 10.0,
             interval: float = 2.0, clock: Callable[[], float] = time.monotonic,
             sleep: Callable[[float], None] = time.sleep) -> float:
    """Wait up to ``wait`` s for ``session`` (rxl.guest.ssh.SSHSession) to run a
    command, checking the serial log ``serial`` and QEMU (``proc``, a Popen) before
    each try of at most ``step`` s. Returns the seconds waited. Raises CrashedBoot
    (a panic pattern in the log, or QEMU exited), NoSSH (the wait is over, or the
    console says sshd exited at start: :func:`sshd_gone`), and
    lets AuthFailed / HostKeyChanged through (sshd answered: no reason to fall back)."""
    t0 = clock()
    last = "no attempt"
    while True:
        crash = crash_line(serial)
        if crash:
            raise CrashedBoot(f"the console shows {crash!r} before SSH answered")
        code = proc.poll()
        if code is not None:
            raise CrashedBoot(f"QEMU exited with code {code} before SSH answered")
        left = wait - (clock() - t0)
        gone = sshd_gone(serial)
        if gone:
            raise NoSSH(wait, clock() - t0, f"the console says {gone!r}")
        if left <= 0:
            raise NoSSH(wait, clock() - t0, last)
        tried = clock()
        try:
            session.wait_up(min(step, left), interval=interval)
            return clock() - t0
        except TimedOut as exc:
            last = str(exc).split("(last: ", 1)[-1].rstrip(")")
        if clock() - tried < interval:
            sleep(min(interval, max(0.0, wait - (clock() - t0))))


def kernel_messages(res: parse.RunResult, serial: str) -> parse.RunResult:
    """Add the panics, WITNESS warnings and known-LOR notes of the serial log ``serial``
    (its lines without the sentinel mark) to ``res`` and set its outcome as the
    console parser would. Returns ``res``."""
    try:
        text = Path(serial).read_text(errors="replace")
    except OSError:
        res.notes.append(f"no serial console log {serial}: kernel messages unchecked")
        return res
    k = parse.parse_console(ln for ln in text.splitlines()
                            if not ln.replace("\r", "").startswith(parse.MARK))
    res.panic_lines += k.panic_lines
    res.witness_lines += k.witness_lines
    res.notes += [n for n in k.notes if n.startswith("known lock order reversal")]
    if res.panic_lines:
        res.outcome = "panic"
    elif res.witness_lines and res.outcome == "completed":
        res.outcome = "witness"
    return res


class SSHGuest(SerialGuest):
    """The own guest with sshd: the cases over SSH once it answers; a boot whose
    SSH never does falls back to :class:`SerialGuest`'s way (``ssh_fallback``)."""

    def world(self, req: RunRequest, st: RunState) -> StageRecord:
        """The sshd userland with kyua (built if a product is missing) and the ATF
        programs."""
        src, objdir = st.src, sshworld.default_objdir()
        out = sshworld.ssh_world_outputs(src, objdir, kyua=True)
        tests_out = str(st.stage_dir / "tests")
        cmds = tree_build.shell_lines(sshworld.plan_ssh_world(src, objdir, kyua=True)) + \
            test_cc_lines(req, src, objdir, tests_out)
        st.world = out
        if req.dry_run:
            st.tests = planned_tests(req, tests_out)
            return StageRecord("world", "planned", commands=cmds,
                               detail=f"sshd userland with kyua in {objdir}")
        missing = out.missing()
        if missing:
            st.echo(f"world: sshd userland incomplete ({missing[0]} missing): building it, "
                    f"with kyua (logs in {req.out})")
            try:
                sshworld.build_ssh_world(src, echo=quiet(st.echo), kyua=True, logdir=req.out)
            except RxlError as exc:  # a failed stage, configure, the amalgamation's fetch
                raise StageFailed(f"world: {exc}") from None
        st.tests = tree_world.build_tests(src, objdir, tests_out, logdir=req.out,
                                          extra_sources=req.extra_tests, echo=quiet(st.echo))
        return StageRecord("world", "ok", commands=cmds,
                           detail=("built" if missing else "sshd userland present, not rebuilt")
                           + f" ({objdir}); {counted(len(st.tests), 'program')}")

    def prepare(self, req: RunRequest, st: RunState) -> StageRecord:
        """One SSH guest root per boot; the host key of each goes to ``st.host_keys``."""
        details = []
        for label, kernel, tunables in boots(req, st.kernel, st.pristine_kernel):
            root = str(st.stage_dir / label)
            st.roots[label] = root
            if req.dry_run:
                details.append(f"{label}: {root} (kernel {kernel}, tunables {tunables or '-'}, "
                               "sshd)")
                continue
            try:
                st.host_keys[label] = sshguest.stage_ssh_root(root, st.src, kernel, {},
                                                              label=label, tunables=tunables)
            except (RxlError, ValueError, OSError) as exc:
                raise StageFailed(f"image: {label}: {reason(exc)}") from None
            details.append(f"{label}: {root} (sshd, host key "
                           f"{st.host_keys[label].split()[1][:16]}...)")
        return StageRecord("image", "planned" if req.dry_run else "ok", detail="; ".join(details))

    def run_cases(self, req: RunRequest, st: RunState) -> StageRecord:
        """Per staged root: QEMU, SSH, the cases over SSH, QEMU stopped. A guest whose
        SSH never answers, or whose run fails, fails the stage after every boot ran.
        ``--boot-jobs`` above 1: that many boots at a time (:meth:`run_boots`), each
        with its own port, root and logs."""
        fw = qemu.find_ovmf() or (qemu.OVMF_CANDIDATES[0] if req.dry_run else None)
        cmds: List[str] = [self.schedule_line(req, st)]
        try:
            ports = schedule.distinct_ports(st.roots, sshguest.free_port)
        except RuntimeError as exc:
            raise StageFailed(f"boot: {reason(exc)}") from None
        plan: Dict[str, Tuple[List[str], int, str]] = {}
        for label, root in st.roots.items():
            port = ports[label]
            serial = str(Path(req.out) / f"serial-{label}.log")
            cfg = dataclasses.replace(guest_config(root, req), hostfwd=(sshguest.hostfwd(port),),
                                      mgmt_nic=sshguest.MGMT_NIC_MODEL,
                                      serial=f"file:{serial}", no_reboot=False)
            try:
                argv = qemu.build_argv(cfg, firmware=fw)
            except qemu.QemuConfigError as exc:
                raise StageFailed(f"boot: {reason(exc)}") from None
            plan[label] = (argv, port, serial)
            cmds += [shlex.join(argv), f"# then over ssh://root@127.0.0.1:{port} (waiting up to "
                     f"{req.ssh_wait:.0f} s): probe, sftp the programs and run.sh to "
                     f"{req.workdir}, sh {req.workdir}/run.sh",
                     "# if SSH never answers and the console shows no panic: " + (
                         f"the serial path (root {st.stage_dir / (label + '-serial')}, the rc "
                         "runs the cases on the console)" if req.ssh_fallback
                         else "a failed boot (--transport ssh: no fallback)")]
            if req.kyua is not False:
                cmds.append("# then kyua runs the cases (run.sh records the host sysctls "
                            "before them only); after it: sh -c "
                            + shlex.quote(host_sysctl_snapshot("after")))
        cmds.append(HOST_SYSCTL_PLAN)
        if req.dry_run:
            return StageRecord("boot", "planned", commands=cmds)
        done = self.run_boots(req, st, {label: (lambda lb=label: self.boot_job(
            req, st, lb, *plan[lb])) for label in st.roots})
        details = [d for d, _ in done.values()]
        failures = [f for _, f in done.values() if f]
        for f in failures:
            st.echo(f"boot: {f}")
        return StageRecord("boot", "failed" if failures else "ok", commands=cmds,
                           detail="; ".join(details + failures), log=", ".join(st.logs.values()))

    def boot_job(self, req: RunRequest, st: RunState, label: str, argv: List[str], port: int,
                 serial: str) -> Tuple[str, Optional[str]]:
        """One SSH boot of the boot stage (:meth:`boot_one`, the serial fallback when SSH
        never answers): ``(detail, failure or None)``; raises StageFailed."""
        st.echo(f"boot: {label}: QEMU started, serial console {serial}")
        try:
            return self.boot_one(req, st, label, argv, port, serial), None
        except NoSSH as exc:
            if not req.ssh_fallback:
                return f"{label}: failed", (f"{label}: {exc} (--transport ssh: no fallback to "
                                            f"the serial console; serial console {serial})")
            return self.fallback(req, st, label, str(exc).split(" (waited")[0])
        except (CrashedBoot, SSHError, remote.RemoteError, console.GuestError) as exc:
            panic = crash_line(serial)
            return f"{label}: failed", (f"{label}: {exc}" + (
                f"; console: {panic}" if panic and not isinstance(exc, CrashedBoot) else "")
                + f" (serial console {serial})")

    def boot_one(self, req: RunRequest, st: RunState, label: str, argv: List[str], port: int,
                 serial: str) -> str:
        """Boot one guest, run its cases over SSH, stop it. Returns the detail line;
        raises CrashedBoot/NoSSH/SSHError/RemoteError/GuestError on failure."""
        tests = {n: str(p) for n, p in st.tests.items()} \
            if programs_for(req, label, {n: "" for n in st.tests}) else {}
        t0 = time.monotonic()
        proc = qemu.launch(argv, str(Path(req.out) / f"qemu-{label}.log"))
        session = SSHSession(SSHTarget("127.0.0.1", port, own_host_key=st.host_keys[label],
                                       name=f"own guest ({label})"),
                             connect_timeout=min(DEFAULT_CONNECT_TIMEOUT, max(2.0, req.ssh_wait)))
        try:
            wait_ssh(session, proc, serial, req.ssh_wait)
            up = time.monotonic() - t0
            st.echo(f"boot: {label}: SSH after {up:.0f} s (port {port})")
            job = remote.RemoteJob(out=req.out, tests=tests, workdir=req.workdir, label=label,
                                   kyua=req.kyua is not False, case_timeout=req.case_timeout,
                                   atf_vars=req.atf_vars)
            run = remote.RemoteRun(session, job, echo=st.echo)
            info = run.probe()
            run.upload()
            log = str(Path(req.out) / f"console-{label}.log")
            st.logs[label] = log
            # its cases (kyua's, when kyua ran them) and the host sysctls after them
            st.runs[label] = run.run_tests(log)
            return (f"{label}: SSH after {up:.0f} s, cases done at {time.monotonic() - t0:.0f} s "
                    f"({info.bootfile if info else '?'})")
        finally:
            session.close()
            qemu.stop(proc)

    def fallback(self, req: RunRequest, st: RunState, label: str,
                 why: str) -> Tuple[str, Optional[str]]:
        """Run boot ``label`` the serial way after its SSH never answered: stage a
        console root (:meth:`SerialGuest.stage_console_root`) in ``<stage
        dir>/<label>-serial``, boot it with the console watched (``console-<label>.log``);
        record ``why`` in ``st.fallbacks``. Returns ``(detail, failure or None)``;
        raises StageFailed."""
        kernel, tunables = next((k, t) for lb, k, t in boots(req, st.kernel, st.pristine_kernel)
                                if lb == label)
        root = str(st.stage_dir / f"{label}-serial")
        st.fallbacks[label] = (f"{why}; fell back to the serial console (the rc ran the cases; "
                               f"the SSH boot's console: serial-{label}.log)")
        st.echo(f"boot: {label}: {why}; falling back to the serial console")
        staged = self.stage_console_root(req, st, label, kernel, tunables, root)
        detail, failure = self.watch_console(req, st, label, self.console_argv(req, root))
        return f"{label}: {why}; fell back to the serial console ({staged}); {detail}", failure

    def collect(self, req: RunRequest, st: RunState) -> StageRecord:
        """Each SSH boot's RunResult (as :meth:`boot_one` kept it: kyua's cases, the
        host sysctls after them; else its stream log parsed), with the kernel
        messages of its serial log."""
        if req.dry_run:
            return StageRecord("parse", "planned", detail=", ".join(st.logs.values()))
        for label, log in st.logs.items():
            if label in st.fallbacks:  # the console log itself: sentinels and kernel messages
                st.runs[label] = parse.parse_file(log)
                st.runs[label].notes.insert(0, f"transport: {st.fallbacks[label]}")
                continue
            # the SSH run's own result (kyua's cases are not in the log), else the log's
            res = st.runs.get(label) or parse.parse_file(log)
            st.runs[label] = kernel_messages(res, str(Path(req.out) / f"serial-{label}.log"))
        detail = "; ".join(f"{k}: {v.outcome}, {counted(len(v.cases), 'case')}"
                           for k, v in st.runs.items())
        return StageRecord("parse", "ok", detail=detail)


def run_tree(src: Optional[str], work: Optional[str] = None, series: bool = True) -> str:
    """The tree a run builds from ``src`` (rxl.tree.base.resolve, or with
    ``series`` False rxl.verify.machine's series_absent, without doing it):
    ``src`` itself when it carries the series (or the run leaves the series
    out: ``--no-series``), the work clone ``<work>/src-<HEAD[:12]>`` of a tree
    of the series' release from another history, else (no ``--src``, or a
    base-only tree) the work clone ``<work>/src-<base commit[:12]>``; without
    ``--src`` and the series, the base fetched, ``<work>/base-<base
    commit[:12]>`` (``work`` default ``$RXL_WORK``). The sshd userland is built
    for, and looked for under, this path."""
    base = tree_patch.parse_base((Path(tree_base.REPO_PATCHES) / "BASE").read_text())
    root = Path(work or paths.work_root()).resolve()
    clone = str(root / f"src-{base.commit[:12]}")
    if src is None:
        return clone if series else str(root / f"base-{base.commit[:12]}")
    src = str(Path(src).resolve())
    if not series:
        return src
    try:
        kind = tree_base.classify(src)
    except tree_base.TreeError:
        return src          # refused later, by the tree stage, in its own words
    if kind in (tree_base.SrcKind.APPLIED, tree_base.SrcKind.PLAIN_APPLIED,
                tree_base.SrcKind.OWN_APPLIED):
        return src
    if kind == tree_base.SrcKind.OWN_BASE:
        return str(root / f"src-{tree_base.head_commit(src)[:12]}")
    return clone


def choose(src: Optional[str], objdir: Optional[str] = None,
           work: Optional[str] = None, series: bool = True) -> Tuple[str, str]:
    """``--transport auto``: ("ssh", why) whenever paramiko imports, else ("serial",
    why). SSH is the main job's transport: the SSH run matched the serial run's
    verdicts on 2026-12-01 (docs/results/ssh.md), kyua runs the cases, and the
    serial console stays the boot and panic watch and the fallback of a boot
    whose SSH never answers. ``why`` says whether the sshd userland (with kyua) of
    the tree the run builds (:func:`run_tree`: ``src``, or its work clone under
    ``work``; ``series`` False: ``--no-series``) is already in ``objdir`` (default
    rxl.tree.sshworld.default_objdir()) or the world stage builds it first (its
    cold time: docs/results/guest-numa.md)."""
    try:
        import paramiko  # noqa: F401  (an optional dependency: rxl[guest])
    except ImportError:
        return "serial", "paramiko is not installed: pip install 'rxl[guest]'"
    tree = run_tree(src, work, series)
    missing = sshworld.ssh_world_outputs(tree, objdir, kyua=True).missing()
    if missing:
        return "ssh", (f"the world stage builds the sshd userland with kyua for {tree} "
                       f"first ({missing[0]} missing)")
    return "ssh", f"the sshd userland of {tree} is built"


def resolve(transport: str, src: Optional[str], echo: Callable[[str], None] = print,
            series: bool = True) -> str:
    """``--transport`` (auto, ssh, serial) -> ssh or serial; auto by :func:`choose`
    (``series`` False: the run's ``--no-series``), its choice and reason told to
    ``echo``."""
    if transport != "auto":
        return transport
    chosen, why = choose(src, series=series)
    echo(f"transport: {chosen} ({why})")
    return chosen

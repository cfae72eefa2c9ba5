"""``rxl run --transport ssh``: the own QEMU guest, the cases over SSH.

Run on real guests on 2026-12-01 (docs/results/ssh.md, verdicts compared
with the serial run there); the stages are also checked in dry runs and the
parse against real console logs (tests/unit/verify/test_sshrun.py).

The stages of :mod:`rxl.verify.stages` with three replaced:

    world   the sshd userland (:mod:`rxl.tree.sshworld`, own objdir; built when a
            product is missing) and the ATF programs linked against its sysroot
    image   one root per boot (:func:`rxl.verify.guestup.stage_ssh_root`): sshd, its
            files and a new host key, an rc that starts sshd and holds; no tests
            in the image (they are copied over SFTP)
    boot    per boot: QEMU with the serial console to ``serial-<label>.log`` (the
            boot and panic watch) and a free loopback port forwarded to the guest's
            port 22; wait for SSH; then what ``rxl run --target`` does
            (:class:`rxl.verify.remote.RemoteRun`: probe, copy the programs and
            run.sh, run it streamed to ``console-<label>.log``); stop QEMU

``parse`` reads the SSH stream's sentinel lines as the serial run reads the
console's, and adds the kernel's own messages from the serial log (panics,
WITNESS warnings, known lock order reversals: :func:`kernel_messages`), which
never reach the SSH stream; ``report`` is the serial run's, so the verdicts
compare one to one.

While it waits for SSH (``--ssh-wait``, default :data:`rxl.verify.guestup.UP_TIMEOUT`)
the boot watches the serial log and QEMU (:func:`wait_ssh`): a panic, trap or
debugger entry there (:data:`rxl.guest.protocol.PANIC_PATTERNS`), or QEMU
exiting, is a crashed boot and fails it at once, naming the line and the log.
When SSH never answers and the console shows no crash, the boot falls back to
the serial path for that boot (``--transport auto``, :func:`fallback`): a root
as the serial run stages it (the sshd userland is a superset of its programs),
QEMU again with the console watched, the rc running the cases; the run's notes
and report.txt say which boot fell back and why. With ``--transport ssh`` it is
a failed boot instead (docs/design.md says why). ``--transport serial`` runs the
old path for every boot.
"""

from __future__ import annotations

import dataclasses
import shlex
import time
from pathlib import Path
from typing import List, Optional, Tuple

from rxl.verify import stages
from rxl.verify.job import RunOptions, RunState, StageFailed, StageRecord, boots, guest_config


def world(opts: RunOptions, st: RunState) -> StageRecord:
    """The sshd userland (built if a product is missing) and the ATF programs."""
    from rxl.tree import sshworld
    from rxl.tree import world as world_mod
    from rxl.verify import guestup
    src, objdir = st.src, sshworld.default_objdir()
    out = sshworld.ssh_world_outputs(src, objdir)
    tests_out = str(st.stage_dir / "tests")
    cmds = [s.shell() for s in sshworld.plan_ssh_world(src, objdir)] + \
        stages.test_cc_lines(opts, src, objdir, tests_out)
    st.world = out
    if opts.dry_run:
        st.tests = {n: Path(tests_out) / n for n, _ in world_mod.BASE_TESTS}
        st.tests.update({n: Path(tests_out) / n for n, _ in opts.extra_tests})
        return StageRecord("world", "planned", commands=cmds, detail=f"sshd userland in {objdir}")
    missing = out.missing()
    if missing:
        st.echo(f"world: sshd userland incomplete ({missing[0]} missing): building it")
        guestup.build(src, echo=stages.quiet(st.echo))
    st.tests = world_mod.build_tests(src, objdir, tests_out, logdir=opts.out,
                                     extra_sources=opts.extra_tests, echo=stages.quiet(st.echo))
    return StageRecord("world", "ok", commands=cmds,
                       detail=("built" if missing else "sshd userland present, not rebuilt")
                       + f" ({objdir}); {len(st.tests)} programs")


def image(opts: RunOptions, st: RunState) -> StageRecord:
    """One SSH guest root per boot; the host key of each goes to ``st.host_keys``."""
    from rxl.verify import guestup
    details = []
    for label, kernel, tunables in boots(opts, st.kernel, st.pristine_kernel):
        root = str(st.stage_dir / label)
        st.roots[label] = root
        if opts.dry_run:
            details.append(f"{label}: {root} (kernel {kernel}, tunables {tunables or '-'}, sshd)")
            continue
        try:
            st.host_keys[label] = guestup.stage_ssh_root(root, st.src, kernel, {},
                                                         label=label, tunables=tunables)
        except (guestup.GuestUpError, ValueError, OSError, RuntimeError) as exc:
            raise StageFailed(f"image: {label}: {exc}") from None
        details.append(f"{label}: {root} (sshd, host key {st.host_keys[label].split()[1][:16]}...)")
    return StageRecord("image", "planned" if opts.dry_run else "ok", detail="; ".join(details))


class CrashedBoot(RuntimeError):
    """The guest crashed before SSH answered (a panic line, QEMU gone): no fallback."""


class NoSSH(RuntimeError):
    """SSH never answered within the wait, and the console shows no crash."""

    def __init__(self, wait: float, waited: float, last: str):
        super().__init__(f"ssh never answered within {wait:.0f} s (waited {waited:.0f} s; "
                         f"last: {last})")
        self.wait, self.waited = wait, waited


def crash_line(serial: str) -> str:
    """The first line of the serial log ``serial`` that matches a panic pattern
    (:data:`rxl.guest.protocol.PANIC_PATTERNS`: panic, fatal trap, KDB entry), or ""."""
    from rxl.guest.protocol import PANIC_PATTERNS
    try:
        text = Path(serial).read_text(errors="replace")
    except OSError:
        return ""
    return next((ln.strip() for ln in text.splitlines()
                 if any(p.search(ln) for p in PANIC_PATTERNS)), "")


def wait_ssh(session, proc, serial: str, wait: float, *, step: float = 10.0,
             interval: float = 2.0, clock=time.monotonic, sleep=time.sleep) -> float:
    """Wait up to ``wait`` s for ``session`` (rxl.guest.ssh.SSHSession) to run a
    command, checking the serial log ``serial`` and QEMU (``proc``, a Popen) before
    each try of at most ``step`` s. Returns the seconds waited. Raises CrashedBoot
    (a panic pattern in the log, or QEMU exited), NoSSH (the wait is over), and
    lets AuthFailed / HostKeyChanged through (sshd answered: no reason to fall back)."""
    from rxl.guest.ssh import TimedOut
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


def _one(opts: RunOptions, st: RunState, label: str, argv: List[str], port: int,
         serial: str) -> str:
    """Boot one guest, run its cases over SSH, stop it. Returns the detail line;
    raises CrashedBoot/NoSSH/SSHError/RemoteError/GuestError on failure."""
    from rxl.guest.ssh import SSHSession, SSHTarget
    from rxl.guest.sshbase import DEFAULT_CONNECT_TIMEOUT
    from rxl.verify import guestup
    from rxl.verify import remote as R
    tests = {n: str(p) for n, p in st.tests.items()} \
        if stages.programs_for(opts, label, {n: "" for n in st.tests}) else {}
    t0 = time.monotonic()
    proc = guestup.launch(argv, str(Path(opts.out) / f"qemu-{label}.log"))
    session = SSHSession(SSHTarget("127.0.0.1", port, own_host_key=st.host_keys[label],
                                   name=f"own guest ({label})"),
                         connect_timeout=min(DEFAULT_CONNECT_TIMEOUT, max(2.0, opts.ssh_wait)))
    try:
        wait_ssh(session, proc, serial, opts.ssh_wait)
        up = time.monotonic() - t0
        st.echo(f"boot: {label}: SSH after {up:.0f} s (port {port})")
        job = R.RemoteJob(out=opts.out, tests=tests, workdir=opts.workdir, label=label,
                          kyua=bool(opts.kyua), case_timeout=opts.case_timeout,
                          atf_vars=opts.atf_vars)
        run = R.RemoteRun(session, job, echo=st.echo)
        info = run.probe()
        run.upload()
        log = str(Path(opts.out) / f"console-{label}.log")
        st.logs[label] = log
        run.run_tests(log)
        return (f"{label}: SSH after {up:.0f} s, cases done at {time.monotonic() - t0:.0f} s "
                f"({info.bootfile if info else '?'})")
    finally:
        session.close()
        guestup.stop(proc)


def fallback(opts: RunOptions, st: RunState, label: str, why: str) -> Tuple[str, Optional[str]]:
    """Run boot ``label`` the serial way after its SSH never answered: stage a console
    root (:func:`rxl.verify.stages.stage_console_root`) in ``<stage dir>/<label>-serial``,
    boot it with the console watched (``console-<label>.log``); record ``why`` in
    ``st.fallbacks``. Returns ``(detail, failure or None)``; raises StageFailed."""
    kernel, tunables = next((k, t) for lb, k, t in boots(opts, st.kernel, st.pristine_kernel)
                            if lb == label)
    root = str(st.stage_dir / f"{label}-serial")
    st.fallbacks[label] = (f"{why}; fell back to the serial console (the rc ran the cases; "
                           f"the SSH boot's console: serial-{label}.log)")
    st.echo(f"boot: {label}: {why}; falling back to the serial console")
    staged = stages.stage_console_root(opts, st, label, kernel, tunables, root)
    detail, failure = stages.watch_console(opts, st, label, stages.console_argv(opts, root))
    return f"{label}: {why}; fell back to the serial console ({staged}); {detail}", failure


def boot(opts: RunOptions, st: RunState) -> StageRecord:
    """Per staged root: QEMU, SSH, the cases over SSH, QEMU stopped. A guest whose
    SSH never answers, or whose run fails, fails the stage after every boot ran."""
    from rxl.guest import qemu as qemu_mod
    from rxl.guest import sshguest
    from rxl.guest.console import GuestError
    from rxl.guest.ssh import SSHError
    from rxl.verify import guestup
    from rxl.verify import remote as R
    fw = qemu_mod.find_ovmf() or (qemu_mod.OVMF_CANDIDATES[0] if opts.dry_run else None)
    cmds: List[str] = []
    details: List[str] = []
    failures: List[str] = []
    for label, root in st.roots.items():
        port = sshguest.free_port()
        serial = str(Path(opts.out) / f"serial-{label}.log")
        cfg = dataclasses.replace(guest_config(root, opts), hostfwd=(sshguest.hostfwd(port),),
                                  mgmt_nic=sshguest.MGMT_NIC_MODEL,
                                  serial=f"file:{serial}", no_reboot=False)
        try:
            argv = qemu_mod.build_argv(cfg, firmware=fw)
        except qemu_mod.QemuConfigError as exc:
            raise StageFailed(f"boot: {exc}") from None
        cmds += [shlex.join(argv), f"# then over ssh://root@127.0.0.1:{port} (waiting up to "
                 f"{opts.ssh_wait:.0f} s): probe, sftp the programs and run.sh to "
                 f"{opts.workdir}, sh {opts.workdir}/run.sh",
                 "# if SSH never answers and the console shows no panic: " + (
                     f"the serial path (root {st.stage_dir / (label + '-serial')}, the rc "
                     "runs the cases on the console)" if opts.ssh_fallback
                     else "a failed boot (--transport ssh: no fallback)")]
        if opts.dry_run:
            continue
        st.echo(f"boot: {label}: QEMU started, serial console {serial}")
        try:
            details.append(_one(opts, st, label, argv, port, serial))
        except NoSSH as exc:
            if not opts.ssh_fallback:
                failures.append(f"{label}: {exc} (--transport ssh: no fallback to the serial "
                                f"console; serial console {serial})")
                details.append(f"{label}: failed")
                continue
            detail, failure = fallback(opts, st, label, str(exc).split(" (waited")[0])
            details.append(detail)
            if failure:
                failures.append(failure)
        except (CrashedBoot, guestup.GuestUpError, SSHError, R.RemoteError, GuestError) as exc:
            panic = crash_line(serial)
            failures.append(f"{label}: {exc}" + (f"; console: {panic}" if panic and
                                                 not isinstance(exc, CrashedBoot) else "")
                            + f" (serial console {serial})")
            details.append(f"{label}: failed")
    if opts.dry_run:
        return StageRecord("boot", "planned", commands=cmds)
    for f in failures:
        st.echo(f"boot: {f}")
    return StageRecord("boot", "failed" if failures else "ok", commands=cmds,
                       detail="; ".join(details + failures), log=", ".join(st.logs.values()))


def kernel_messages(res, serial: str):
    """Add the panics, WITNESS warnings and known-LOR notes of the serial log ``serial``
    (its lines without the sentinel mark) to ``res`` (rxl.verify.parse.RunResult) and
    set its outcome as the console parser would. Returns ``res``."""
    from rxl.verify import parse as parse_mod
    try:
        text = Path(serial).read_text(errors="replace")
    except OSError:
        res.notes.append(f"no serial console log {serial}: kernel messages unchecked")
        return res
    k = parse_mod.parse_console(ln for ln in text.splitlines()
                                if not ln.replace("\r", "").startswith(parse_mod.MARK))
    res.panic_lines += k.panic_lines
    res.witness_lines += k.witness_lines
    res.notes += [n for n in k.notes if n.startswith("known lock order reversal")]
    if res.panic_lines:
        res.outcome = "panic"
    elif res.witness_lines and res.outcome == "completed":
        res.outcome = "witness"
    return res


def parse(opts: RunOptions, st: RunState) -> StageRecord:
    """Each SSH stream log -> RunResult, with the kernel messages of its serial log."""
    from rxl.verify import parse as parse_mod
    if opts.dry_run:
        return StageRecord("parse", "planned", detail=", ".join(st.logs.values()))
    for label, log in st.logs.items():
        if label in st.fallbacks:  # the console log itself: sentinels and kernel messages
            st.runs[label] = parse_mod.parse_file(log)
            st.runs[label].notes.insert(0, f"transport: {st.fallbacks[label]}")
            continue
        st.runs[label] = kernel_messages(parse_mod.parse_file(log),
                                         str(Path(opts.out) / f"serial-{label}.log"))
    detail = "; ".join(f"{k}: {v.outcome}, {len(v.cases)} cases" for k, v in st.runs.items())
    return StageRecord("parse", "ok", detail=detail)


def choose(src: Optional[str], objdir: Optional[str] = None) -> Tuple[str, str]:
    """``--transport auto``: ("ssh", why) when the sshd userland of ``src`` is built in
    ``objdir`` (default rxl.tree.sshworld.default_objdir()) and paramiko imports, else
    ("serial", why). The SSH run matched the serial run's verdicts on 2026-12-01
    (docs/results/ssh.md); the userland is not built implicitly (about 25 minutes on 2
    cores, autoconf and automake needed): ``--transport ssh`` or ``rxl guest up --build``
    builds it."""
    from rxl.tree import sshworld
    if not src:
        return "serial", "no --src: the sshd userland needs a tree"
    missing = sshworld.ssh_world_outputs(src, objdir).missing()
    if missing:
        return "serial", (f"no sshd userland for {src} ({missing[0]} missing); "
                          "--transport ssh builds it")
    try:
        import paramiko  # noqa: F401
    except ImportError:
        return "serial", "paramiko is not installed"
    return "ssh", f"the sshd userland of {src} is built"


def resolve(transport: str, src: Optional[str], echo=print) -> str:
    """``--transport`` (auto, ssh, serial) -> ssh or serial; auto by :func:`choose`,
    its choice and reason told to ``echo``."""
    if transport != "auto":
        return transport
    chosen, why = choose(src)
    echo(f"transport: {chosen} ({why})")
    return chosen


#: The stages of ``rxl run`` over SSH on the own guest, in order.
ALL: Tuple = (("series", stages.series), ("build", stages.build), ("world", world),
              ("image", image), ("boot", boot), ("parse", parse),
              ("report", stages.report))

"""``rxl run --target``: the steering tests on a FreeBSD machine reached over SSH.

A target the harness did not boot (a bhyve VM, a test box; or the own guest
once it is up) is driven through :class:`rxl.guest.ssh.SSHSession` (or
:class:`rxl.guest.ssh.DryRun`, which only records). The pure parts are here and
unit-tested: what the probe prints and how it is read, the kernel's version
line, the install plan; the kyua path (the Kyuafile, the kyua commands, kyua's JUnit
-> case results) is in :mod:`rxl.verify.kyua`.

What is touched on the target (and how to undo it) is :func:`touched`, the
text ``--dry-run`` and the README print:

* the work directory (default ``/var/tmp/rxl``): test programs, the run
  script, a Kyuafile and kyua's results; undo: ``rm -rf WORKDIR``;
* with ``--install-kernel`` only: one new kernel directory
  ``/boot/kernel.rxl-<sha256 prefix>/`` (the kernel alone, no modules) and the
  one-shot ``nextboot -k`` setting (``/boot/nextboot.conf``; the loader
  deletes it once read, so a kernel that does not boot falls back to the
  installed one at the next reset); undo: ``nextboot -D`` (if not yet
  booted) and ``rm -rf /boot/kernel.rxl-<id>``; a reboot returns to the
  installed kernel;
* nothing else: no package is installed, no file outside these is written,
  the loopback and NIC settings are only read (``sysctl -n``). The cases may
  set ``net.inet.tcp.reuseport_lb*`` sysctls only in their own vnet jails: the
  host's are recorded before and after them and a run that leaves one changed
  fails (:mod:`rxl.verify.hostsysctl`).

The tests run as the SSH user (root by default; the ATF programs open
listening sockets and set socket options, which a normal user may do, but
``nextboot`` and ``/boot`` need root).
"""

from __future__ import annotations

import hashlib
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from rxl.errors import MachineError, counted, reason
from rxl.guest import console
from rxl.guest.image import render_rc
from rxl.guest.protocol import host_sysctl_snapshot
from rxl.guest.ssh import SSHError, last_line
from rxl.tree import elf as tree_elf
from rxl.tree.base import REPO_PATCHES
from rxl.tree.patch import SeriesError, parse_base
from rxl.verify import parse
from rxl.verify.kyua import (KYUA_LOGS, LIST_CASE, KyuaJUnitError, cases_from_kyua_junit,
                             kyua_commands, kyuafile, listing_notes, unlisted_programs)

#: The sysctl commit 3 of the series adds (patches/0003, tcp_usrreq.c: the
#: groups view, SYSCTL_PROC net.inet.tcp.reuseport_lb.groups). A kernel
#: without it lacks the series.
SERIES_SYSCTL = "net.inet.tcp.reuseport_lb.groups"
#: Default work directory on the target (/var/tmp survives a reboot, unlike /tmp
#: on a tmpfs, so results outlive an --install-kernel reboot).
DEFAULT_WORKDIR = "/var/tmp/rxl"
#: The architecture the test programs are built for (rxl.tree.world TARGET_TRIPLE).
ARCH = "amd64"
#: ``__FreeBSD_version`` / ``kern.osreldate`` per major (the Porter's Handbook's
#: ``MMmmRxx``: 1500068 is 15.0, 1400097 is 14.0-STABLE).
OSRELDATE_PER_MAJOR = 100000

#: One shell line printing ``key=value`` lines; read by :func:`parse_probe`.
PROBE_COMMAND = "; ".join([
    'echo "os=$(uname -s)"',
    'echo "release=$(uname -r)"',
    'echo "arch=$(uname -m)"',
    # the kernel's __FreeBSD_version: the major goes by it, not by uname's name or
    # release, which a rebranded tree changes (newvers.sh TYPE, REVISION)
    'echo "osreldate=$(sysctl -n kern.osreldate 2>/dev/null)"',
    'echo "bootfile=$(sysctl -n kern.bootfile)"',
    # the first line with the shell's read: the own guest has no head(1) (rxl.tree.sshworld)
    'echo "version=$(sysctl -n kern.version | { IFS= read -r l; echo "$l"; })"',
    f'echo "series=$(sysctl -N {SERIES_SYSCTL} 2>/dev/null || echo absent)"',
    'echo "kyua=$(command -v kyua || echo absent)"',
    'echo "user=$(id -un)"',
])


class RemoteError(MachineError):
    """A target that cannot run the tests (wrong OS, no series, install failed)."""


@dataclass
class TargetInfo:
    """What :data:`PROBE_COMMAND` found. ``os``, ``release``: ``uname -s``,
    ``uname -r`` (kern.ostype, kern.osrelease: what newvers.sh's TYPE and RELEASE
    say, ``Irid``, ``0.0.2-ALPHA`` in the rebranded 15.0 snapshot);
    ``osreldate``: kern.osreldate (the kernel's ``__FreeBSD_version``), None when
    the target has none (not FreeBSD); ``series``: the kernel has the series'
    sysctl; ``kyua``: path of kyua or ""."""

    os: str = ""
    release: str = ""
    arch: str = ""
    bootfile: str = ""
    version: str = ""
    series: bool = False
    kyua: str = ""
    user: str = ""
    osreldate: Optional[int] = None

    @property
    def major(self) -> Optional[int]:
        """The FreeBSD major kern.osreldate names (15 for 1500068), or None."""
        return None if self.osreldate is None else self.osreldate // OSRELDATE_PER_MAJOR

    @property
    def rebranded(self) -> bool:
        """uname says another name or major than kern.osreldate (``Irid 0.0.2``)."""
        return self.os != "FreeBSD" or not self.release.startswith(f"{self.major}.")

    def reports(self) -> str:
        """One line: what the target says it is and the major the harness takes
        (``FreeBSD 15 (kern.osreldate 1500068); uname: Irid 0.0.2-ALPHA, rebranded``)."""
        if self.osreldate is None:
            return f"{self.os or 'an unknown OS'} {self.release} (no kern.osreldate)".strip()
        brand = ", rebranded" if self.rebranded else ""
        return (f"FreeBSD {self.major} (kern.osreldate {self.osreldate}); uname: "
                f"{self.os} {self.release}{brand}")

    def summary(self) -> str:
        return (f"{self.reports()}, {self.arch}, kernel {self.bootfile} "
                f"({self.version}), series {'yes' if self.series else 'NO'}, "
                f"kyua {self.kyua or 'absent'}, user {self.user}")


#: The keys :data:`PROBE_COMMAND` prints, each on its own line.
PROBE_KEYS = ("os", "release", "arch", "osreldate", "bootfile", "version", "series",
              "kyua", "user")


def parse_probe(text: str) -> TargetInfo:
    """Read the probe's output. Raises RemoteError if a line is missing.
    ``osreldate`` is None unless the line is a number of 7 digits (``MMmmRxx``)."""
    vals: Dict[str, str] = {}
    for line in text.splitlines():
        k, sep, v = line.partition("=")
        if sep:
            vals[k.strip()] = v.strip()
    missing = [k for k in PROBE_KEYS if k not in vals]
    if missing:
        raise RemoteError(f"probe output lacks {', '.join(missing)}: {text.strip()[:200]!r}")
    rel = vals["osreldate"]
    return TargetInfo(os=vals["os"], release=vals["release"], arch=vals["arch"],
                      bootfile=vals["bootfile"], version=vals["version"],
                      series=vals["series"] not in ("", "absent"),
                      kyua="" if vals["kyua"] == "absent" else vals["kyua"],
                      user=vals["user"],
                      osreldate=int(rel) if re.fullmatch(r"[1-9][0-9]{6}", rel) else None)


def series_freebsd_version(patches_dir: Path = REPO_PATCHES) -> int:
    """``__FreeBSD_version`` of the base the series is for (``patches/BASE``:
    1500068). Raises RemoteError when BASE is missing or names no number."""
    try:
        return int(parse_base((Path(patches_dir) / "BASE").read_text()).freebsd_version)
    except (OSError, ValueError, SeriesError) as exc:
        raise RemoteError(f"{patches_dir}/BASE: no __FreeBSD_version of the series' "
                          f"base ({reason(exc)})") from None


def check_target(info: TargetInfo, *, need_series: bool = True,
                 want: Optional[int] = None) -> None:
    """Refuse (RemoteError, one line) a target the steering tests cannot run on.

    The FreeBSD major is kern.osreldate's (:attr:`TargetInfo.major`), never uname's
    name or release: the rebranded 15.0 snapshot's kernel says ``Irid``
    ``0.0.2-ALPHA`` and is FreeBSD 15. ``want``: the ``__FreeBSD_version`` the
    test programs are for (default :func:`series_freebsd_version`); the target's
    major must be its major.
    """
    if info.major is None:
        raise RemoteError(f"target runs {info.os or 'an unknown OS'} (uname -s) with no "
                          "kern.osreldate: not a FreeBSD kernel")
    want = series_freebsd_version() if want is None else want
    if info.major != want // OSRELDATE_PER_MAJOR:
        raise RemoteError(f"target runs {info.reports()}; the series is for FreeBSD "
                          f"{want // OSRELDATE_PER_MAJOR} (patches/BASE __FreeBSD_version "
                          f"{want})")
    if info.arch != ARCH:
        raise RemoteError(f"target is {info.arch}; the test programs are built for {ARCH}")
    if need_series and not info.series:
        raise RemoteError(f"kernel {info.bootfile} ({info.version}) lacks the series "
                          f"(no {SERIES_SYSCTL}): refusing the steering tests; "
                          "boot a patched kernel or pass --install-kernel")


def kernel_version(data: bytes) -> str:
    """The first line of a kernel's ``version[]`` (what kern.version starts with):
    ``sccs[]``'s text when ``version[]`` repeats it, else a ``<TYPE> <RELEASE> #N``
    line (both made by sys/conf/newvers.sh; TYPE may be a rebranding's, ``Irid``).

    Raises RemoteError if ``data`` holds no such version string
    (rxl.tree.elf.kernel_version, which rxl.tree.build.check_kernel_file
    runs on every kernel given).
    """
    version = tree_elf.kernel_version(data)
    if version is None:
        raise RemoteError(f"{tree_elf.NO_VERSION} in the kernel file")
    return version


def kernel_id(data: bytes) -> str:
    """12 hex digits of the kernel file's SHA-256: names its directory on the target."""
    return hashlib.sha256(data).hexdigest()[:12]


@dataclass
class InstallPlan:
    """Where a kernel goes and what is run (``kernel_dir`` under /boot)."""

    kernel_dir: str
    sha256: str
    version: str
    commands: List[str] = field(default_factory=list)

    @property
    def bootfile(self) -> str:
        return f"{self.kernel_dir}/kernel"


def install_plan(data: bytes, boot_dir: str = "/boot") -> InstallPlan:
    """The install of a kernel whose bytes are ``data``. Pure.

    The kernel is copied to ``kernel.tmp`` over SFTP, its SHA-256 checked with
    ``sha256 -q`` (FreeBSD's md5(1) family), renamed, and made the next boot's
    kernel with ``nextboot -k`` (one boot only: nextboot(8) says the loader
    deletes the setting once it has read it, so a kernel that hangs is not
    booted again after a reset).
    """
    kid = kernel_id(data)
    kdir = f"{boot_dir}/kernel.rxl-{kid}"
    digest = hashlib.sha256(data).hexdigest()
    return InstallPlan(kdir, digest, kernel_version(data), [
        f"mkdir -p {kdir}",
        f"# sftp put KERNEL {kdir}/kernel.tmp",
        f"sha256 -q {kdir}/kernel.tmp",
        f"mv -f {kdir}/kernel.tmp {kdir}/kernel",
        f"nextboot -k {Path(kdir).name}",
    ])


#: The file that marks a directory on a target as a work directory the harness
#: made: a --workdir that exists without it is refused (:func:`claim_command`).
WORKDIR_MARK = ".rxl-workdir"
#: claim_command's exit status when it refuses the directory.
CLAIM_REFUSED = 3


def claim_command(workdir: str) -> str:
    """The remote command run before anything is written: it refuses (exit
    :data:`CLAIM_REFUSED`, one line) a ``workdir`` that is a symbolic link or
    exists without :data:`WORKDIR_MARK` (a directory rxl did not make, whose
    contents the undo ``rm -rf`` would take), else makes it with its
    ``tests`` directory and marks it. It runs no program but sh(1) and
    mkdir(1): the guest's minimal world has no touch(1) (the 15.0 guest's
    first SSH run, docs/results/run-15.md). ``workdir`` is checked already
    (rxl.verify.preflight.check_workdir: plain characters, below /tmp or
    /var/tmp)."""
    w = shlex.quote(workdir)
    return (f"if [ -L {w} ]; then echo 'rxl: {workdir} is a symbolic link'; "
            f"exit {CLAIM_REFUSED}; fi; "
            f"if [ -e {w} ] && [ ! -f {w}/{WORKDIR_MARK} ]; then echo 'rxl: {workdir} "
            f"exists and rxl did not make it (no {WORKDIR_MARK})'; exit {CLAIM_REFUSED}; fi; "
            f"mkdir -p {w}/tests && : > {w}/{WORKDIR_MARK}")


def touched(workdir: str, install: Optional[InstallPlan] = None) -> List[str]:
    """Lines saying what a run changes on the target and how to undo each."""
    out = [f"work directory {workdir} (tests, run.sh, Kyuafile, results, its "
           f"{WORKDIR_MARK} mark); "
           f"undo: rm -rf {shlex.quote(workdir)}"]
    if install is not None:
        out.append(f"kernel directory {install.kernel_dir} (the kernel only); "
                   f"undo: rm -rf {install.kernel_dir}")
        out.append("one-shot nextboot -k setting (/boot/nextboot.conf, used for one boot); "
                   "undo before the reboot: nextboot -D; after it, a reboot returns to the "
                   "installed kernel")
    return out


# ------------------------------------------------------------------ driving

@dataclass
class RemoteJob:
    """One run on a target. ``tests``: program name -> local FreeBSD binary;
    ``label``: the run's name in the reports (``patched``); ``kyua``: None = use
    it when the target has it; ``case_timeout``: seconds per ATF case;
    ``atf_vars``: (name, value) ATF variables for every case (rc loop or kyua)."""

    out: str
    tests: Dict[str, str]
    workdir: str = DEFAULT_WORKDIR
    label: str = "patched"
    kyua: Optional[bool] = None
    case_timeout: int = 300
    atf_vars: Tuple[Tuple[str, str], ...] = ()
    reboot_timeout: float = 900.0
    kyua_timeout: float = 7200.0
    boot_dir: str = "/boot"
    path: str = "/sbin:/bin:/usr/sbin:/usr/bin:/usr/local/sbin:/usr/local/bin"


class RemoteRun:
    """Drives a target through ``session`` (rxl.guest.ssh.SSHSession, or DryRun:
    then every remote action is only recorded in ``session.commands``).

    Each method is one stage's work and raises RemoteError or rxl.guest.ssh.SSHError
    with one line; ``notes`` collects what the report should say.
    """

    def __init__(self, session, job: RemoteJob, echo=lambda s: None):
        self.s, self.job, self.echo = session, job, echo
        self.dry = not hasattr(session, "connect")
        self.info: Optional[TargetInfo] = None
        self.before: Optional[TargetInfo] = None
        self.install: Optional[InstallPlan] = None
        self.notes: List[str] = []

    # -------------------------------------------------------- probe / install
    def probe(self) -> Optional[TargetInfo]:
        """Read the target (:data:`PROBE_COMMAND`). None in a dry run."""
        r = self.s.run(PROBE_COMMAND, timeout=60, check=True)
        if self.dry:
            return None
        self.info = parse_probe(r.stdout)
        return self.info

    def install_kernel(self, kernel: str) -> str:
        """Copy ``kernel`` to a new /boot directory, ``nextboot -k`` it, reboot,
        wait and check the running kernel is it. Returns a one-line summary."""
        if self.dry and not Path(kernel).is_file():  # the build stage only plans it
            plan = InstallPlan(f"{self.job.boot_dir}/kernel.rxl-<id>", "<sha256>",
                               f"the kernel the build stage makes, {kernel}")
        else:
            plan = install_plan(Path(kernel).read_bytes(), self.job.boot_dir)
        self.install = plan
        self.before = self.info
        if not self.dry and self.info is not None and self.info.bootfile == plan.bootfile \
                and self.info.version == plan.version:
            return f"already running {plan.bootfile} ({plan.version}); not reinstalled"
        kdir = plan.kernel_dir
        self.s.run(f"mkdir -p {kdir}", timeout=60, check=True)
        self.s.put(kernel, f"{kdir}/kernel.tmp", mode=0o555)
        got = self.s.run(f"sha256 -q {kdir}/kernel.tmp", timeout=120, check=True).stdout.strip()
        if not self.dry and got != plan.sha256:
            raise RemoteError(f"{kdir}/kernel.tmp: SHA-256 {got[:16]}... after the copy, "
                              f"expected {plan.sha256[:16]}...")
        self.s.run(f"mv -f {kdir}/kernel.tmp {kdir}/kernel", timeout=60, check=True)
        self.s.run(f"nextboot -k {Path(kdir).name}", timeout=60, check=True)
        took = self.s.reboot(timeout=self.job.reboot_timeout)
        self.probe()
        if self.dry:
            return f"{plan.bootfile} installed (dry run)"
        assert self.info is not None
        if self.info.bootfile != plan.bootfile:
            raise RemoteError(f"after the reboot the target runs {self.info.bootfile}, not "
                              f"{plan.bootfile}: the new kernel did not boot (nextboot fell "
                              "back to the installed one?); see the target's console")
        if self.info.version != plan.version:
            raise RemoteError(f"running {plan.bootfile} but kern.version is "
                              f"{self.info.version!r}, expected {plan.version!r}")
        was = self.before.bootfile if self.before else "?"
        return (f"kernel switched: {was} -> {plan.bootfile} ({plan.version}) after a "
                f"{took:.0f} s reboot")

    # -------------------------------------------------------- tests
    def use_kyua(self) -> bool:
        if self.job.kyua is not None:
            return self.job.kyua
        if self.dry and self.info is None:  # not probed: plan the usual path
            return True
        return bool(self.info and self.info.kyua)

    def script(self, kyua: bool, programs: Optional[List[str]] = None) -> str:
        """The run script: the guest rc's collection and ATF loop, without lo0
        setup or power-off; with kyua, collection only (kyua runs the cases).
        ``programs``: the loop's programs (default: all of the job's)."""
        names = sorted(self.job.tests if programs is None else programs)
        progs = [] if kyua else [f"{self.job.workdir}/tests/{n}" for n in names]
        return render_rc(self.job.label, progs, case_timeout=self.job.case_timeout,
                         atf_vars=self.job.atf_vars,
                         poweroff=False, setup_lo=False, cwd=self.job.workdir,
                         path=self.job.path, host_after=not kyua)

    def upload(self) -> str:
        """Make the work directory and copy the programs, run.sh and a Kyuafile."""
        w = self.job.workdir
        kyua = self.use_kyua()
        if self.dry and self.job.kyua is None:
            self.s.commands.append("# the kyua path, taken when the probe finds kyua (FreeBSD's "
                                   "base has it); else run.sh's loop (--no-kyua shows it)")
        r = self.s.run(claim_command(w), timeout=60)
        if r.rc != 0:
            why = last_line(r.stdout) or last_line(r.stderr) or f"exit {r.rc}"
            raise RemoteError(f"--workdir {w}: {why.removeprefix('rxl: ')}; give a new name "
                              f"(an older rxl run's directory without {WORKDIR_MARK}: "
                              f"remove it first)")
        for name, local in sorted(self.job.tests.items()):
            self.s.put(local, f"{w}/tests/{name}", mode=0o755)
        out = Path(self.job.out)
        if not self.dry:
            out.mkdir(parents=True, exist_ok=True)
        for fname, text in (("run.sh", self.script(kyua)),
                            ("Kyuafile", kyuafile(list(self.job.tests),
                                                  timeout=self.job.case_timeout)
                             if kyua else None)):
            if text is None:
                continue
            local = self._local(f"target-{fname}")  # each boot's own: boots run at once
            if not self.dry:
                local.write_text(text)
            self.s.put(str(local), f"{w}/{fname}" if fname == "run.sh" else f"{w}/tests/{fname}")
            if self.dry:  # what the file holds: a dry run writes nothing locally
                self.s.commands += [f"#   {line}" for line in text.splitlines()]
        return (f"{counted(len(self.job.tests), 'program')}, run.sh" + (", Kyuafile" if kyua else "")
                + f" in {w}")

    def run_tests(self, log: str):
        """Run run.sh (streamed to ``log``, watched like a console), then kyua if used.

        Returns the rxl.verify.parse.RunResult (None in a dry run).
        """
        w = self.job.workdir
        kyua = self.use_kyua()
        self._watch(f"sh {w}/run.sh", log, self.job.label)
        if kyua:
            for c in kyua_commands(w, self.job.atf_vars):
                r = self.s.run(c, timeout=self.job.kyua_timeout)
                if not self.dry:  # kyua's own lines (a case per line, its summary)
                    with open(self._local("kyua.out"), "a") as fh:
                        fh.write(f"$ {c}\n{r.stdout}{r.stderr}[exit {r.rc}]\n")
                # kyua test exits 1 when a case failed: that is a result, not an error
                if r.rc not in (0, 1):
                    raise RemoteError(f"{c}: exit {r.rc}: {r.stderr.strip()[-200:]}")
            # each boot's own copies (an own guest runs several boots into one out dir)
            self.s.get(f"{w}/kyua-junit.xml", str(self._local("kyua-junit.xml")))
            for name in KYUA_LOGS:
                try:
                    self.s.get(f"{w}/{name}", str(self._local(name)))
                except SSHError:
                    pass  # the logs are for reading; the results are in the JUnit file
        if self.dry:
            if kyua:
                self._host_after(log)
            return None
        res = parse.parse_file(log)
        if self.info is not None:  # what the target says it is, and the major taken
            res.notes.append(f"target reports {self.info.reports()}")
        if kyua:
            try:
                res.cases = cases_from_kyua_junit(
                    self._local("kyua-junit.xml").read_text(errors="replace"),
                    f"{w}/tests")
            except KyuaJUnitError as exc:
                raise RemoteError(str(exc)) from None
            res.notes.append(f"cases run by kyua ({self.info.kyua if self.info else 'kyua'})")
            unlisted = unlisted_programs(res.cases)
            fallback = bool(unlisted) and self.job.kyua is None
            res.notes.extend(listing_notes(res.cases, fallback=fallback))
            if fallback:
                res.cases = [c for c in res.cases if c.case != LIST_CASE
                             or Path(c.prog).name not in unlisted]
                res.cases += self._direct(unlisted, log)
            res.sysctls.update(self._host_after(log))
        return res

    def _local(self, name: str) -> Path:
        """Where a kyua file of this job is kept: ``<out>/<stem>-<label><suffix>``
        (``kyua-junit-patched.xml``, ``kyua-patched.out``)."""
        p = Path(name)
        return Path(self.job.out) / f"{p.stem}-{self.job.label}{p.suffix}"

    def _host_after(self, log: str) -> Dict[str, str]:
        """The host sysctls' record after the cases when kyua ran them (run.sh's rc
        recorded them before only): its lines appended to ``log``, and returned as
        sysctl key -> value (nothing in a dry run)."""
        r = self.s.run("sh -c " + shlex.quote(host_sysctl_snapshot("after")), timeout=60,
                       check=True)
        if self.dry:
            return {}
        with open(log, "a") as fh:
            fh.write(r.stdout)
        return parse.parse_console(r.stdout.splitlines()).sysctls

    def _direct(self, programs: List[str], log: str):
        """Run ``programs`` with run.sh's loop (``run-direct.sh``, streamed to
        ``<log>-direct.log``): kyua could not list them and was not asked for by
        name (``--kyua``). Returns their rxl.verify.parse.CaseResult list."""
        w = self.job.workdir
        local = self._local("target-run-direct.sh")
        local.write_text(self.script(False, programs))
        self.s.put(str(local), f"{w}/run-direct.sh")
        dlog = str(Path(log).with_name(Path(log).stem + "-direct.log"))
        self._watch(f"sh {w}/run-direct.sh", dlog, f"{self.job.label} direct")
        return parse.parse_file(dlog).cases

    def _watch(self, command: str, log: str, tag: str) -> None:
        """Stream ``command``'s output into ``log``, watched like a guest console
        (rxl.guest.console.watch), each line echoed as ``[tag]``; nothing in a dry
        run (the session streams nothing)."""
        stream = self.s.stream(command)
        if stream is not None:
            console.watch(stream, log, poweroff_grace=10,
                          echo=lambda s: self.echo(f"  [{tag}] {s}"))

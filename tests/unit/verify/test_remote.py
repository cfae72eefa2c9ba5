"""rxl.verify.remote: the pure parts of a run on an SSH target."""

import hashlib
from pathlib import Path

import pytest

from rxl.verify import remote as R

#: A FreeBSD 14 target: 14.0-RELEASE's GENERIC kernel (uname -a of a stock
#: install; kern.osreldate 1400097, the 14.0 release's __FreeBSD_version).
PROBE_14 = """os=FreeBSD
release=14.0-RELEASE
arch=amd64
osreldate=1400097
bootfile=/boot/kernel/kernel
version=FreeBSD 14.0-RELEASE #0 releng/14.0-n265380-f9716eee8ab4: Fri Nov 10 05:57:23 UTC 2023
series=absent
kyua=/usr/bin/kyua
user=root
"""
#: A kernel of the rebranded 15.0 snapshot (patches/BASE's tree): newvers.sh has
#: TYPE "Irid", REVISION "0.0.2", BRANCH "ALPHA", so kern.ostype is Irid and
#: kern.osrelease 0.0.2-ALPHA; kern.osreldate is sys/sys/param.h's 1500068;
#: kern.version is newvers.sh's VERINFO, "${VERSION} #${v} ${git}: ${t}".
PROBE_IRID = """os=Irid
release=0.0.2-ALPHA
arch=amd64
osreldate=1500068
bootfile=/boot/kernel/kernel
version=Irid 0.0.2-ALPHA #0 rxl-n2-6e3263468abc: Wed Dec  2 06:40:00 UTC 2026
series=absent
kyua=/usr/bin/kyua
user=root
"""
#: A stock FreeBSD 15.0-RELEASE kernel (its shape: newvers.sh with TYPE FreeBSD,
#: REVISION 15.0): the same osreldate, its own name.
PROBE_15 = (PROBE_IRID.replace("os=Irid", "os=FreeBSD")
            .replace("release=0.0.2-ALPHA", "release=15.0-RELEASE")
            .replace("version=Irid 0.0.2-ALPHA #0 rxl-n2-6e3263468abc: Wed Dec  2 06:40:00 UTC 2026",
                     "version=FreeBSD 15.0-RELEASE releng/15.0-n280995-7aedc8de6446 GENERIC"))
PROBE_OUT = PROBE_IRID
WITH_SERIES = ("series=absent", f"series={R.SERIES_SYSCTL}")

#: Bytes shaped like a kernel's data section (sys/conf/newvers.sh's vers.c):
#: sccs[] ("@(#)" and the version line), then version[] (the line, a newline,
#: the builder), between other strings.
KERNEL = (b"\x7fELF\x00junk\x00@(#)FreeBSD 14.0-STABLE #0 rxl-n27-6e3263468: "
          b"Mon Nov 30 06:40:00 UTC 2026\x00\x00FreeBSD 14.0-STABLE #0 rxl-n27-6e3263468: "
          b"Mon Nov 30 06:40:00 UTC 2026\n    root@h:/work/obj/sys/RXL\n\x00more")
IRID_LINE = b"Irid 0.0.2-ALPHA #0 rxl-n2-6e3263468abc: Wed Dec  2 06:40:00 UTC 2026"
KERNEL_IRID = (b"\x7fELF\x00@(#)" + IRID_LINE + b"\x00\x00\x00" + IRID_LINE
               + b"\n    root@h:/work/obj/sys/RXL\n\x00Irid\x000.0.2-ALPHA\x00")


def test_probe_pristine_kernel_refused():
    info = R.parse_probe(PROBE_OUT)
    assert info.os == "Irid" and info.kyua == "/usr/bin/kyua" and not info.series
    with pytest.raises(R.RemoteError) as ei:
        R.check_target(info)
    msg = str(ei.value)
    assert "lacks the series" in msg and R.SERIES_SYSCTL in msg and "--install-kernel" in msg
    R.check_target(info, need_series=False)  # fine for collecting only


def test_probe_series_kernel_accepted():
    info = R.parse_probe(PROBE_OUT.replace(*WITH_SERIES)
                         .replace("kyua=/usr/bin/kyua", "kyua=absent"))
    assert info.series and info.kyua == ""
    R.check_target(info)


def test_series_is_for_the_base_major():
    """patches/BASE's __FreeBSD_version is what a target's major is held to."""
    assert R.series_freebsd_version() == 1500068


def test_rebranded_15_target_is_freebsd_15_by_osreldate():
    """The Irid kernel says neither FreeBSD nor 15 in uname: kern.osreldate decides."""
    info = R.parse_probe(PROBE_IRID.replace(*WITH_SERIES))
    assert (info.os, info.release, info.osreldate, info.major) == \
        ("Irid", "0.0.2-ALPHA", 1500068, 15)
    assert info.rebranded
    R.check_target(info)
    assert info.reports() == ("FreeBSD 15 (kern.osreldate 1500068); uname: Irid "
                              "0.0.2-ALPHA, rebranded")
    assert info.summary().startswith(info.reports())


def test_stock_15_target_accepted_not_rebranded():
    info = R.parse_probe(PROBE_15.replace(*WITH_SERIES))
    assert info.major == 15 and not info.rebranded
    R.check_target(info)
    assert info.reports() == "FreeBSD 15 (kern.osreldate 1500068); uname: FreeBSD 15.0-RELEASE"


def test_freebsd_14_target_refused_by_osreldate():
    """A real 14.0 kernel is FreeBSD 14 by its osreldate: refused for the 15 series,
    accepted where the programs are for 14."""
    info = R.parse_probe(PROBE_14.replace(*WITH_SERIES))
    assert info.major == 14 and not info.rebranded
    with pytest.raises(R.RemoteError) as ei:
        R.check_target(info)
    assert str(ei.value) == ("target runs FreeBSD 14 (kern.osreldate 1400097); uname: "
                             "FreeBSD 14.0-RELEASE; the series is for FreeBSD 15 "
                             "(patches/BASE __FreeBSD_version 1500068)")
    R.check_target(info, want=1400097)
    with pytest.raises(R.RemoteError, match="FreeBSD 15 .*series is for FreeBSD 14"):
        R.check_target(R.parse_probe(PROBE_IRID.replace(*WITH_SERIES)), want=1400097)


def test_uname_saying_freebsd_15_does_not_make_a_14_kernel_15():
    """The release string is not what decides: a 14 osreldate under a 15 name is 14."""
    info = R.parse_probe(PROBE_15.replace("osreldate=1500068", "osreldate=1400097"))
    assert info.major == 14
    with pytest.raises(R.RemoteError, match="FreeBSD 14 .*is for FreeBSD 15"):
        R.check_target(info, need_series=False)


@pytest.mark.parametrize("edit,msg", [
    (("os=Irid", "os=Linux"), None),
    (("osreldate=1500068", "osreldate="), "runs Irid \\(uname -s\\) with no kern.osreldate: not a FreeBSD kernel"),
    (("osreldate=1500068", "osreldate=15.0"), "not a FreeBSD kernel"),
    (("osreldate=1500068", "osreldate=15000680"), "not a FreeBSD kernel"),
    (("arch=amd64", "arch=arm64"), "arm64"),
])
def test_probe_wrong_machine(edit, msg):
    text = PROBE_OUT.replace(*edit)
    if msg is None:  # a Linux box: sysctl knows no kern.osreldate, the line is empty
        text = text.replace("osreldate=1500068", "osreldate=")
        msg = "runs Linux .*not a FreeBSD kernel"
    with pytest.raises(R.RemoteError, match=msg):
        R.check_target(R.parse_probe(text), need_series=False)


def test_probe_missing_line():
    with pytest.raises(R.RemoteError, match="lacks kyua, user"):
        R.parse_probe("\n".join(PROBE_OUT.splitlines()[:7]))


def test_probe_command_prints_every_key():
    for key in R.PROBE_KEYS:
        assert f'echo "{key}=' in R.PROBE_COMMAND
    assert "sysctl -n kern.osreldate" in R.PROBE_COMMAND


def test_kernel_version_and_plan():
    assert R.kernel_version(KERNEL) == \
        "FreeBSD 14.0-STABLE #0 rxl-n27-6e3263468: Mon Nov 30 06:40:00 UTC 2026"
    plan = R.install_plan(KERNEL)
    kid = hashlib.sha256(KERNEL).hexdigest()[:12]
    assert plan.kernel_dir == f"/boot/kernel.rxl-{kid}"
    assert plan.bootfile == f"/boot/kernel.rxl-{kid}/kernel"
    assert plan.commands[-1] == f"nextboot -k kernel.rxl-{kid}"
    assert plan.sha256 == hashlib.sha256(KERNEL).hexdigest()
    with pytest.raises(R.RemoteError, match="no '<TYPE> N.N-<BRANCH> #N' version string"):
        R.kernel_version(b"\x7fELF not a kernel")


def test_kernel_version_of_a_rebranded_kernel():
    """The Irid kernel's version[] starts with its TYPE: it is read as it is, and it
    is what kern.version's first line says once it runs."""
    assert R.kernel_version(KERNEL_IRID) == IRID_LINE.decode()
    assert R.install_plan(KERNEL_IRID).version == \
        R.parse_probe(PROBE_IRID).version


def test_kernel_version_without_sccs_or_date():
    # version[] alone (no sccs[]): the "<release> #N" line
    assert R.kernel_version(b"\x00" + IRID_LINE + b"\n    u@h:/o\n\x00") == IRID_LINE.decode()
    # a reproducible build (newvers.sh -R): no "#N: date", sccs[] and version[] agree
    line = b"Irid 0.0.2-ALPHA n2-6e3263468abc RXL"
    assert R.kernel_version(b"@(#)" + line + b"\x00\x00" + line + b"\n\x00") == line.decode()
    # an sccs-like string that version[] does not repeat is not taken
    with pytest.raises(R.RemoteError):
        R.kernel_version(b"@(#)Irid 0.0.2-ALPHA n2 RXL\x00")


def test_touched_names_undo():
    plan = R.install_plan(KERNEL)
    lines = R.touched("/var/tmp/rxl", plan)
    assert "rm -rf /var/tmp/rxl" in lines[0]
    assert f"rm -rf {plan.kernel_dir}" in lines[1]
    assert "nextboot -D" in lines[2]
    assert len(R.touched("/var/tmp/rxl")) == 1


# ---------------------------------------------- each boot's own files (boots run at once)
class _Session:
    """A session that is not a dry run: it records what each put() copied, and
    ``meanwhile`` runs once before its first copy (another boot's upload, at once)."""

    def __init__(self, meanwhile=None):
        self.copied, self.meanwhile = [], meanwhile

    def connect(self):  # pragma: no cover - marks a real session
        pass

    def run(self, cmd, timeout=None, check=False):
        class Result:
            rc, stdout, stderr = 0, "", ""
        return Result()

    def put(self, local, remote_path, mode=None):
        if self.meanwhile:
            self.meanwhile, later = None, self.meanwhile
            later()
        self.copied.append((remote_path, Path(local).read_text()))


def test_two_boots_at_once_do_not_share_their_run_script(tmp_path):
    def run(lb, meanwhile=None):
        return R.RemoteRun(_Session(meanwhile), R.RemoteJob(
            out=str(tmp_path), tests={}, label=lb, kyua=False))
    pristine = run("pristine")
    patched = run("patched", meanwhile=pristine.upload)  # pristine writes between
    patched.upload()
    for lb, r in (("patched", patched), ("pristine", pristine)):
        script = dict(r.s.copied)["/var/tmp/rxl/run.sh"]
        assert f"BEGIN {lb}" in script, script[:300]
        assert (tmp_path / f"target-run-{lb}.sh").read_text() == script

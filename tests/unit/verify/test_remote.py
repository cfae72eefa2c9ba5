"""rxl.verify.remote: the pure parts of a run on an SSH target."""

import hashlib

import pytest

from rxl.verify import remote as R

PROBE_OUT = """os=FreeBSD
release=14.0-STABLE
arch=amd64
bootfile=/boot/kernel/kernel
version=FreeBSD 14.0-STABLE #0 main-n24-2f2a4162b: Mon Nov 30 05:01:02 UTC 2026
series=absent
kyua=/usr/bin/kyua
user=root
"""

#: Bytes shaped like a kernel's data section: version[] between other strings.
KERNEL = (b"\x7fELF\x00junk\x00@(#)FreeBSD 14.0-STABLE #0 rxl-n27-6e3263468: "
          b"Mon Nov 30 06:40:00 UTC 2026\n    root@h:/work/obj/sys/RXL\n\x00more")


def test_probe_pristine_kernel_refused():
    info = R.parse_probe(PROBE_OUT)
    assert info.os == "FreeBSD" and info.kyua == "/usr/bin/kyua" and not info.series
    with pytest.raises(R.RemoteError) as ei:
        R.check_target(info)
    msg = str(ei.value)
    assert "lacks the series" in msg and R.SERIES_SYSCTL in msg and "--install-kernel" in msg
    R.check_target(info, need_series=False)  # fine for collecting only


def test_probe_series_kernel_accepted():
    info = R.parse_probe(PROBE_OUT.replace("series=absent", f"series={R.SERIES_SYSCTL}")
                         .replace("kyua=/usr/bin/kyua", "kyua=absent"))
    assert info.series and info.kyua == ""
    R.check_target(info)


@pytest.mark.parametrize("edit,msg", [
    (("os=FreeBSD", "os=Linux"), "runs Linux, not FreeBSD"),
    (("release=14.0-STABLE", "release=13.2-RELEASE"), "FreeBSD 13.2-RELEASE"),
    (("arch=amd64", "arch=arm64"), "arm64"),
])
def test_probe_wrong_machine(edit, msg):
    with pytest.raises(R.RemoteError, match=msg):
        R.check_target(R.parse_probe(PROBE_OUT.replace(*edit)), need_series=False)


def test_probe_missing_line():
    with pytest.raises(R.RemoteError, match="lacks kyua, user"):
        R.parse_probe("\n".join(PROBE_OUT.splitlines()[:6]))


def test_probe_command_prints_every_key():
    for key in ("os", "release", "arch", "bootfile", "version", "series", "kyua", "user"):
        assert f'echo "{key}=' in R.PROBE_COMMAND


def test_kernel_version_and_plan():
    assert R.kernel_version(KERNEL) == \
        "FreeBSD 14.0-STABLE #0 rxl-n27-6e3263468: Mon Nov 30 06:40:00 UTC 2026"
    plan = R.install_plan(KERNEL)
    kid = hashlib.sha256(KERNEL).hexdigest()[:12]
    assert plan.kernel_dir == f"/boot/kernel.rxl-{kid}"
    assert plan.bootfile == f"/boot/kernel.rxl-{kid}/kernel"
    assert plan.commands[-1] == f"nextboot -k kernel.rxl-{kid}"
    assert plan.sha256 == hashlib.sha256(KERNEL).hexdigest()
    with pytest.raises(R.RemoteError, match="no 'FreeBSD"):
        R.kernel_version(b"\x7fELF not a kernel")


def test_touched_names_undo():
    plan = R.install_plan(KERNEL)
    lines = R.touched("/var/tmp/rxl", plan)
    assert "rm -rf /var/tmp/rxl" in lines[0]
    assert f"rm -rf {plan.kernel_dir}" in lines[1]
    assert "nextboot -D" in lines[2]
    assert len(R.touched("/var/tmp/rxl")) == 1

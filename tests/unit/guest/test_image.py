"""rxl.guest.image: templates, plan, NEEDED closure and staging (no FreeBSD tree needed)."""

import pytest

from rxl.guest.image import (Action, ImageError, plan_root, render_loader_rc, render_rc,
                       resolve_libs, stage_root)


def test_loader_rc_root_and_tunables():
    text = render_loader_rc({"hw.iflib.core_spread": "1"})
    lines = [ln for ln in text.splitlines() if not ln.startswith("\\")]
    assert lines == ["set vfs.root.mountfrom=msdosfs:/dev/ada0s1",
                     "set vfs.root.mountfrom.options=rw",
                     "set hw.iflib.core_spread=1", "boot"]
    with pytest.raises(ValueError, match="whitespace"):
        render_loader_rc({"a b": "1"})


def test_loader_rc_loads_the_kernel_before_its_modules():
    """loader(8) takes no module before a kernel: a root MINIMAL cannot mount
    (msdosfs in an MBR slice) needs the kernel loaded, then each .ko, then boot."""
    text = render_loader_rc({}, modules=("msdosfs", "geom_part_mbr"))
    lines = [ln for ln in text.splitlines() if not ln.startswith("\\")]
    assert lines[-4:] == ["load /boot/kernel/kernel", "load /boot/kernel/msdosfs.ko",
                          "load /boot/kernel/geom_part_mbr.ko", "boot"]
    assert "load /boot" not in render_loader_rc({})
    with pytest.raises(ValueError, match="plain KLD name"):
        render_loader_rc({}, modules=("../x",))


def test_rc_runs_every_case_with_timeout_and_powers_off():
    text = render_rc("patched", ["/rxl/tests/so_reuseport_lb_test"], case_timeout=90)
    assert text.startswith("#!/bin/sh\n")
    assert "M='==RXL=='" in text
    assert 'echo "$M BEGIN patched"' in text and 'echo "$M END patched"' in text
    assert "sysctl -n kern.sched.topology_spec" in text
    assert "dev.*.*.iflib.rxq*.cpu" in text
    assert ('timeout 90 sh -c \'sleep 1 >/dev/null 2>&1 & "$@"; exit $?\' sh '
            '"$p" -r /dev/stdout "$c"') in text
    assert "for p in /rxl/tests/so_reuseport_lb_test; do" in text
    assert "reboot -n -q -p" in text.splitlines()[-1]
    assert "reboot" not in render_rc("x", [], poweroff=False)


def test_rc_passes_atf_vars_to_every_case():
    text = render_rc("patched", ["/rxl/tests/t"], case_timeout=400,
                     atf_vars=[("churn_seconds", "200"), ("x.y", "a,b")])
    assert ' sh "$p" -r /dev/stdout -v churn_seconds=200 -v x.y=a,b "$c"' in text
    assert "timeout 400 sh -c" in text
    assert '"$p" -r /dev/stdout "$c"' in render_rc("patched", ["/rxl/tests/t"])


@pytest.mark.parametrize("name,value", [("", "1"), ("a b", "1"), ("a;b", "1"), ("n", ""),
                                        ("n", "1 2"), ("n", "$(reboot)"), ("n", "a'b")])
def test_rc_rejects_bad_atf_vars(name, value):
    with pytest.raises(ValueError, match="ATF variable"):
        render_rc("x", [], atf_vars=[(name, value)])


@pytest.mark.parametrize("label,progs,timeout", [("a b", [], 1), ("x", ["/p q"], 1),
                                                 ("x", [], 0)])
def test_rc_rejects_bad_words(label, progs, timeout):
    with pytest.raises(ValueError):
        render_rc(label, progs, case_timeout=timeout)


def test_plan_root_layout_and_conflicts():
    acts = plan_root(loader_efi="/o/loader_simp.efi", kernel="/o/kernel",
                     programs={"/bin/sh": "/o/sh"}, libs={"/lib/libc.so.7": "/o/libc.so.7"},
                     tests={"/rxl/tests/t": "/o/t"}, loader_rc="boot\n", rc="#!/bin/sh\n")
    dests = [a.dest for a in acts]
    assert dests[:6] == ["efi/boot/BOOTx64.EFI", "boot/kernel/kernel", "boot/loader.rc",
                         "etc/rc", "dev/", "tmp/"]
    assert {"bin/sh", "lib/libc.so.7", "rxl/tests/t"} <= set(dests)
    with pytest.raises(ImageError, match="twice"):
        plan_root(loader_efi="l", kernel="k", programs={"/etc/rc": "x"}, libs={}, tests={},
                  loader_rc="", rc="")
    with pytest.raises(ImageError, match="absolute"):
        plan_root(loader_efi="l", kernel="k", programs={"bin/sh": "x"}, libs={}, tests={},
                  loader_rc="", rc="")


def test_resolve_libs_closure(tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "usr/lib").mkdir(parents=True)
    for p in ("lib/libc.so.7", "lib/libedit.so.8", "usr/lib/libtinfow.so.9"):
        (tmp_path / p).write_bytes(b"")
    graph = {"/bin/sh": ["libedit.so.8", "libc.so.7"],
             str(tmp_path / "lib/libedit.so.8"): ["libtinfow.so.9", "libc.so.7"],
             str(tmp_path / "usr/lib/libtinfow.so.9"): ["libc.so.7"],
             str(tmp_path / "lib/libc.so.7"): []}
    found = resolve_libs(["/bin/sh"], str(tmp_path), needed=lambda b: graph[b])
    assert sorted(found) == ["/lib/libc.so.7", "/lib/libedit.so.8", "/usr/lib/libtinfow.so.9"]
    with pytest.raises(ImageError, match="libnope.so.1"):
        resolve_libs(["/x"], str(tmp_path), needed=lambda b: ["libnope.so.1"])


def test_stage_root(tmp_path):
    src = tmp_path / "kernel"
    src.write_bytes(b"\x7fELF")
    root = tmp_path / "root"
    info = stage_root(str(root), [Action("boot/kernel/kernel", source=str(src)),
                                  Action("etc/rc", data="#!/bin/sh\n"), Action("dev/")])
    assert (root / "boot/kernel/kernel").read_bytes() == b"\x7fELF"
    assert (root / "dev").is_dir() and len((root / "boot/entropy").read_bytes()) == 4096
    assert info["files"] == 2
    with pytest.raises(ImageError, match="missing"):
        stage_root(str(root), [Action("x", source=str(tmp_path / "nope"))])


def test_rc_with_sshd_lines_and_hold():
    from rxl.guest import sshguest
    from rxl.guest.image import render_rc
    text = render_rc("up", [], poweroff=True, sshd_lines=sshguest.rc_lines(), hold=True)
    lines = text.splitlines()
    i_sshd = next(i for i, ln in enumerate(lines) if ln.startswith("/usr/sbin/sshd"))
    assert lines.index("ifconfig lo0 inet 127.0.0.1/8 up") < i_sshd
    assert i_sshd < next(i for i, ln in enumerate(lines) if "TOPOLOGY BEGIN" in ln)
    assert "while :; do sleep 3600; done" in lines
    assert not any(ln.startswith("reboot") for ln in lines)  # hold wins over poweroff
    plain = render_rc("p", [])
    assert "sshd" not in plain and plain.rstrip().splitlines()[-1].startswith("reboot -n -q -p")

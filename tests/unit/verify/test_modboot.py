"""rxl run --modules: the module boot's rc lines (run in sh against stub programs), its
verdict rule, and its place in the dry run of both bases."""

import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from fakefreebsd import kernel_bytes, version_files
from rxl.cli.main import main
from rxl.guest.protocol import MARK
from rxl.verify import modboot, parse
from test_run import PK, fake_tree  # noqa: F401  (the fixture)


def _boot(tmp_path, kld_rc: int, ifaces: str) -> parse.RunResult:
    """The rc lines run by sh with stub kldload/kldstat/ifconfig, as the console shows
    them, parsed."""
    bin_ = tmp_path / "bin"
    bin_.mkdir(exist_ok=True)
    stubs = {"kldload": f"echo 'kldload: an error occurred' >&2; exit {kld_rc}",
             "kldstat": "echo 'Id Refs Address Size Name'; echo '1 3 0xffff 1 kernel'",
             "ifconfig": f"echo '{ifaces}'"}
    for name, body in stubs.items():
        (bin_ / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_ / name).chmod(0o755)
    script = "\n".join([f'echo "{MARK} BEGIN modules"', f'echo "{MARK} ATF BEGIN"',
                        *modboot.rc_lines("if_em", "igb0"), f'echo "{MARK} ATF END"',
                        f'echo "{MARK} END modules"'])
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True,
                         env={"PATH": f"{bin_}:/usr/bin:/bin"}).stdout
    return parse.parse_console(out.splitlines())


def test_a_loaded_driver_with_its_nic_passes(tmp_path):
    run = _boot(tmp_path, 0, "lo0 igb0 vtnet0")
    assert run.outcome == "completed"
    assert [(c.case, c.status) for c in run.cases] == [("kldload", "passed"), ("nic", "passed")]
    assert modboot.reasons({"modules": run}) == []


def test_a_driver_that_does_not_load_fails_both_and_says_why(tmp_path):
    run = _boot(tmp_path, 1, "lo0")
    by = {c.case: c for c in run.cases}
    assert by["kldload"].status == "failed" and "kldload if_em" in by["kldload"].reason
    assert "kernel" in by["kldload"].reason                      # kldstat's list
    assert by["nic"].status == "failed" and "no igb0" in by["nic"].reason
    reasons = modboot.reasons({"modules": run})
    assert len(reasons) == 2 and reasons[0].startswith("modules:kldload: failed")


def test_a_nic_name_that_only_starts_alike_does_not_count(tmp_path):
    run = _boot(tmp_path, 0, "lo0 igb01")
    assert {c.case: c.status for c in run.cases}["nic"] == "failed"


def test_reasons_need_both_cases_and_nothing_without_the_boot():
    assert modboot.reasons({}) == []
    empty = parse.parse_console([f"{MARK} BEGIN modules", f"{MARK} END modules"])
    assert modboot.reasons({"modules": empty}) == ["modules:kldload: not run",
                                                    "modules:nic: not run"]


def test_rc_lines_refuse_words_the_shell_would_split():
    with pytest.raises(ValueError):
        modboot.rc_lines("if_em; reboot", "igb0")


@pytest.mark.parametrize("major,clang", [(14, "llvm-16"), (15, "llvm-19")])
def test_dry_run_plans_the_module_boot_on_either_base(fake_tree, tmp_path, major,  # noqa: F811
                                                      clang):
    version_files(fake_tree, major)
    # the config the module boot builds (rxl run refuses a tree without it), with the
    # root disk's devices 15.0's MINIMAL has, so no cam or ahci module is added
    (fake_tree / "sys/amd64/conf/MINIMAL").write_text("ident MINIMAL\ndevice ahci\n"
                                                      "device scbus\n")
    # the pristine kernel is of the tree's release (rxl run refuses another's)
    v = f"FreeBSD {major}.0-RELEASE #0: Thu Dec  3 00:00:00 UTC 2026".encode()
    Path(PK(tmp_path)[1]).write_bytes(kernel_bytes(tail=b"\0@(#)" + v + b"\n\0" + v + b"\n"))
    args = ["run", "--src", str(fake_tree), "--objdir", str(tmp_path / "obj"), "--out",
            str(tmp_path / "out"), "--guest-dir", str(tmp_path / "g"), "--dry-run",
            "--transport", "serial", "--modules", *PK(tmp_path)]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    out = res.output
    # MINIMAL has no msdosfs and no MBR partitions: the FAT root's come as modules
    assert ("KERNCONF=MINIMAL 'MODULES_OVERRIDE=iflib em msdosfs "
            "geom/geom_part/geom_part_mbr'") in out
    assert f"--cross-bindir=/usr/lib/{clang}/bin" in out
    # issue 24: clang 16's modules reach __stack_chk_guard through the GOT
    assert (("'MODULES_OVERRIDE=iflib em msdosfs geom/geom_part/geom_part_mbr' "
             "WITHOUT_SSP=yes -DNO_KERNELCLEAN buildkernel") in out) == (major == 14)
    assert ("# WITHOUT_SSP: clang below 19" in out) == (major == 14)
    assert "their relocation types against sys/amd64/amd64/elf_machdep.c's" in out
    assert "rc runs kldload if_em and looks for igb0" in out
    assert out.count("qemu-system-x86_64 -machine q35,accel=tcg") == 4   # + the module boot
    res = CliRunner().invoke(main, args[:-3] + PK(tmp_path))
    assert "MODULES_OVERRIDE" not in res.output


def test_modules_is_the_own_guest_s(tmp_path):
    res = CliRunner().invoke(main, ["run", "--target", "ssh://root@192.0.2.1", "--modules",
                                    "--dry-run", "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "--modules" in res.output



def test_the_module_boot_lists_its_cases_inside_the_atf_block():
    """Issue 27 (tenth pass, 2): the parser counts LIST and CASE lines only
    between ATF BEGIN and ATF END; the module boot's were before ATF BEGIN."""
    lines = modboot.render_rc("igb").splitlines()
    begin, end = lines.index('echo "$M ATF BEGIN"'), lines.index('echo "$M ATF END"')
    at = [i for i, line in enumerate(lines) if f"{MARK} LIST " in line or f"{MARK} CASE " in line]
    assert len(at) == 4 and all(begin < i < end for i in at), (begin, at, end)


#: 15.0's amd64 MINIMAL's disk lines (149-156); 14.0's MINIMAL has none of them.
DISK_LINES = "device\t\tahci\t\t\t# AHCI-compatible SATA controllers\ndevice\t\tscbus\ndevice da\n"


@pytest.mark.parametrize("disk", [False, True])
def test_dry_run_loads_cam_and_ahci_when_minimal_lacks_them(fake_tree, tmp_path,  # noqa: F811
                                                           disk):
    """Issue 24: 14.0's MINIMAL has no ahci(4) and no CAM, so its module boot found no
    ada0 and stopped at mountroot>; the plan builds and loads cam then ahci for such a
    config (read, includes and all), and not for one with them (15.0's)."""
    version_files(fake_tree, 14)
    v = b"FreeBSD 14.0-RELEASE #0: Thu Dec  3 00:00:00 UTC 2026"
    Path(PK(tmp_path)[1]).write_bytes(kernel_bytes(tail=b"\0@(#)" + v + b"\n\0" + v + b"\n"))
    conf = fake_tree / "sys/amd64/conf"
    (conf / "MINIMAL").write_text("cpu HAMMER\nident MINIMAL\ndevice virtio\ninclude std.disk\n")
    (fake_tree / "sys/conf/std.disk").write_text(DISK_LINES if disk else "device vtnet\n")
    args = ["run", "--src", str(fake_tree), "--objdir", str(tmp_path / "obj"), "--out",
            str(tmp_path / "out"), "--guest-dir", str(tmp_path / "g"), "--dry-run",
            "--transport", "serial", "--modules", *PK(tmp_path)]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    root = "msdosfs, geom/geom_part/geom_part_mbr"
    if disk:
        assert "'MODULES_OVERRIDE=iflib em msdosfs geom/geom_part/geom_part_mbr' " in res.output
        assert f"# loader loads {root} before the kernel starts" in res.output
        assert "cam" not in res.output.split("MODULES_OVERRIDE=")[1].split("'")[0]
    else:
        assert ("'MODULES_OVERRIDE=iflib em msdosfs geom/geom_part/geom_part_mbr cam ahci' "
                in res.output)
        assert f"# loader loads {root}, cam, ahci before the kernel starts" in res.output
        assert "nm of iflib, em, msdosfs, geom/geom_part/geom_part_mbr, cam, ahci" in res.output
    assert "# root disk:" not in res.output       # the config was read


def test_dry_run_of_a_tree_not_fetched_yet_says_the_disk_is_decided_later(
        tmp_path, monkeypatch):
    """No --src: the base's MINIMAL is read once it is fetched. (A --src without
    MINIMAL is refused: tests/unit/cli/test_tries27p.py.)"""
    monkeypatch.setenv("RXL_WORK", str(tmp_path / "w"))
    monkeypatch.delenv("RXL_BASE_URL", raising=False)
    args = ["run", "--objdir", str(tmp_path / "obj"), "--out",
            str(tmp_path / "out"), "--guest-dir", str(tmp_path / "g"), "--dry-run",
            "--transport", "serial", "--modules"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    assert "# root disk: " in res.output and "conf/MINIMAL: cannot read it" in res.output
    assert "cam and ahci are added when MINIMAL lacks device scbus and device ahci" in res.output


def test_the_loader_loads_the_root_modules_in_order_cam_before_ahci(tmp_path, monkeypatch):
    """The real stage's loader.rc: the kernel, then msdosfs, geom_part_mbr, cam, ahci
    (ahci.c: MODULE_DEPEND(ahci, cam)), from a 14-like MINIMAL; the build and the boot
    are stubbed, the staged root is real."""
    from types import SimpleNamespace
    from rxl.guest import console, image
    from rxl.tree import build as tree_build
    src = tmp_path / "src"
    (src / "sys/amd64/conf").mkdir(parents=True)
    (src / "sys/amd64/conf/MINIMAL").write_text("ident MINIMAL\ndevice virtio\n")
    kos = {m: str(tmp_path / "ko" / f"{m.rsplit('/', 1)[-1]}.ko")
           for m in ("iflib", "em", "msdosfs", "geom/geom_part/geom_part_mbr", "cam", "ahci")}
    kos["em"] = str(tmp_path / "ko/if_em.ko")
    built = []

    def build_kernel(src_, objdir, kernconf, modules, **kw):
        built.append(list(modules))
        return [SimpleNamespace(extra={"modules": {m: kos[m] for m in modules}})]
    staged = {}
    monkeypatch.setattr(tree_build, "build_kernel", build_kernel)
    monkeypatch.setattr(image, "resolve_libs", lambda progs, sysroot: {})
    monkeypatch.setattr(image, "stage_root",
                        lambda root, acts: staged.update({a.dest: a for a in acts}))
    monkeypatch.setattr(modboot.qemu, "build_argv", lambda cfg, firmware: ["qemu"])
    monkeypatch.setattr(modboot.qemu, "find_ovmf", lambda: "/ovmf")

    class Stop(Exception):
        pass

    def watch(*a, **kw):
        raise Stop
    monkeypatch.setattr(console, "watch", watch)
    monkeypatch.setattr(modboot, "_series_files", lambda: [])
    req = SimpleNamespace(objdir=str(tmp_path / "obj"), out=str(tmp_path / "out"),
                          dry_run=False)
    st = SimpleNamespace(src=str(src), stage_dir=tmp_path / "stage", logs={}, runs={},
                         echo=lambda s: None,
                         world=SimpleNamespace(programs={}, sysroot=tmp_path,
                                               loader_efi=tmp_path / "loader.efi"))
    with pytest.raises(Stop):
        modboot.stage(req, st, lambda root, r: None, "igb")
    assert built == [["iflib", "em", "msdosfs", "geom/geom_part/geom_part_mbr", "cam", "ahci"]]
    rc = staged["boot/loader.rc"].data
    loads = [ln for ln in rc.splitlines() if ln.startswith("load ")]
    assert loads == ["load /boot/kernel/kernel", "load /boot/kernel/msdosfs.ko",
                     "load /boot/kernel/geom_part_mbr.ko", "load /boot/kernel/cam.ko",
                     "load /boot/kernel/ahci.ko"]

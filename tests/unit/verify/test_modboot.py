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

"""Rig kernels of ``rxl learn`` (rxl.tree.rig) and the test-rig patches in patches/guest/.

No FreeBSD tree: the plan is pure, and the git questions run against small
temporary repositories.
"""

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from rxl.tree import rig
from rxl.tree import check as C
from rxl.tree import patch as P
from rxl.cli.main import main
from fakefreebsd import version_files

REPO = Path(__file__).resolve().parents[3]
GUEST = REPO / "patches" / "guest"
PATCHED = "a1f96984696a7849575403fa62f2a0f5dd247840"
BASE = "2f2a4162bbb9e932d8e9cd9cb899fbf84310fb6b"

needs_git = pytest.mark.skipif(not shutil.which("git"), reason="needs git")


def _gp(name="0001-x.patch", data=b"diff\n", touches=("sys/dev/e1000/if_em.c",)):
    return rig.GuestPatch(name, f"/p/{name}", data, touches)


# ------------------------------------------------------------ the guest patches

def test_guest_patch_parses_and_touches_only_if_em():
    files = sorted(GUEST.glob("*.patch"))
    assert [f.name for f in files] == ["0001-em-Clear-ICR-under-MSI-X-for-QEMU-7.2-e1000e.patch"]
    text = files[0].read_text()
    p = P.parse_patch(text, files[0].name)
    assert [f.path for f in p.files] == ["sys/dev/e1000/if_em.c"]
    assert not p.files[0].new_file and not p.files[0].deleted
    assert len(p.files[0].hunks) == 2
    added = [ln for h in p.files[0].hunks for ln in h.lines if ln.startswith("+")]
    assert "+\t\t\tE1000_WRITE_REG(&sc->hw, E1000_ICR, reg_icr);" in added
    assert "+\t\t\t    sc->ims & ~E1000_IMS_OTHER);" in added
    # parse_diff alone agrees, and the message says what it is.
    assert [f.path for f in P.parse_diff(text.split("\n"))] == ["sys/dev/e1000/if_em.c"]
    assert "NOT part of the rxl series" in p.body
    assert C.check_message(p.subject, p.body) == []
    got = rig.read_guest_patches(GUEST)
    assert [g.touches for g in got] == [("sys/dev/e1000/if_em.c",)]


def test_guest_patches_stay_out_of_the_series():
    assert all(p.parent.name == "patches" for p in P.patch_files(REPO / "patches"))
    assert not any("guest" in str(p) for p in P.patch_files(REPO / "patches"))
    assert (GUEST / "README").is_file()


def test_read_guest_patches_refuses_what_does_not_parse(tmp_path):
    assert rig.read_guest_patches(tmp_path / "none") == []
    (tmp_path / "0001-bad.patch").write_text("no mail header\n")
    with pytest.raises(rig.RigError, match="0001-bad.patch"):
        rig.read_guest_patches(tmp_path)


# ------------------------------------------------------------ cache key

def test_cache_key_changes_with_patch_bytes_and_commit():
    a = rig.kernel_cache_path("/g", "patched", PATCHED, [b"one"])
    assert a == Path(f"/g/kernels/patched-{PATCHED[:12]}-{rig.rig_tag([b'one'])}/kernel")
    assert rig.rig_tag([b"one"]).startswith("rig") and len(rig.rig_tag([b"one"])) == 11
    assert rig.kernel_cache_path("/g", "patched", PATCHED, [b"one!"]) != a
    assert rig.kernel_cache_path("/g", "patched", BASE, [b"one"]) != a
    assert rig.kernel_cache_path("/g", "pristine", PATCHED, [b"one"]) != a
    assert rig.kernel_cache_path("/g", "patched", PATCHED, [b"one"]) == a
    # The real patch: one changed byte gives another kernel.
    data = [g.data for g in rig.read_guest_patches(GUEST)]
    flipped = [data[0].replace(b"ICR", b"ICS", 1)]
    assert rig.rig_tag(data) != rig.rig_tag(flipped)


def test_cache_path_errors():
    with pytest.raises(ValueError, match="variant"):
        rig.kernel_cache_path("/g", "spread", PATCHED, [])
    with pytest.raises(ValueError, match="hex"):
        rig.kernel_cache_path("/g", "patched", "HEAD", [])


# ------------------------------------------------------------ plan

def test_plan_names_commits_paths_and_commands():
    plan = rig.plan_rig("/src", "/g", {"patched": PATCHED, "pristine": BASE},
                        [_gp("0001-a.patch"), _gp("0002-b.patch", b"x")], lock="/L")
    tag = rig.rig_tag([b"diff\n", b"x"])
    assert plan.rig_src == Path("/g/rig-src") and plan.objdir == Path("/g/obj-rig-src")
    assert plan.kernels["patched"].path == Path(f"/g/kernels/patched-{PATCHED[:12]}-{tag}/kernel")
    assert plan.kernels["pristine"].path == Path(f"/g/kernels/pristine-{BASE[:12]}-{tag}/kernel")
    kinds = [(s.kind, s.variant) for s in plan.steps]
    assert kinds[0] == ("clone", "")
    assert [k for k, v in kinds] == (
        ["clone", "checkout", "apply", "apply", "make", "make", "mkdir", "copy", "rename", "drop",
         "checkout", "apply", "apply", "make", "mkdir", "copy", "rename", "drop"])
    lines = [s.shell() for s in plan.steps]
    assert lines[0] == "git clone -q --shared --no-checkout /src /g/rig-src"
    assert lines[1] == f"git -C /g/rig-src checkout -q -f --detach {PATCHED}"
    assert lines[2] == "git -C /g/rig-src apply /p/0001-a.patch"
    assert lines[3] == "git -C /g/rig-src apply /p/0002-b.patch"
    assert lines[4].startswith("flock /L env MAKEOBJDIRPREFIX=/g/obj-rig-src python3 "
                               "/g/rig-src/tools/build/make.py ")
    assert lines[4].endswith(" kernel-toolchain")
    assert lines[5].endswith(" KERNCONF=RXL NO_MODULES=yes -DNO_KERNELCLEAN buildkernel")
    built = "/g/obj-rig-src/g/rig-src/amd64.amd64/sys/RXL/kernel"
    dest = f"/g/kernels/patched-{PATCHED[:12]}-{tag}/kernel"
    assert lines[7] == f"cp {built} {dest}.tmp"
    assert lines[8] == f"mv -f {dest}.tmp {dest}"
    assert lines[9] == "git -C /g/rig-src checkout -q -f"
    assert lines[10] == f"git -C /g/rig-src checkout -q -f --detach {BASE}"
    assert "kernel-toolchain" not in " ".join(lines[10:])
    text = "\n".join(plan.lines())
    assert f"# rig kernel pristine: {BASE[:12]} + 0001-a.patch, 0002-b.patch" in text
    assert "(cached)" not in text


def test_plan_reuses_cached_kernels_and_an_existing_clone():
    cached = rig.kernel_cache_path("/g", "patched", PATCHED, [b"diff\n"])
    plan = rig.plan_rig("/src", "/g", {"patched": PATCHED, "pristine": BASE}, [_gp()],
                        rig_exists=True, toolchain_done=True, cached=lambda p: p == cached)
    assert plan.kernels["patched"].cached and not plan.kernels["pristine"].cached
    assert {s.variant for s in plan.steps} == {"pristine"}
    assert not any(s.kind == "clone" or "kernel-toolchain" in s.argv for s in plan.steps)
    assert f"-> {cached} (cached)" in plan.lines()[0]
    warm = rig.plan_rig("/src", "/g", {"patched": PATCHED}, [_gp()], cached=lambda p: True)
    assert warm.steps == [] and list(warm.kernels) == ["patched"]


def test_plan_errors():
    with pytest.raises(ValueError, match="unknown rig kernel variant"):
        rig.plan_rig("/src", "/g", {"spread": PATCHED}, [])
    with pytest.raises(ValueError, match="hex"):
        rig.plan_rig("/src", "/g", {"patched": "main"}, [])


# ------------------------------------------------------------ git questions

def _git(d, *args):
    subprocess.run(["git", "-C", str(d), *args], check=True, capture_output=True)


def _repo(tmp_path, major=14):
    src = tmp_path / "src"
    (src / "sys/dev").mkdir(parents=True)
    (src / "sys/dev/x.c").write_text("int x;\n")
    version_files(src, major)
    (src / "README").write_text("r\n")
    _git(tmp_path, "init", "-q", str(src))
    _git(src, "add", "-A")
    _git(src, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    return src


def _head(src):
    return subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True,
                          text=True).stdout.strip()


@needs_git
def test_dirty_sys_gives_a_clear_error(tmp_path):
    src = _repo(tmp_path)
    head = _head(src)
    base = tmp_path / "BASE"
    base.write_text(f"repository: t\ncommit: {head}\n__FreeBSD_version: 1500068\n")
    (src / "README").write_text("changed outside sys/\n")
    (src / "sys/new.c").write_text("untracked is fine\n")
    assert rig.tree_commits(str(src), ["patched", "pristine"], base) == {
        "patched": head, "pristine": head}
    (src / "sys/dev/x.c").write_text("int y;\n")
    with pytest.raises(rig.RigError) as exc:
        rig.tree_commits(str(src), ["patched"], base)
    msg = str(exc.value)
    assert "uncommitted changes under sys/" in msg and "sys/dev/x.c" in msg
    assert "commit them, or pass --kernel" in msg and "\n" not in msg
    # The pristine kernel alone does not care.
    assert rig.tree_commits(str(src), ["pristine"], base) == {"pristine": head}


@needs_git
def test_tree_commits_errors(tmp_path):
    (tmp_path / "plain").mkdir()
    with pytest.raises(rig.RigError, match="not a git tree.*--pristine-kernel"):
        rig.tree_commits(str(tmp_path / "plain"), ["patched"])
    src = _repo(tmp_path)
    base = tmp_path / "BASE"
    base.write_text(f"repository: t\ncommit: {'0' * 40}\n__FreeBSD_version: 1500068\n")
    with pytest.raises(rig.RigError, match="does not have the base commit 000000000000"):
        rig.tree_commits(str(src), ["pristine"], base)
    with pytest.raises(rig.RigError, match="pass --pristine-kernel"):
        rig.tree_commits(str(src), ["pristine"], tmp_path / "NOBASE")


@needs_git
def test_cli_dirty_tree_fails_in_one_line(tmp_path, kernel_file):
    src = _repo(tmp_path, major=15)  # kernel_file's release: --kernel is booted with it
    (src / "sys/dev/x.c").write_text("int y;\n")
    res = CliRunner().invoke(main, ["learn", "--src", str(src), "--guest-dir",
                                    str(tmp_path / "g"), "--objdir", str(tmp_path / "o"),
                                    "--config", "learn-on", "--learn-sysctl", "a.b",
                                    "--dry-run"])
    assert res.exit_code == 2
    assert "uncommitted changes under sys/" in res.output and "--kernel" in res.output
    assert not (tmp_path / "g").exists()
    # --kernel overrides the rig, dirty or not.
    res = CliRunner().invoke(main, ["learn", "--src", str(src), "--guest-dir",
                                    str(tmp_path / "g"), "--objdir", str(tmp_path / "o"),
                                    "--config", "learn-on", "--learn-sysctl", "a.b",
                                    "--kernel", str(kernel_file), "--dry-run"])
    assert res.exit_code == 0, res.output
    assert f"# kernel patched: {kernel_file} (given)" in res.stdout and "rig-src" not in res.stdout


@needs_git
def test_cli_dry_run_plans_rig_kernels_and_runs_nothing(tmp_path, monkeypatch):
    """QEMU 7.2's e1000e (the fallback shape): the rig applies patches/guest/."""
    from rxl.guest import qemu
    monkeypatch.setattr(qemu, "installed_version", lambda binary="x", run=None: (7, 2))
    src = _repo(tmp_path, major=15)  # the series' release (rxl learn refuses another)
    head = _head(src)
    g = tmp_path / "g"
    e1000e = ["--target", "guest-e1000e"]
    res = CliRunner().invoke(main, ["learn", "--src", str(src), "--guest-dir", str(g),
                                    "--objdir", str(tmp_path / "o"), "--config", "learn-on",
                                    "--learn-sysctl", "a.b", "--dry-run", *e1000e])
    assert res.exit_code == 0, res.output
    out = res.stdout
    tag = rig.rig_tag([p.data for p in rig.read_guest_patches()])
    rig_src = f"{g}/rig-src"
    assert shlex.join(["git", "clone", "-q", "--shared", "--no-checkout", str(src),
                       rig_src]) in out
    assert shlex.join(["git", "-C", rig_src, "checkout", "-q", "-f", "--detach", head]) in out
    patch = sorted(GUEST.glob("0001-em-*.patch"))[0]
    assert shlex.join(["git", "-C", rig_src, "apply", str(patch)]) in out
    assert "kernel-toolchain" in out and "buildkernel" in out
    assert f"{g}/kernels/patched-{head[:12]}-{tag}/kernel" in out
    assert "pristine" not in out.split("# server")[0].replace("--pristine-kernel", "")
    assert "# world: missing" in out and "buildworld" in out
    assert f"# boot patched: kernel {g}/kernels/patched-{head[:12]}-{tag}/kernel" in out
    assert not g.exists() and not (tmp_path / "o").exists()
    # A kernel in the cache is reused, and said so.
    k = g / "kernels" / f"patched-{head[:12]}-{tag}" / "kernel"
    k.parent.mkdir(parents=True)
    k.write_text("")
    res = CliRunner().invoke(main, ["learn", "--src", str(src), "--guest-dir", str(g),
                                    "--objdir", str(tmp_path / "o"), "--config", "learn-on",
                                    "--learn-sysctl", "a.b", "--dry-run", *e1000e])
    assert res.exit_code == 0, res.output
    assert f"-> {k} (cached)" in res.stdout and "git clone" not in res.stdout


@needs_git
def test_rig_clone_must_be_of_the_same_source(tmp_path):
    src = _repo(tmp_path)
    rig_dir = tmp_path / "g" / "rig-src"
    assert rig.rig_is_clone(rig_dir, str(src)) is False
    subprocess.run(["git", "clone", "-q", "--shared", "--no-checkout", str(src), str(rig_dir)],
                   check=True)
    assert rig.rig_is_clone(rig_dir, str(src)) is True
    other = tmp_path / "other"
    other.mkdir()
    with pytest.raises(rig.RigError, match="not of .*remove it"):
        rig.rig_is_clone(rig_dir, str(other))
    (tmp_path / "plain").mkdir()
    with pytest.raises(rig.RigError, match="not a git clone"):
        rig.rig_is_clone(tmp_path / "plain", str(src))

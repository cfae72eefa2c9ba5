"""rxl.tree.version: what a tree says it is, and the compiler that follows from it."""

from pathlib import Path

import pytest

from fakefreebsd import version_files
from rxl.tree import build as B
from rxl.tree import version as V
from rxl.tree import world as W


def test_the_15_snapshot_reads_as_15_0_rebranded_with_llvm_19(tmp_path):
    version_files(tmp_path, 15)
    v = V.read_version(str(tmp_path))
    assert (v.freebsd_version, v.major, v.minor, v.release) == (1500068, 15, 0, "15.0")
    assert (v.type, v.revision, v.branch, v.llvm) == ("Irid", "0.0.2", "ALPHA", (19, 1, 7))
    assert v.rebranded
    assert v.target_triple == "x86_64-unknown-freebsd15.0"
    assert v.cross_bindir == "/usr/lib/llvm-19/bin"
    assert v.describe() == ("FreeBSD 15.0 (__FreeBSD_version 1500068, LLVM 19.1.7; "
                            "newvers.sh says Irid 0.0.2-ALPHA: rebranded)")


def test_the_14_base_is_not_rebranded_and_gets_clang_16_for_its_llvm_17(tmp_path):
    version_files(tmp_path, 14)
    v = V.read_version(str(tmp_path))
    assert (v.release, v.rebranded, v.llvm) == ("14.0", False, (17, 0, 6))
    assert v.cross_llvm == 16
    assert v.target_triple == "x86_64-unknown-freebsd14.0"
    assert "rebranded" not in v.describe()


def test_a_real_15_0_release_tree_is_not_rebranded(tmp_path):
    version_files(tmp_path, 15, type="FreeBSD", revision="15.0", branch="RELEASE")
    assert not V.read_version(str(tmp_path)).rebranded


@pytest.mark.parametrize("tree,want", [(19, 19), (17, 16), (16, 16), (20, 19), (12, 14),
                                       (None, 16)])
def test_cross_llvm_rule(tree, want):
    assert V.cross_llvm(tree) == want


def test_cross_llvm_needs_a_choice():
    with pytest.raises(ValueError):
        V.cross_llvm(19, available=())


@pytest.mark.parametrize("text,want", [
    ("#define __FreeBSD_version 1500068\n", 1500068),
    ("#undef __FreeBSD_version\n#define\t__FreeBSD_version\t1400507\t/* x */\n", 1400507),
    ("/* #define __FreeBSD_version 1 */\n", None),
    ("", None),
])
def test_parse_param_h(text, want):
    assert V.parse_param_h(text) == want


def test_parse_newvers_takes_the_first_plain_assignment():
    text = 'TYPE="FreeBSD"\nREVISION="15.0"\nBRANCH="RELEASE"\nBRANCH=${BRANCH_OVERRIDE}\n'
    assert V.parse_newvers(text) == {"TYPE": "FreeBSD", "REVISION": "15.0",
                                     "BRANCH": "RELEASE"}
    assert V.parse_newvers("REVISION=15.0\n") == {}


def test_parse_vcs_version():
    assert V.parse_vcs_version('#define LLVM_REVISION "llvmorg-19.1.7-0-gcd708029e0b2"') == \
        (19, 1, 7)
    assert V.parse_vcs_version('#define CLANG_REVISION "llvmorg-19.1.7"') is None


def test_a_tree_without_param_h_or_its_define_is_refused(tmp_path):
    with pytest.raises(V.VersionError, match="param.h: cannot read it"):
        V.read_version(str(tmp_path))
    (tmp_path / "sys/sys").mkdir(parents=True)
    (tmp_path / "sys/sys/param.h").write_text("/* nothing */\n")
    with pytest.raises(V.VersionError, match="no #define __FreeBSD_version"):
        V.read_version(str(tmp_path))
    assert V.version_or_none(str(tmp_path)) is None


def test_newvers_and_vcs_version_may_be_missing(tmp_path):
    (tmp_path / "sys/sys").mkdir(parents=True)
    (tmp_path / "sys/sys/param.h").write_text("#define __FreeBSD_version 1500068\n")
    v = V.read_version(str(tmp_path))
    assert (v.type, v.llvm, v.cross_llvm) == ("", None, 19)  # 15.0's own: fault 8 below
    assert v.rebranded  # an empty TYPE is not FreeBSD: said, not guessed


def test_make_py_argv_takes_the_tree_s_compiler(tmp_path):
    t14, t15 = tmp_path / "a", tmp_path / "b"
    version_files(t14, 14)
    version_files(t15, 15)
    assert "--cross-bindir=/usr/lib/llvm-16/bin" in B.make_py_argv(t14, "/o", ["x"])
    assert "--cross-bindir=/usr/lib/llvm-19/bin" in B.make_py_argv(t15, "/o", ["x"])
    assert "--cross-bindir=/c" in B.make_py_argv(t15, "/o", ["x"], cross_bindir="/c")
    (tmp_path / "says-nothing").mkdir()      # there, and no param.h: the fallback
    assert "--cross-bindir=/usr/lib/llvm-16/bin" in B.make_py_argv(tmp_path / "says-nothing",
                                                                   "/o", ["x"])
    # not there yet (a base to fetch): patches/BASE's release, 15.0's clang 19
    assert "--cross-bindir=/usr/lib/llvm-19/bin" in B.make_py_argv(tmp_path / "none",
                                                                   "/o", ["x"])


def test_a_tree_not_fetched_yet_is_planned_as_patches_base_says(tmp_path):
    """F25: a dry run without --src plans the base before it is fetched; the version
    then came from no file and the plan was 14's (clang 16, freebsd14.0). It is the
    release patches/BASE's __FreeBSD_version names (1500068: 15.0, LLVM 19.1.7), said
    as assumed; a tree that is there is read, and one that says nothing is the
    fallback's."""
    from rxl.tree import patch as P
    from rxl.tree import toolchain as T
    assert P.read_base(Path(__file__).resolve().parents[3] / "patches").freebsd_version \
        == "1500068"
    v = V.base_version()
    assert v == V.TreeVersion(1500068, "FreeBSD", "15.0", "RELEASE", (19, 1, 7),
                              assumed=True)
    assert (v.cross_llvm, v.cross_bindir, v.target_triple) == (
        19, "/usr/lib/llvm-19/bin", "x86_64-unknown-freebsd15.0")
    assert v.describe() == ("FreeBSD 15.0 (__FreeBSD_version 1500068 assumed from "
                            "patches/BASE, the tree not fetched yet; LLVM 19.1.7, 15.0's own)")
    absent = str(tmp_path / "base-2ec8aa904381")
    assert V.planned_version(absent) == v
    assert V.cross_bindir_of(absent) == "/usr/lib/llvm-19/bin"
    assert W.compiler_for(absent) == ("/usr/lib/llvm-19/bin/clang",
                                      "x86_64-unknown-freebsd15.0")
    assert T.cross_llvm(absent) == 19
    t14 = tmp_path / "t14"
    version_files(t14, 14)
    assert V.planned_version(str(t14)) == V.read_version(str(t14))
    assert V.planned_version(str(t14)).cross_llvm == 16
    (tmp_path / "nothing").mkdir()
    assert V.planned_version(str(tmp_path / "nothing")) is None
    # another BASE: its release
    (tmp_path / "p").mkdir()
    (tmp_path / "p/BASE").write_text(P.Base("o/r", "a" * 40, "1400097").text())
    v14 = V.base_version(tmp_path / "p")
    assert (v14.release, v14.llvm, v14.cross_llvm, v14.assumed) == ("14.0", (16, 0, 6), 16,
                                                                   True)
    assert V.base_version(tmp_path / "absent") is None


def test_the_atf_programs_are_compiled_for_the_tree_s_release(tmp_path):
    version_files(tmp_path, 15)
    argv = W.atf_cc_argv("t.c", "t", "/sr", tree=str(tmp_path))
    assert argv[:2] == ["/usr/lib/llvm-19/bin/clang", "--target=x86_64-unknown-freebsd15.0"]
    assert W.atf_cc_argv("t.c", "t", "/sr")[:2] == [W.DEFAULT_CLANG,
                                                     f"--target={W.TARGET_TRIPLE}"]


def test_an_atf_program_links_what_the_tree_s_makefile_adds(tmp_path):
    mk = tmp_path / "tests/sys/netinet/Makefile"
    mk.parent.mkdir(parents=True)
    mk.write_text("ATF_TESTS_C+=\tso_reuseport_lb_test\n"
                  "LIBADD.so_reuseport_lb_test=\tpthread\nLIBADD.udp_bindings=\tpthread\n")
    assert W.test_libadd(str(tmp_path), "so_reuseport_lb_test") == ["pthread"]
    assert W.test_libadd(str(tmp_path), "so_reuseport_lb") == []
    argv = W.atf_cc_argv("t.c", "/o/so_reuseport_lb_test", "/sr", tree=str(tmp_path))
    assert argv[-2:] == ["-lpthread", "-lprivateatf-c"]
    assert "-lpthread" not in W.atf_cc_argv("t.c", "/o/so_reuseport_lb_test", "/sr")
    assert "lib/libthr" in W.PREBUILD_LIBS


# ---- issue 27, eighth pass, faults 8 and 9

@pytest.mark.parametrize("fv,want", [(1500068, 19), (1400507, 16), (1300139, 16)])
def test_a_tree_that_names_no_llvm_gets_its_release_s_compiler(tmp_path, fv, want):
    """Fault 8: a 15 tree without VCSVersion.inc was built with clang 16
    (FALLBACK_LLVM); the README says a 15 tree gets 15.0's own, clang 19. 14 keeps
    16 (RELEASE_LLVM[14] is 16.0.6); a release not in RELEASE_LLVM, the fallback."""
    version_files(tmp_path, 15, fv=fv, type="FreeBSD", revision=f"{fv // 100000}.0",
                  branch="RELEASE")
    (tmp_path / V.VCS_VERSION).unlink()
    v = V.read_version(str(tmp_path))
    assert (v.llvm, v.cross_llvm, v.cross_bindir) == (None, want, f"/usr/lib/llvm-{want}/bin")
    assert V.cross_bindir_of(str(tmp_path)) == f"/usr/lib/llvm-{want}/bin"
    assert "--cross-bindir=/usr/lib/llvm-%d/bin" % want in B.make_py_argv(tmp_path, "/o", ["x"])
    if fv == 1500068:
        assert v.describe() == ("FreeBSD 15.0 (__FreeBSD_version 1500068, LLVM not named, "
                                "15's own 19.1.7 assumed)")


@pytest.mark.parametrize("revision,why", [
    ("14.0", "but {p} __FreeBSD_version 1500068 is 15.0"),
    ("99.0", "but {p} __FreeBSD_version 1500068 is 15.0"),
    ("15.1", "but {p} __FreeBSD_version 1500068 is 15.0"),
    ("15.0.1", "but {p} __FreeBSD_version 1500068 is 15.0"),
    ("abc", "no release (N.N), and {p} __FreeBSD_version 1500068 (15.0)"),
])
def test_a_freebsd_newvers_that_contradicts_param_h_is_refused(tmp_path, revision, why):
    """Fault 9: TYPE="FreeBSD" REVISION="14.0" (or 99.0, abc) over __FreeBSD_version
    1500068 was accepted as "rebranded". A FreeBSD tree is not rebranded; its
    REVISION must be param.h's release."""
    version_files(tmp_path, 15, type="FreeBSD", revision=revision, branch="RELEASE")
    p, nv = tmp_path / V.PARAM_H, tmp_path / V.NEWVERS
    with pytest.raises(V.VersionError) as exc:
        V.read_version(str(tmp_path))
    assert str(exc.value) == (f"{nv} says FreeBSD {revision}, " + why.format(p=p) +
                              ": the tree contradicts itself")
    with pytest.raises(V.VersionError, match=r"^--src .*: the tree says no release \("):
        V.require_release(str(tmp_path), "x")


def test_a_rebranded_type_keeps_its_own_numbering_but_it_must_be_one(tmp_path):
    """Irid 0.0.2 over 1500068 (patches/BASE's tree) stays rebranded and read;
    a stable branch's REVISION may be the next minor (14.1-PRERELEASE over
    1400507); a REVISION that is no N.N is refused whatever the TYPE."""
    version_files(tmp_path, 15)
    assert V.read_version(str(tmp_path)).rebranded
    version_files(tmp_path, 14, revision="14.1", branch="PRERELEASE")
    v = V.read_version(str(tmp_path))
    assert (v.release, v.revision, v.rebranded) == ("14.0", "14.1", False)
    version_files(tmp_path, 14, revision="14.2")
    with pytest.raises(V.VersionError, match=r"is 14.0 \(or 14.1 on its stable branch\)"):
        V.read_version(str(tmp_path))
    version_files(tmp_path, 15, revision="abc")
    with pytest.raises(V.VersionError, match="says Irid abc, no release"):
        V.read_version(str(tmp_path))

"""rxl series check --src: a tree with the series, without it, or of another release."""

import shutil
import subprocess

from fakefreebsd import GIT, _git, _series, _tree
from rxl.tree import check as C
from rxl.tree import patch as P
from rxl.tree import series as S


def _project(tmp_path, src, base):
    """A project dir whose patches/ is a one-patch series on ``src``'s base."""
    project = tmp_path / "project"
    project.mkdir()
    patches = _series(tmp_path, src, base)
    shutil.move(str(patches), str(project / "patches"))
    return project


def test_series_state_of_a_base_and_of_the_applied_tree(tmp_path):
    src = tmp_path / "src"
    base = _tree(src)
    project = _project(tmp_path, src, base)
    patches = P.patch_files(project / "patches")
    state, detail = S.series_state(src, patches)
    assert state == S.SeriesState.APPLICABLE and "all apply on HEAD" in detail
    _git(src, "-c", "user.email=t@e", "-c", "user.name=T", "am", "-q", *map(str, patches))
    assert S.series_state(src, patches)[0] == S.SeriesState.APPLIED
    assert _git(src, "status", "--porcelain") == ""     # read-only: the index is untouched
    (src / "sys/kern/kern_y.c").write_text("int other;\n")
    _git(src, "commit", "-qam", "other y")
    state, detail = S.series_state(src, patches)
    assert state == S.SeriesState.NEITHER and "0001-" in detail


def test_check_on_a_tree_without_the_series_names_what_to_do(tmp_path):
    src = tmp_path / "src"
    base = _tree(src, major=15)
    project = _project(tmp_path, src, base)
    (project / "patches/BASE").write_text(P.Base("owner/repo", base, "1500068").text())
    rep = C.check_series(project, src)
    bad = [p for p in rep.tree_problems if "does not carry the series" in p]
    assert bad == [f"--src {src} does not carry the series at HEAD: none of the 1 patches "
                   f"is applied; all apply on HEAD; apply it first: rxl series apply --src "
                   f"{src}"]
    assert any(n.startswith(f"tree {src}: FreeBSD 15.0 (") for n in rep.notes)
    assert not any("mandoc -Tlint" in p or "checkstyle9" in p for p in rep.problems)


def test_check_refuses_a_tree_of_another_release(tmp_path):
    src = tmp_path / "src"
    base = _tree(src, major=14)
    project = _project(tmp_path, src, base)
    (project / "patches/BASE").write_text(P.Base("owner/repo", base, "1500068").text())
    rep = C.check_series(project, src)
    assert f"--src {src} is FreeBSD 14.0 (1400507), the series' base is __FreeBSD_version " \
           "1500068" in rep.tree_problems


def test_check_on_the_applied_tree_goes_on_to_its_man_pages(tmp_path):
    src = tmp_path / "src"
    base = _tree(src)
    project = _project(tmp_path, src, base)
    _git(src, "-c", "user.email=t@e", "-c", "user.name=T", "am", "-q",
         *map(str, P.patch_files(project / "patches")))
    rep = C.check_series(project, src)
    assert not rep.tree_problems, rep.tree_problems
    if shutil.which("mandoc"):
        assert any("mandoc -Tlint -W warning: 0 man page(s) checked" in n for n in rep.notes)

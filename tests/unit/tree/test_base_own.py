"""rxl.tree.base: a tree of the series' release from another history (a releng/15.0
checkout instead of the snapshot), and a tree of another release."""

import pytest

from fakefreebsd import _git, _series, _tree
from rxl.tree import base as B
from rxl.tree import patch as P


@pytest.fixture
def series15(tmp_path):
    """A 15 snapshot-like base with a one-patch series whose BASE says 1500068."""
    snap = tmp_path / "snap"
    base = _tree(snap, major=15)
    patches = _series(tmp_path, snap, base)
    (patches / "BASE").write_text(P.Base("owner/repo", base, "1500068").text())
    return base, patches


def test_own_history_of_the_release_gets_the_series_on_its_head(series15, tmp_path):
    base, patches = series15
    own = tmp_path / "releng"
    head = _tree(own, salt="# FreeBSD's own history\n", major=15)
    assert B.classify(str(own), patches) == B.SrcKind.OWN_BASE
    tree, kind = B.resolve(str(own), str(tmp_path / "work"), patches_dir=patches,
                           echo=lambda s: None)
    assert kind == B.SrcKind.OWN_BASE and tree.pristine == str(own)
    assert tree.src == str(tmp_path / "work" / f"src-{head[:12]}")
    assert (tmp_path / "work" / f"src-{head[:12]}/sys/kern/kern_y.c").read_text() == "int y;\n"
    assert _git(tree.src, "rev-parse", "HEAD~1") == head
    assert "not on its base commit" in tree.how
    assert _git(own, "status", "--porcelain") == ""        # SRC untouched


def test_own_history_carrying_the_series_is_used_as_it_is(series15, tmp_path):
    base, patches = series15
    own = tmp_path / "releng"
    _tree(own, salt="# FreeBSD's own history\n", major=15)
    _git(own, "-c", "user.email=t@e", "-c", "user.name=T", "am", "-q",
         *map(str, P.patch_files(patches)))
    assert B.classify(str(own), patches) == B.SrcKind.OWN_APPLIED
    tree, kind = B.resolve(str(own), str(tmp_path / "work"), patches_dir=patches)
    assert tree.src == str(own) and tree.pristine is None


def test_a_tree_of_another_release_is_refused_naming_both(series15, tmp_path):
    base, patches = series15
    old = tmp_path / "fbsd14"
    _tree(old, major=14)
    with pytest.raises(B.TreeError) as e:
        B.classify(str(old), patches)
    msg = str(e.value)
    assert f"does not have the base commit {base[:12]}" in msg
    assert "FreeBSD 14.0 (1400507), not of the series' release" in msg


def test_own_history_the_series_does_not_apply_to_is_refused(series15, tmp_path):
    base, patches = series15
    own = tmp_path / "releng"
    _tree(own, salt="# other\n", major=15)
    (own / "sys/kern/kern_y.c").write_text("int z;\n")
    _git(own, "add", ".")
    _git(own, "commit", "-qm", "y already there")
    with pytest.raises(B.TreeError, match="the tree is FreeBSD 15.0 but the series is not "
                                          "applied"):
        B.classify(str(own), patches)

"""rxl.tree.base: which tree a run builds from; the work clone; fetching the base.

Each test makes a small git repository shaped like a FreeBSD tree
(tools/build/make.py, sys/amd64/conf) and a one-patch series on it.
"""

import os
import subprocess
from pathlib import Path

import pytest

from fakefreebsd import _git, _series, _tree
from rxl.tree import base as B
from rxl.tree import patch as S

@pytest.fixture
def repo(tmp_path):
    src = tmp_path / "src"
    base = _tree(src)
    return src, base, _series(tmp_path, src, base)


def test_base_url_order_and_forms():
    assert B.base_url("ilnp/ilnp-freebsd14", env={}) == "https://github.com/ilnp/ilnp-freebsd14.git"
    assert B.base_url("ilnp/x", env={B.URL_ENV: "/mirror"}) == "/mirror"
    assert B.base_url("ilnp/x", "/opt", env={B.URL_ENV: "/mirror"}) == "/opt"
    assert B.base_url("https://example.org/r.git", env={}) == "https://example.org/r.git"
    with pytest.raises(B.TreeError, match="names no repository"):
        B.base_url("", env={})


def test_fetch_plan_local_is_a_shared_clone_remote_is_shallow(tmp_path):
    local = B.fetch_plan(str(tmp_path), "a" * 40, "/d")
    assert local[0][:5] == ["git", "clone", "-q", "--shared", "--no-checkout"]
    remote = B.fetch_plan("https://example.org/r.git", "a" * 40, "/d")
    assert ["git", "-C", "/d", "fetch", "-q", "--depth", "1", "origin", "a" * 40] in remote
    assert remote[-1] == ["git", "-C", "/d", "checkout", "-q", "--detach", "a" * 40]


def test_classify_tells_the_causes_apart(repo, tmp_path):
    src, base, patches = repo
    assert B.classify(str(src), patches) == B.SrcKind.BASE
    with pytest.raises(B.TreeError, match="no such directory"):
        B.classify(str(tmp_path / "absent"), patches)
    (tmp_path / "file").write_text("x")
    with pytest.raises(B.TreeError, match="not a directory"):
        B.classify(str(tmp_path / "file"), patches)
    with pytest.raises(B.TreeError, match="not a FreeBSD source tree"):
        B.classify(str(src / "sys"), patches)


def test_classify_missing_base_names_commit_and_repository(repo, tmp_path):
    src, base, patches = repo
    other = tmp_path / "other"
    _tree(other, salt="# another history\n")
    with pytest.raises(B.TreeError) as ei:
        B.classify(str(other), patches)
    msg = str(ei.value)
    assert f"does not have the base commit {base[:12]}" in msg and "owner/repo" in msg
    assert "series apply" not in msg


def test_classify_plain_tree_with_or_without_the_series(repo, tmp_path):
    src, base, patches = repo
    plain = tmp_path / "plain"
    subprocess.run(["cp", "-r", str(src), str(plain)], check=True)
    subprocess.run(["rm", "-rf", str(plain / ".git")], check=True)
    with pytest.raises(B.TreeError, match="not the top of a git clone and lacks the series"):
        B.classify(str(plain), patches)
    (plain / "sys/kern/kern_y.c").write_text("int y;\n")
    assert B.classify(str(plain), patches) == B.SrcKind.PLAIN_APPLIED


def test_work_clone_applies_never_touches_src_and_is_reused(repo, tmp_path):
    src, base, patches = repo
    before = (_git(src, "rev-parse", "HEAD"), _git(src, "branch", "--list"),
              _git(src, "status", "--porcelain"), (src / ".git/config").read_text())
    tree, kind = B.resolve(str(src), str(tmp_path / "work"), patches_dir=patches,
                           echo=lambda s: None)
    assert kind == B.SrcKind.BASE
    wc = Path(tree.src)
    assert wc == tmp_path / "work" / f"src-{base[:12]}"
    assert (wc / "sys/kern/kern_y.c").read_text() == "int y;\n"
    assert _git(wc, "rev-parse", "--abbrev-ref", "HEAD") == "rxl"
    assert B.classify(str(wc), patches) == B.SrcKind.APPLIED
    after = (_git(src, "rev-parse", "HEAD"), _git(src, "branch", "--list"),
             _git(src, "status", "--porcelain"), (src / ".git/config").read_text())
    assert after == before
    head = _git(wc, "rev-parse", "HEAD")
    again = B.work_clone(str(src), str(wc), patches, echo=lambda s: None)
    assert "reused" in again.how and again.commands == []
    assert _git(wc, "rev-parse", "HEAD") == head
    # A changed series is applied again, in the same clone.
    _series(tmp_path, src, base, text="int y2;\n")
    third = B.work_clone(str(src), str(wc), patches, echo=lambda s: None)
    assert "reused" not in third.how
    assert (wc / "sys/kern/kern_y.c").read_text() == "int y2;\n"


def test_applied_src_is_used_as_it_is(repo, tmp_path):
    src, base, patches = repo
    _git(src, "am", "-q", *map(str, S.patch_files(patches)))
    tree, kind = B.resolve(str(src), str(tmp_path / "work"), patches_dir=patches)
    assert kind == B.SrcKind.APPLIED and tree.src == str(src)
    assert not (tmp_path / "work").exists()


def test_work_clone_refuses_a_foreign_directory(repo, tmp_path):
    src, base, patches = repo
    dest = tmp_path / "work" / "x"
    dest.mkdir(parents=True)
    with pytest.raises(B.TreeError, match="is not a clone of"):
        B.work_clone(str(src), str(dest), patches)
    assert list(dest.iterdir()) == []


def test_dry_run_plans_and_writes_nothing(repo, tmp_path):
    src, base, patches = repo
    tree, kind = B.resolve(None, str(tmp_path / "work"), base_url_override=str(src),
                           patches_dir=patches, dry_run=True)
    assert kind == "fetched"
    assert tree.pristine == str(tmp_path / "work" / f"base-{base[:12]}")
    assert any(c.startswith("git clone -q --shared --no-checkout") for c in tree.commands)
    assert any("rxl series apply" in c for c in tree.commands)
    assert not (tmp_path / "work").exists()


@pytest.mark.parametrize("as_url", [False, True])
def test_fetch_base_local_path_and_file_url(repo, tmp_path, as_url):
    src, base, patches = repo
    url = f"file://{src}" if as_url else str(src)
    tree, kind = B.resolve(None, str(tmp_path / "work"), base_url_override=url,
                           patches_dir=patches, echo=lambda s: None)
    fetched = Path(tree.pristine)
    assert _git(fetched, "rev-parse", "HEAD") == base
    assert (fetched / "tools/build/make.py").is_file()
    if as_url:  # shallow: one commit
        assert _git(fetched, "rev-list", "--count", "HEAD") == "1"
    assert (Path(tree.src) / "sys/kern/kern_y.c").is_file()
    again, _ = B.resolve(None, str(tmp_path / "work"), base_url_override=url,
                         patches_dir=patches, echo=lambda s: None)
    assert "already fetched" in again.how and again.commands == []


def test_unreachable_base_says_so_and_how_to_give_src(repo, tmp_path):
    src, base, patches = repo
    with pytest.raises(B.TreeError) as ei:
        B.resolve(None, str(tmp_path / "work"), base_url_override="file:///nonexistent/repo",
                  patches_dir=patches, echo=lambda s: None)
    msg = str(ei.value)
    assert "cannot fetch the base" in msg and "file:///nonexistent/repo" in msg
    assert "SRC=DIR" in msg and B.URL_ENV in msg


def test_the_committed_base_names_a_fetchable_repository():
    base = S.parse_base((B.REPO_PATCHES / "BASE").read_text())
    assert B.base_url(base.repository, env={}).startswith("https://github.com/")



def test_work_clone_on_a_machine_without_a_git_identity(repo, tmp_path, monkeypatch):
    """A fresh machine has no user.name/user.email: git am refused with "Committer
    identity unknown" (the cold run). The series' commits then get the
    harness's committer; the authors stay the patches'."""
    src, base, patches = repo
    for var in ("GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "GIT_AUTHOR_NAME",
                "GIT_AUTHOR_EMAIL", "EMAIL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    # No identity guessed from the host name either, as on a bare Debian root.
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "user.useConfigOnly")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "true")
    tree, _ = B.resolve(str(src), str(tmp_path / "work"), patches_dir=patches,
                        echo=lambda s: None)
    wc = Path(tree.src)
    assert (wc / "sys/kern/kern_y.c").read_text() == "int y;\n"
    who = subprocess.run(["git", "-C", str(wc), "log", "-1", "--format=%cn <%ce>|%an"],
                         capture_output=True, text=True, check=True).stdout.strip()
    committer, author = who.split("|")
    assert committer == "rxl harness <rxl@localhost>"
    assert author != "rxl harness"

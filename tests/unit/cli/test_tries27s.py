"""Issue 27's fourteenth pass (/work/coord/nc14.md), faults 1, 3, 4 and 6:

1. ``--members ''`` of ``rxl deal`` (required) said "give one, or leave the
   option out", and leaving it out is "Missing option": a required option's
   empty value now says only "give one" (rxl.cli.options.empty_reason, for
   rxl.cli.surface.refuse_empty and the Text types);
3. ``rxl inspect`` called a bad rx or member line "not an rx line of the 14
   view": each kind's refusal now shows what such a line looks like
   (rxl.verify.inspect._not_a), saying when it is the older format its group
   line is in;
4. ``--src`` with sys/ but no tools/build/make.py was "no tools/build/make.py
   or sys/": rxl.tree.base.check_tree_dir names only what is missing;
6. ``rxl run --no-series --src T --dry-run`` said the sshd userland is built
   for the work clone src-<base>, while the run builds T as it is
   (rxl.verify.ownguest.run_tree now follows --no-series, and a tree of the
   release from another history: used as it is, or cloned at its HEAD).

Each refusal is one ``Error:`` line, exit 2, nothing made or changed."""

import re

import click
import pytest

from clierror import commands as _commands, error_line as _error, files as _files, run as _run, work  # noqa: F401 (work: fixture)
from fakefreebsd import _git, _series, _tree, plain_tree
from groupsview import VIEW14
from rxl.cli.main import main
from rxl.cli.options import Text
from rxl.tree import base as tree_base
from rxl.tree import patch as tree_patch
from rxl.verify import ownguest

# ------------------------------------------- 1: an empty value of a required option



def _text(p):
    return (not getattr(p, "is_flag", False) and not getattr(p, "count", False)
            and (p.type is click.STRING or isinstance(p.type, (click.Path, Text)))
            and not getattr(p, "empty_ok", False))


REQUIRED = [(path, p) for path, cmd in _commands() for p in cmd.params
            if isinstance(p, click.Option) and p.required and _text(p)]


@pytest.mark.parametrize("args, option", [
    (["deal", "--topology", "2x4x2", "--members", ""], "--members"),
    (["deal", "--topology", "", "--members", "0"], "--topology"),
    (["spread", "--topology", "2x4x2", "--queues", "4", "--intr-cpus", ""], "--intr-cpus"),
    (["outcomes", "--topology", "2x4x2", "--workers", "", "--rx-cpus", "0"], "--workers"),
])
def test_an_empty_required_option_is_not_told_to_be_left_out(args, option, work):
    """1: "an empty value: give one, or leave the option out"; left out, each
    is "Missing option"."""
    before = _files(work)
    assert _error(args) == f"Error: Invalid value for '{option}': an empty value: give one"
    assert _files(work) == before
    drop = args.index(option)
    assert _error(args[:drop] + args[drop + 2:]) == f"Error: Missing option '{option}'."


@pytest.mark.parametrize("path, param", REQUIRED,
                         ids=[f"{' '.join(a)} {max(p.opts, key=len)}" for a, p in REQUIRED])
def test_no_required_option_given_empty_says_leave_it_out(path, param, work):
    """1, every command: the option, and every other required one, given ''."""
    args = list(path)
    for p in [param] + [q for at, q in REQUIRED if at == path and q is not param]:
        args += [max(p.opts, key=len)] + [""] * max(p.nargs, 1)
    line = _error(args)
    assert "empty value" in line and "leave the option out" not in line, line


def test_an_empty_optional_value_still_says_it_may_be_left_out():
    """What is right stays: --counts may be left out (equal counts)."""
    assert _error(["deal", "--topology", "2x4x2", "--members", "0", "--counts", ""]) == \
        "Error: Invalid value for '--counts': an empty value: give one, or leave the option out"
    assert _error(["learn", "--dry-run", "--smp", ""]) == (  # a Text type's
        "Error: Invalid value for '--smp': an empty value: give one, or leave the option out")


# ------------------------------------------------------- 3: rxl inspect's lines

#: The module doc's view (the 15 series' format).
VIEW15 = """\
group port 8080 af inet members 2 map 32 deal 0
learn window_ms 10000 age_ms 4210 rolls 7
rx 0 last 6756 cur 3301 sum 13000
member 0 tag 0 learned
member 1 tag none
cpu 0 offset 0 slots 32
"""
AT = "group port 8080 af inet (line {})"
OLDER = ", in the older format its group line uses"


@pytest.mark.parametrize("view, old, new, want", [
    (VIEW14, "rx 4 prev 6793 cur 3350", "rx 4 prev -3 cur 3350",
     "line 5 ({at2}): not an rx line (rx CPU prev N cur N{older}): rx 4 prev -3 cur 3350"),
    (VIEW14, "member 1 tag 4 explicit", "member 1 tag 4 telepathic",
     "line 7 ({at2}): not a member line (member I tag none|hash - slots N, or member I tag "
     "CPU explicit|learned slots N{older}): member 1 tag 4 telepathic slots 16"),
    (VIEW15, "rx 0 last 6756", "rx 0 prev 6756",
     "line 3 ({at1}): not an rx line (rx CPU last N cur N sum N): "
     "rx 0 prev 6756 cur 3301 sum 13000"),
    (VIEW15, "member 1 tag none", "member 1 tag nobody",
     "line 5 ({at1}): not a member line (member I tag none, or member I tag CPU "
     "explicit|learned): member 1 tag nobody"),
    (VIEW15, "learn window_ms", "learn window",
     "line 2 ({at1}): not a learn line (learn window_ms N age_ms N rolls N): "
     "learn window 10000 age_ms 4210 rolls 7"),
    (VIEW14, "cpu 4 offset 16", "cpu 4 offset x",
     "line 9 ({at2}): not a cpu line (cpu CPU offset N slots N): cpu 4 offset x slots 16"),
], ids=["rx14", "member14", "rx15", "member15", "learn", "cpu"])
def test_a_bad_line_is_shown_what_it_should_look_like(view, old, new, want, work):
    """3: "not an rx line of the 14 view" (and "member line of the 14 view")."""
    f = work / "view.txt"
    f.write_text(view.replace(old, new))
    before = _files(work)
    line = _error(["inspect", f])
    assert line == "Error: " + want.format(at1=AT.format(1), at2=AT.format(2), older=OLDER)
    assert not re.search(r"\b1[45] view\b", line)
    assert _files(work) == before


# --------------------------------------------------- 4: what --src is missing

@pytest.mark.parametrize("has, lacks", [
    (("sys/sys",), "no tools/build/make.py"),
    (("tools/build/make.py",), "no sys/"),
    ((), "no tools/build/make.py and no sys/"),
])
def test_a_tree_check_names_only_what_is_missing(has, lacks, work):
    """4: a tree with sys/ but no make.py was "no tools/build/make.py or sys/"."""
    t = work / "t"
    t.mkdir()
    for rel in has:
        if rel.endswith(".py"):
            (t / rel).parent.mkdir(parents=True)
            (t / rel).write_text("# make.py\n")
        else:
            (t / rel).mkdir(parents=True)
    before = _files(work)
    assert _error(["run", "--check-only", "--src", t]) == \
        f"Error: Invalid value for '--src': {t}: not a FreeBSD source tree ({lacks})"
    assert _files(work) == before
    with pytest.raises(tree_base.TreeError) as e:
        tree_base.check_tree_dir(str(t), "--pristine-src")
    assert str(e.value) == f"--pristine-src {t}: not a FreeBSD source tree ({lacks})"


# ------------------------------------- 6: the tree the sshd userland is built for

def _objssh(text):
    return set(re.findall(r"obj-ssh(/\S+?)/amd64\.amd64", text))


def test_run_tree_follows_no_series(work, tmp_path, monkeypatch):
    """6: the tree the run builds, --no-series: --src as it is, or the base fetched."""
    monkeypatch.setenv("RXL_WORK", str(work / "w"))
    base = tree_patch.parse_base((tree_base.REPO_PATCHES / "BASE").read_text())
    src = plain_tree(tmp_path / "t15", 15, "GENERIC")
    w = (work / "w").resolve()
    assert ownguest.run_tree(str(src), series=False) == str(src.resolve())
    assert ownguest.run_tree(None, series=False) == str(w / f"base-{base.commit[:12]}")
    assert ownguest.run_tree(None) == str(w / f"src-{base.commit[:12]}")
    assert ownguest.choose(str(src), series=False)[1].startswith(
        f"the world stage builds the sshd userland with kyua for {src.resolve()} first")


@pytest.fixture
def own15(tmp_path, monkeypatch):
    """A 15 base with a one-patch series (the series rxl reads) and a tree of the
    release from another history; (tree, its HEAD)."""
    snap = tmp_path / "snap"
    base = _tree(snap, major=15)
    patches = _series(tmp_path, snap, base)
    (patches / "BASE").write_text(tree_patch.Base("owner/repo", base, "1500068").text())
    monkeypatch.setattr(tree_base, "REPO_PATCHES", patches)
    own = tmp_path / "releng"
    head = _tree(own, salt="# FreeBSD's own history\n", major=15)
    return own, head, patches, snap


def test_run_tree_of_the_release_from_another_history(own15, tmp_path):
    """rxl.tree.base.resolve applies the series on such a tree's HEAD in
    <work>/src-<HEAD[:12]>, or uses it as it is when its HEAD carries the series;
    run_tree said <work>/src-<base[:12]> for both."""
    own, head, patches, _ = own15
    w = tmp_path / "w"
    w.mkdir()
    tree, kind = tree_base.resolve(str(own), str(w), patches_dir=patches, dry_run=True,
                                   echo=lambda s: None)
    assert kind == tree_base.SrcKind.OWN_BASE
    assert ownguest.run_tree(str(own), str(w)) == tree.src == str(w / f"src-{head[:12]}")
    _git(own, "-c", "user.email=t@e", "-c", "user.name=T", "am", "-q",
         *map(str, tree_patch.patch_files(patches)))
    tree, kind = tree_base.resolve(str(own), str(w), patches_dir=patches)
    assert kind == tree_base.SrcKind.OWN_APPLIED
    assert ownguest.run_tree(str(own), str(w)) == tree.src == str(own)


def test_no_series_dry_run_names_the_tree_it_builds(own15, work, tmp_path):
    """6: --src holding the base: "builds the sshd userland with kyua for
    <work>/src-<base[:12]>" while the world commands built --src's
    (obj-ssh/work/fbsd15c)."""
    pytest.importorskip("paramiko")
    snap = own15[3]
    assert tree_base.classify(str(snap)) == tree_base.SrcKind.BASE
    r = _run(["run", "--dry-run", "--no-series", "--src", snap, "--objdir", tmp_path / "obj",
              "--guest-dir", tmp_path / "g", "--out", tmp_path / "out"])
    first = r.stderr.splitlines()[0]
    assert first.startswith(f"transport: ssh (the world stage builds the sshd userland "
                            f"with kyua for {snap.resolve()} first ("), r.output
    assert _objssh(r.stdout) == {str(snap)}, r.stdout  # what the world stage builds

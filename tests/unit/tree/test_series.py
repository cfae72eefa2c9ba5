"""Unit tests for rxl.tree.series: patch parsing, message rules, consistency.

None of these need a FreeBSD tree; the last test checks the committed
project itself (sys/ and tests/atf/ against patches/), which is the CI
consistency check.
"""

import os
from pathlib import Path

import pytest

from rxl.errors import BadOption
from rxl.tree import series as S
from rxl.tree import check as C
from rxl.tree import patch as P

PROJECT = Path(__file__).resolve().parents[3]

GOOD_BODY = """Queue i of an iflib device is bound to the i-th CPU of its
interrupt set, so a device with fewer queues than CPUs fills one L3
group.  Add a tunable that interleaves the L3 groups instead."""

NEW_FILE_PATCH = """From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001
From: A Person <a@example.org>
Date: Mon, 30 Nov 2026 05:00:00 +0000
Subject: [PATCH 1/2] net: Add a thing that is long enough to wrap the
 subject line

Body line one.

Reviewed by:	nobody
---
 sys/net/thing.c | 3 +++
 sys/net/old.c   | 3 ++-
 2 files changed, 5 insertions(+), 1 deletion(-)

diff --git a/sys/net/old.c b/sys/net/old.c
index 1111111..2222222 100644
--- a/sys/net/old.c
+++ b/sys/net/old.c
@@ -1,3 +1,3 @@
 a
-b
+B
 c
diff --git a/sys/net/thing.c b/sys/net/thing.c
new file mode 100644
index 0000000..3333333
--- /dev/null
+++ b/sys/net/thing.c
@@ -0,0 +1,3 @@
+int x;
+
+int y;
-- 
2.39.2

"""

SECOND_PATCH = """From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001
From: A Person <a@example.org>
Date: Mon, 30 Nov 2026 05:01:00 +0000
Subject: [PATCH 2/2] net: Change the thing

Why.
---
diff --git a/sys/net/thing.c b/sys/net/thing.c
index 3333333..4444444 100644
--- a/sys/net/thing.c
+++ b/sys/net/thing.c
@@ -1,3 +1,4 @@
 int x;
 
 int y;
+int z;
diff --git a/tests/sys/netinet/t_test.c b/tests/sys/netinet/t_test.c
new file mode 100644
--- /dev/null
+++ b/tests/sys/netinet/t_test.c
@@ -0,0 +1 @@
+no newline
\\ No newline at end of file
"""


def test_parse_header_and_folded_subject():
    p = P.parse_patch(NEW_FILE_PATCH, "0001-x.patch")
    assert p.author_name == "A Person"
    assert p.author_email == "a@example.org"
    assert p.subject == ("net: Add a thing that is long enough to wrap the "
                         "subject line")
    assert p.body == "Body line one.\n\nReviewed by:\tnobody"
    assert [f.path for f in p.files] == ["sys/net/old.c", "sys/net/thing.c"]


def test_new_file_content_and_modified_file():
    p = P.parse_patch(NEW_FILE_PATCH)
    thing = p.file("sys/net/thing.c")
    assert thing.new_file and not thing.deleted
    assert thing.added_content() == "int x;\n\nint y;\n"
    old = p.file("sys/net/old.c")
    assert not old.new_file
    with pytest.raises(P.SeriesError):
        old.added_content()
    assert P.apply_hunks("a\nb\nc\n", old.hunks) == "a\nB\nc\n"


def test_apply_hunks_mismatch_is_an_error():
    old = P.parse_patch(NEW_FILE_PATCH).file("sys/net/old.c")
    with pytest.raises(P.SeriesError, match="does not apply"):
        P.apply_hunks("a\nX\nc\n", old.hunks, "sys/net/old.c")


def test_series_added_files_follow_later_patches_and_no_eol():
    ps = [P.parse_patch(NEW_FILE_PATCH), P.parse_patch(SECOND_PATCH)]
    added = P.series_added_files(ps)
    assert added["sys/net/thing.c"] == "int x;\n\nint y;\nint z;\n"
    assert added["tests/sys/netinet/t_test.c"] == "no newline"
    assert "sys/net/old.c" not in added


def test_truncated_hunk_is_detected():
    text = NEW_FILE_PATCH.replace("+int y;\n-- \n", "-- \n")
    with pytest.raises(P.SeriesError, match="truncated hunk|longer than"):
        P.parse_patch(text)


def test_not_a_patch():
    with pytest.raises(P.SeriesError, match="no From/Subject"):
        P.parse_patch("hello\n\nworld\n")


def test_project_path_mapping():
    assert P.project_path_for("sys/netinet/in_pcblb_deal.c") == \
        "sys/netinet/in_pcblb_deal.c"
    assert P.project_path_for("tests/sys/netinet/so_x_test.c") == \
        "tests/atf/so_x_test.c"
    assert P.project_path_for("tests/sys/netinet/Makefile") is None
    assert P.project_path_for("share/man/man4/iflib.4") is None


def test_consistency(tmp_path):
    ps = [P.parse_patch(NEW_FILE_PATCH), P.parse_patch(SECOND_PATCH)]
    (tmp_path / "sys/net").mkdir(parents=True)
    (tmp_path / "tests/atf").mkdir(parents=True)
    (tmp_path / "sys/net/thing.c").write_text("int x;\n\nint y;\nint z;\n")
    (tmp_path / "tests/atf/t_test.c").write_text("no newline")
    assert P.check_consistency(ps, tmp_path) == []
    (tmp_path / "sys/net/thing.c").write_text("int x;\n\nint w;\nint z;\n")
    (tmp_path / "sys/net/extra.h").write_text("")
    (tmp_path / "tests/atf/t_test.c").unlink()
    probs = P.check_consistency(ps, tmp_path)
    assert any("extra.h: in the project but added by no patch" in p
               for p in probs)
    assert any("t_test.c: added by the series but missing" in p
               for p in probs)
    assert any("thing.c: differs" in p and "line 3" in p for p in probs)


@pytest.mark.parametrize("subject", [
    "iflib: Optionally spread queue CPUs across cache groups",
    "netinet: Add SO_REUSEPORT_LB_CPU, dealing members by receive CPU",
    "netinet: Learn SO_REUSEPORT_LB receive and worker CPUs at accept",
    "sys/netinet, tests: Fix a thing",
])
def test_good_messages(subject):
    assert C.check_message(subject, GOOD_BODY) == []
    assert C.check_message(subject, GOOD_BODY +
                           "\n\nReviewed by:\tx\nSponsored by:\ty") == []


@pytest.mark.parametrize("subject,fragment", [
    ("iflib: optionally spread", "capital letter"),
    ("Optionally spread queue CPUs", "area: Summary"),
    ("iflib:Optionally spread", "area: Summary"),
    ("iflib: Spread.", "period"),
    ("iflib: " + "X" * 60, "characters, must be under 67"),
])
def test_bad_subjects(subject, fragment):
    probs = C.check_message(subject, GOOD_BODY)
    assert any(fragment in p for p in probs), probs


def test_sixty_seven_characters_is_too_long():
    # The subject the issue proposed for commit 3 is exactly 67 long.
    subj = "netinet: Learn SO_REUSEPORT_LB receive and worker CPUs at accept(2)"
    assert len(subj) == 67
    assert any("under 67" in p for p in C.check_message(subj, GOOD_BODY))


def test_subject_length_boundary():
    ok = "iflib: S" + "x" * (C.SUBJECT_MAX - 9)
    assert len(ok) == C.SUBJECT_MAX - 1
    assert C.check_message(ok, GOOD_BODY) == []
    assert C.check_message(ok + "x", GOOD_BODY) != []


@pytest.mark.parametrize("body,fragment", [
    ("", "body is empty"),
    ("Reviewed by:\tsomeone", "only trailers"),
    ("Reviewed by:\tsomeone\n\nWhy this is needed.", "not in the last"),
    ("Why.\n\nReviewed by:\tx\nand some prose", "mixes trailers"),
    ("x" * 80, "longer than 72"),
])
def test_bad_bodies(body, fragment):
    probs = C.check_message("iflib: Do it", body)
    assert any(fragment in p for p in probs), probs


def test_long_url_line_is_allowed():
    body = "See https://example.org/" + "a" * 80 + " for details."
    assert C.check_message("iflib: Do it", body) == []


def test_authors():
    a = P.parse_patch(NEW_FILE_PATCH)
    b = P.parse_patch(SECOND_PATCH.replace("A Person", "B Other"))
    assert C.check_authors([a, a]) == []
    assert "different authors" in C.check_authors([a, b])[0]
    assert C.check_authors([a], ("A Person", "a@example.org")) == []
    assert "not the configured identity" in \
        C.check_authors([a], ("Z", "z@z"))[0]


def test_base_roundtrip_and_errors():
    b = P.Base("ilnp/ilnp-freebsd14", "a" * 40, "1400507")
    assert P.parse_base(b.text()) == b
    with pytest.raises(P.SeriesError, match="no 'commit'"):
        P.parse_base("repository: x\n__FreeBSD_version: 1\n")
    with pytest.raises(P.SeriesError, match="not a full sha1"):
        P.parse_base("repository: x\ncommit: abc\n__FreeBSD_version: 1\n")
    for v in ("1", "150006", "15000680", "0150006", "1500068a", "", "１５００068"):
        with pytest.raises(P.SeriesError, match="is not a seven-digit __FreeBSD_version"):
            P.parse_base(f"repository: x\ncommit: {'a' * 40}\n__FreeBSD_version: {v}\n")


def test_touched_man_pages():
    text = NEW_FILE_PATCH.replace("sys/net/old.c", "share/man/man4/x.4")
    assert P.touched_man_pages([P.parse_patch(text)]) == \
        ["share/man/man4/x.4"]


def test_new_lint_messages_ignore_positions_and_count_duplicates():
    old = ["mandoc: /tmp/a.4:12:2: WARNING: missing -width in -tag list",
           "mandoc: /tmp/a.4:30:1: WARNING: new sentence, new line"]
    new = ["mandoc: share/man/man4/a.4:14:2: WARNING: missing -width in "
           "-tag list",
           "mandoc: share/man/man4/a.4:31:1: WARNING: new sentence, new line",
           "mandoc: share/man/man4/a.4:40:3: WARNING: new sentence, new line"]
    assert C.new_lint_messages(old, new) == [new[2]]
    assert C.new_lint_messages(new, old) == []
    assert C.new_lint_messages([], ["x.4:1:1: ERROR: y"]) == \
        ["x.4:1:1: ERROR: y"]


def test_split_paragraphs():
    assert C.split_paragraphs("a\nb\n\n\nc\n") == [["a", "b"], ["c"]]


# The CI consistency check, on the committed project.

def _series():
    return P.load_series(PROJECT / "patches")


def test_committed_series_matches_sys_and_tests_atf():
    assert P.check_consistency(_series(), PROJECT) == []


def test_committed_series_messages_and_base():
    ps = _series()
    assert len(ps) == 4
    for p in ps:
        assert C.check_message(p.subject, p.body) == [], p.name
    assert C.check_authors(ps) == []
    base = P.parse_base((PROJECT / "patches/BASE").read_text())
    assert base.repository == "kactertech/Irid"
    assert base.freebsd_version == "1500068"


def test_moved_freebsd_code_is_not_mirrored():
    # 0002 moves FreeBSD's lbgroup code into a file of its own: the series
    # adds it, the project does not keep it in sys/.
    added = P.series_added_files(_series())
    assert "sys/netinet/in_pcblb.c" in added
    assert P.project_path_for("sys/netinet/in_pcblb.c") is None
    assert not (PROJECT / "sys/netinet/in_pcblb.c").exists()
    assert P.project_path_for("sys/netinet/in_pcblb_deal.c") == \
        "sys/netinet/in_pcblb_deal.c"


def test_committed_series_check_without_tree():
    rep = C.check_series(PROJECT)
    assert rep.ok, rep.problems


def test_check_cli_rejects_a_src_that_is_no_tree(tmp_path):
    from click.testing import CliRunner
    from rxl.tree.cli import series
    r = CliRunner().invoke(series, ["check", "--src", str(tmp_path / "absent")])
    assert r.exit_code == 2 and "absent: no such directory" in r.output
    r = CliRunner().invoke(series, ["check", "--src", str(tmp_path)])
    assert r.exit_code == 2
    assert "not a FreeBSD source tree (no sys/ directory)" in r.output


def test_check_cli_json_reports_the_committed_series_clean():
    import json
    from click.testing import CliRunner
    from rxl.tree.cli import series
    r = CliRunner().invoke(series, ["check", "--json", "--no-author"])
    doc = json.loads(r.output)
    assert r.exit_code == 0 and doc["ok"] is True and doc["problems"] == []
    assert any(n.startswith("base kactertech/Irid 2ec8aa904381") for n in doc["notes"])


def test_check_cli_compares_the_author_only_when_asked(monkeypatch):
    from click.testing import CliRunner
    from rxl.tree.cli import series
    monkeypatch.setattr(S, "git_identity", lambda repo=None: ("Someone Else", "else@example.org"))
    r = CliRunner().invoke(series, ["check"])
    assert r.exit_code == 0, r.output
    assert "is not the configured identity" not in r.output
    r = CliRunner().invoke(series, ["check", "--author"])
    assert r.exit_code == 1
    assert r.output.count("is not the configured identity") == len(P.patch_files(PROJECT / "patches"))
    r = CliRunner().invoke(series, ["check", "--help"])
    assert "--author / --no-author" in r.output and "off by" in r.output


def _git_repo(path):
    import subprocess
    path.mkdir()
    git = ["git", "-C", str(path), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run(git + ["init", "-q", "-b", "main"], check=True)
    (path / "f").write_text("x\n")
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-qm", "x"], check=True)
    return git


def test_export_without_the_branch_names_it(tmp_path):
    import shutil
    from click.testing import CliRunner
    from rxl.tree.cli import series
    _git_repo(tmp_path / "src")
    patches = tmp_path / "patches"
    shutil.copytree(PROJECT / "patches", patches)
    before = {p.name: p.read_bytes() for p in patches.iterdir() if p.is_file()}
    r = CliRunner().invoke(series, ["export", "--src", str(tmp_path / "src"),
                                    "--patches", str(patches)])
    assert r.exit_code == 2
    assert r.output.strip() == (f"Error: Invalid value for '--branch': no branch rxl in "
                                f"{tmp_path / 'src'} (rxl series apply creates it)")
    assert {p.name: p.read_bytes() for p in patches.iterdir() if p.is_file()} == before


def test_export_without_the_base_commit_names_it(tmp_path):
    import shutil
    import subprocess
    git = _git_repo(tmp_path / "src")
    subprocess.run(git + ["branch", "rxl"], check=True)
    patches = tmp_path / "patches"
    patches.mkdir()
    shutil.copyfile(PROJECT / "patches/BASE", patches / "BASE")
    base = P.parse_base((patches / "BASE").read_text()).commit
    with pytest.raises(BadOption, match=f"does not have the base commit {base[:12]} ") as e:
        S.export_series(tmp_path / "src", patches)
    assert e.value.option == "--src"


def test_check_of_a_plain_tree_without_the_series_says_so(tmp_path):
    src = tmp_path / "src"
    (src / "sys").mkdir(parents=True)
    rep = C.check_series(PROJECT, src)
    bad = [p for p in rep.tree_problems if "does not carry the series" in p]
    assert len(bad) == 1 and "not a git work tree" in bad[0], rep.problems
    assert not any("No such file" in p or "not in the tree" in p for p in rep.problems)
    assert any("mandoc and checkstyle9.pl not run" in n for n in rep.notes)


# ------------------------------------------------------------------ export --author

FREEBSD_HEAD = ("/*-\n * SPDX-License-Identifier: BSD-3-Clause\n *\n"
                " * Copyright (c) 1982, 1986, 1991, 1993, 1995\n"
                " *\tThe Regents of the University of California.\n"
                " * Copyright (c) 2007-2009 Robert N. M. Watson\n */\n")
OURS_HEAD = ("/*-\n * SPDX-License-Identifier: BSD-2-Clause\n *\n"
             " * Copyright (c) 2026 The rxl project\n */\n")
SEED = ("Seed 682ffb42 maintainers", "maintainers@users.noreply.a-seed-682ffb42.example")


@pytest.fixture
def scratch(tmp_path):
    """(src, patches, run): a scratch git repo with a base and two commits on rxl
    by the project's identity (one moves FreeBSD code to a new file and adds a
    file of ours; the next changes both and adds a test), patches/ with its BASE;
    ``run(*args)`` runs git there."""
    import subprocess
    src = tmp_path / "src"
    src.mkdir()

    def run(*args, author=SEED):
        env = dict(os.environ, GIT_AUTHOR_NAME=author[0], GIT_AUTHOR_EMAIL=author[1],
                   GIT_COMMITTER_NAME="c", GIT_COMMITTER_EMAIL="c@c.example",
                   GIT_AUTHOR_DATE="1764630247 +0000", GIT_COMMITTER_DATE="1764630247 +0000")
        return subprocess.run(["git", "-C", str(src), *args], check=True, env=env,
                              capture_output=True, text=True).stdout

    def write(rel, text):
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)

    run("init", "-q", "-b", "main")
    write("sys/netinet/in_pcb.c", FREEBSD_HEAD + "int lb;\nint other;\n")
    run("add", ".")
    run("commit", "-qm", "base", author=("FreeBSD", "src@freebsd.example"))
    base = run("rev-parse", "HEAD").strip()
    run("checkout", "-q", "-b", "rxl")
    write("sys/netinet/in_pcb.c", FREEBSD_HEAD + "int other;\n")
    write("sys/netinet/in_pcblb.c", FREEBSD_HEAD + "int lb;\n")
    write("sys/net/spread.c", OURS_HEAD + "int spread;\n")
    run("add", ".")
    run("commit", "-qm", "inpcb: Move the lbgroup code\n\nWhy.")
    write("sys/netinet/in_pcblb.c", FREEBSD_HEAD + "int lb;\nint deal;\n")
    write("sys/net/spread.c", OURS_HEAD + "int spread;\nint more;\n")
    write("tests/sys/netinet/lb_test.c", OURS_HEAD + "int t;\n")
    run("add", ".")
    run("commit", "-qm", "inpcb: Deal\n\nWhy, again.")
    patches = tmp_path / "patches"
    patches.mkdir()
    (patches / "BASE").write_text(f"repository: x/y\ncommit: {base}\n"
                                  "__FreeBSD_version: 1500068\n")
    return src, patches, run


def _export(src, patches, *more):
    from click.testing import CliRunner
    from rxl.tree.cli import series
    return CliRunner().invoke(series, ["export", "--src", str(src), "--patches",
                                       str(patches), *more])


def test_export_author_sets_from_and_the_copyright_of_added_files_only(scratch, tmp_path):
    import subprocess
    src, patches, run = scratch
    tip, status = run("rev-parse", "rxl"), run("status", "--porcelain")
    r = _export(src, patches, "--author", "Ann Example <ann@example.org>")
    assert r.exit_code == 0, r.output
    assert "exported 2 patch(es)" in r.output and "by Ann Example <ann@example.org>" in r.output
    ps = P.load_series(patches)
    assert [(p.author_name, p.author_email) for p in ps] == [("Ann Example",
                                                             "ann@example.org")] * 2
    assert all(p.date == "Mon, 1 Dec 2025 23:04:07 +0000" for p in ps)  # dates kept
    added = P.series_added_files(ps)
    ann = OURS_HEAD.replace("The rxl project", "Ann Example <ann@example.org>")
    assert added["sys/net/spread.c"] == ann + "int spread;\nint more;\n"
    assert added["tests/sys/netinet/lb_test.c"] == ann + "int t;\n"
    # FreeBSD's lines: in the moved file and in the file the series changes
    assert added["sys/netinet/in_pcblb.c"] == FREEBSD_HEAD + "int lb;\nint deal;\n"
    text = "".join(p.read_text() for p in P.patch_files(patches))
    assert "The rxl project" not in text and "Robert N. M. Watson" in text
    # the branch and the tree are as they were
    assert run("rev-parse", "rxl") == tip and run("status", "--porcelain") == status
    assert "The rxl project" in (src / "sys/net/spread.c").read_text()
    # git am takes the patches on the base: same files, copyright lines aside
    run("checkout", "-q", "-b", "again", P.parse_base((patches / "BASE").read_text()).commit)
    run("am", "-q", *map(str, P.patch_files(patches)))
    diff = run("diff", "rxl", "again")
    assert [ln for ln in diff.splitlines() if ln[:1] in "+-" and ln[:3] not in ("+++", "---")] \
        == ["- * Copyright (c) 2026 The rxl project",
            "+ * Copyright (c) 2026 Ann Example <ann@example.org>"] * 2
    assert run("log", "-1", "--format=%an <%ae>", "again").strip() == \
        "Ann Example <ann@example.org>"
    # its index lines are the blobs': git apply --3way can use them
    subprocess.run(["git", "-C", str(src), "checkout", "-q", "main"], check=True)
    for f in P.patch_files(patches):
        for ln in f.read_text().splitlines():
            if ln.startswith("index ") and not ln.startswith("index 0000"):
                pre = ln.split()[1].split("..")[0]
                assert run("cat-file", "-t", pre).strip() == "blob"


def test_export_without_author_keeps_the_project_identity(scratch):
    src, patches, run = scratch
    r = _export(src, patches)
    assert r.exit_code == 0, r.output
    ps = P.load_series(patches)
    assert {(p.author_name, p.author_email) for p in ps} == {SEED}
    assert P.series_added_files(ps)["sys/net/spread.c"].startswith(OURS_HEAD)


@pytest.mark.parametrize("author", ["Ann Example", "ann@example.org", "<ann@example.org>",
                                    "Ann <ann@localhost>", "Ann Example <ann@example.org",
                                    "Ann\nExample <ann@example.org>", " Ann <a@example.org>",
                                    "Ann <a@example.org> extra", "1234 <a@example.org>", ""])
def test_export_refuses_a_malformed_author_in_one_line_and_writes_nothing(scratch, author):
    src, patches, run = scratch
    r = _export(src, patches, "--author", author)
    assert r.exit_code == 2, r.output
    err = [ln for ln in r.output.splitlines() if ln.startswith("Error:")]
    assert len(err) == 1 and "is not an author: give 'Name <local@domain.tld>'" in err[0]
    assert sorted(p.name for p in patches.iterdir()) == ["BASE"]


@pytest.mark.parametrize("make, why", [
    (("checkout", "-q", "--orphan", "other"), "is not built on the base commit"),
    (("checkout", "-q", "-b", "other", "main"), "has no commits over the base commit"),
])
def test_export_of_a_branch_not_built_on_base_refuses_and_keeps_the_patches(scratch, make, why):
    """An unrelated history (an orphan, another repository's branch) exported as
    base..branch would replace the series and remove its patches as stale: refused
    in one line, exit 2, every file of patches/ as it was."""
    src, patches, run = scratch
    assert _export(src, patches).exit_code == 0
    before = {p.name: p.read_bytes() for p in patches.iterdir()}
    assert len(before) == 3  # BASE and two patches
    run(*make)
    if make[2] == "--orphan":
        run("commit", "-q", "--allow-empty", "-m", "init")
    r = _export(src, patches, "--branch", "other")
    assert r.exit_code == 2, r.output
    (line,) = r.output.strip().splitlines()
    assert line.startswith("Error: Invalid value for '--branch': other ") and why in line
    assert {p.name: p.read_bytes() for p in patches.iterdir()} == before


def test_consistency_maps_the_authors_copyright_back_to_the_project(tmp_path):
    """A series exported with --author names its author where sys/ names the project."""
    ours = P.parse_patch(NEW_FILE_PATCH.replace(
        "+int x;\n+\n+int y;", "+ * Copyright (c) 2026 A Person <a@example.org>\n+\n+int y;"))
    ps = [ours]
    (tmp_path / "sys/net").mkdir(parents=True)
    (tmp_path / "sys/net/thing.c").write_text(" * Copyright (c) 2026 The rxl project\n\nint y;\n")
    assert P.check_consistency(ps, tmp_path) == []
    (tmp_path / "sys/net/thing.c").write_text(" * Copyright (c) 2026 B Other <b@example.org>\n"
                                              "\nint y;\n")
    assert P.check_consistency(ps, tmp_path) == [
        "sys/net/thing.c: differs from the content its patch adds (first difference at line 1)"]

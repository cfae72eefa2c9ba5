"""Issue 27's ninth pass (docs/results/newcomer.md, "Ninth pass"): the seven
faults of /work/coord/nc9.md, each refused at its root in one ``Error:`` line,
exit 2, with nothing made: a symlink loop or a dangling link as RXL_WORK, as
RXL_BUILD_DIR, as an output directory or file and as the targets file
(rxl.paths.broken_link, rxl.cli.options.link_reason), a message without its
subject, and counts of one ("1 members") and a range written "1...86400"."""

import errno
import os
from pathlib import Path

import pytest

from clierror import commands, error_line as _error, files, run as _run, work  # noqa: F401 (work: fixture)

DATA = Path(__file__).resolve().parents[2] / "data"
#: What an input that is a symlink loop is called (parse, inspect, kcount say it).
LOOP = f"a symlink loop, it cannot be resolved ({os.strerror(errno.ELOOP)})"


@pytest.fixture
def links(work):
    """``loop1 -> loop2 -> loop1`` and ``dangl -> gone/x`` (gone absent) in
    ``work``; a listing of ``work`` to compare with after a refusal."""
    os.symlink("loop2", work / "loop1")
    os.symlink("loop1", work / "loop2")
    os.symlink(work / "gone" / "x", work / "dangl")
    return work


def _dangling(work):
    return f"a symlink to {work / 'gone' / 'x'}, which does not exist (a dangling link)"


# ------------------------------------------ 1, 3: RXL_WORK a loop or a dangling link

@pytest.mark.parametrize("args", [["run", "--dry-run"], ["run", "--dry-run", "--json"],
                                  ["run", "--check-only"], ["run", "--check-only", "--json"],
                                  ["learn", "--dry-run"], ["targets"], ["targets", "--key"],
                                  ["guest", "up", "--dry-run"]], ids=" ".join)
@pytest.mark.parametrize("kind", ["loop", "dangling", "under-a-loop", "under-a-dangling"])
def test_a_work_root_that_cannot_be_resolved_is_refused(args, kind, links, monkeypatch):
    """1: run --dry-run (and --json) ended in "RuntimeError: Symlink loop"
    (ownguest.run_tree resolved the work root); 3: --check-only planned the
    clone into the loop, or under /nonexist through the dangling link, exit 0;
    targets listed the built-ins as if there were no targets file."""
    value, why = {"loop": (links / "loop1", LOOP),
                  "dangling": (links / "dangl", _dangling(links)),
                  "under-a-loop": (links / "loop1" / "w", f"{links / 'loop1'} is {LOOP}"),
                  "under-a-dangling": (links / "dangl" / "w",
                                       f"{links / 'dangl'} is {_dangling(links)}")}[kind]
    monkeypatch.setenv("RXL_WORK", str(value))
    before = files(links)
    assert _error(args) == f"Error: RXL_WORK {value}: {why}"
    assert files(links) == before and not (links / "gone").exists()


@pytest.mark.parametrize("path", [path for path, _ in commands()], ids=" ".join)
def test_every_command_refuses_a_work_root_that_is_a_loop(path, links, monkeypatch):
    """3: one check, every command, as RXL_WORK a file is refused."""
    monkeypatch.setenv("RXL_WORK", str(links / "loop1"))
    assert _error(path) == f"Error: RXL_WORK {links / 'loop1'}: {LOOP}"


def test_a_work_root_that_is_a_link_to_a_directory_still_works(work, monkeypatch):
    (work / "real").mkdir()
    os.symlink(work / "real", work / "good")
    monkeypatch.setenv("RXL_WORK", str(work / "good" / "w"))
    r = _run(["targets"])
    assert r.exit_code == 0 and r.stderr == "", r.output
    assert "own QEMU guest" in r.stdout
    r = _run(["run", "--check-only"])
    assert r.exit_code == 0 and f"into {work / 'good' / 'w'}" in r.stdout, r.output


@pytest.mark.parametrize("kind", ["loop", "dangling"])
def test_a_build_dir_that_cannot_be_resolved_is_refused_as_rxl_work_is(kind, links,
                                                                       monkeypatch):
    value, why = ((links / "loop1", LOOP) if kind == "loop" else
                  (links / "dangl", _dangling(links)))
    monkeypatch.setenv("RXL_BUILD_DIR", str(value))
    assert _error(["deal", "--topology", "2x4x2", "--members", "2"]) == \
        f"Error: RXL_BUILD_DIR {value}: {why}"
    assert not (links / "gone").exists()


# ---------------------------------------- 2, 4: an output directory or file that is one

def test_learn_log_out_a_loop_is_refused_not_a_traceback(links):
    """2: ``FileExistsError: [Errno 17] File exists`` (Path(out).mkdir)."""
    line = _error(["learn", "--log", DATA / "learn" / "synthetic-patched.log",
                   "--out", links / "loop1"])
    assert line == f"Error: Invalid value for '--out': {links / 'loop1'}: {LOOP}"


@pytest.mark.parametrize("args", [["run", "--check-only"], ["run", "--dry-run"],
                                  ["learn", "--dry-run"]], ids=" ".join)
@pytest.mark.parametrize("option", ["--out", "--objdir", "--guest-dir"])
@pytest.mark.parametrize("kind", ["loop", "dangling", "under-a-loop"])
def test_an_output_directory_that_cannot_be_resolved_is_refused(args, option, kind,
                                                                links):
    """4: run --check-only/--dry-run and learn took them (exit 0, "options
    checked: nothing run"); the one check_out_dir refuses them."""
    value, why = {"loop": (links / "loop1", LOOP),
                  "dangling": (links / "dangl", _dangling(links)),
                  "under-a-loop": (links / "loop1" / "o",
                                   f"{links / 'loop1'} is {LOOP}")}[kind]
    before = files(links)
    assert _error(args + [option, value]) == \
        f"Error: Invalid value for '{option}': {value}: {why}"
    assert files(links) == before and not (links / "gone").exists()


@pytest.mark.parametrize("args", [
    ["kcount", "table", "--trace", "accept-off", "pristine", "T"],
    ["kcount", "record", "--kernel", "/bin/sh", "--dry-run"],
], ids=lambda a: " ".join(a[:2]))
@pytest.mark.parametrize("under", [False, True])
def test_an_output_file_that_is_a_loop_is_refused_not_a_traceback(args, under, links):
    """Found beside 4: kcount's --out resolved (Path.resolve: RuntimeError)."""
    (links / "t.json").write_text("{}")
    out = links / "loop1" / "x.json" if under else links / "loop1"
    why = f"{links / 'loop1'} is {LOOP}" if under else LOOP
    args = [str(links / "t.json") if a == "T" else a for a in args]
    assert _error(args + ["--out", out]) == f"Error: Invalid value for '--out': {out}: {why}"


def test_bench_raw_dir_a_loop_is_refused(links, work):
    assert _error(["bench", "accept", "--dry-run", "--setup", "noflag", "--build-dir",
                   work / "b", "--raw-dir", links / "loop1"]) == \
        f"Error: --raw-dir {links / 'loop1'}: {LOOP}"


def test_a_lock_file_that_is_a_loop_is_refused(links, work):
    (work / "src" / "tools" / "build").mkdir(parents=True)
    (work / "src" / "tools" / "build" / "make.py").write_text("")
    line = _error(["build", "--src", work / "src", "--objdir", work / "o", "--lock",
                   links / "loop1", "--dry-run"])
    assert line == f"Error: Invalid value for '--lock': {links / 'loop1'}: {LOOP}"


def test_bench_plot_a_loop_is_refused_not_resolved(links, monkeypatch):
    """check_plot_target resolved --plot (RuntimeError at a loop) once
    matplotlib was there; it is the one check of an output file now."""
    import importlib.util

    from rxl.bench import accept_output
    from rxl.errors import BadOption
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object())
    with pytest.raises(BadOption) as exc:
        accept_output.check_plot_target(links / "loop1" / "s.png")
    assert exc.value.option == "--plot"
    assert exc.value.message == f"{links / 'loop1' / 's.png'}: {links / 'loop1'} is {LOOP}"


# ------------------------------------------------- 5: the targets file a loop

def test_targets_file_a_loop_is_called_one(links):
    """5: "loop1: no such file"; parse, inspect and kcount call it a loop."""
    y = links / "loop1"
    assert _error(["targets", "--targets", y], quiet_stdout=False) == \
        f"Error: {y}: 1 mistake (listed above)"
    r = _run(["targets", "--targets", y])
    assert r.stdout.splitlines()[0] == f"{y}: {LOOP}"


def test_the_default_targets_file_a_loop_is_not_taken_as_missing(links, work):
    (work / "w").mkdir()
    os.symlink(links / "loop1", work / "w" / "targets.yaml")
    y = work / "w" / "targets.yaml"
    assert _error(["targets"], quiet_stdout=False) == f"Error: {y}: 1 mistake (listed above)"
    assert _run(["targets"]).stdout.splitlines()[0] == f"{y}: {LOOP}"


def test_targets_file_missing_is_still_no_such_file_a_dangling_link_one(links):
    """A dangling link is said to be one (issue 27, test_input_links)."""
    for y, why in ((links / "absent.yaml", "no such file"), (links / "dangl", _dangling(links))):
        assert _run(["targets", "--targets", y]).stdout.splitlines()[0] == f"{y}: {why}"


# ------------------------------------------------- 6: a message with its subject

@pytest.mark.parametrize("args,option,setup", [
    (["--topology", "2x4x2"], "--topology", "ebpf-deal"),
    (["--numa-map", "0:0"], "--numa-map", "ebpf-numa-rr"),
])
def test_bench_option_without_its_setup_names_itself(args, option, setup, work):
    """6: "Invalid value for '--topology': is read only by ...": as the
    neighbours (--lag-ms, --deal-counts) read."""
    assert _error(["bench", "accept", "--dry-run", "--build-dir", work / "b",
                   "--setup", "noflag"] + args) == (
        f"Error: Invalid value for '{option}': {option} is read only by --setup {setup}")


# -------------------------------------------------- 7: counts of one, ranges

def test_counted_says_one_in_the_singular():
    from rxl.errors import counted
    assert [counted(n, "member") for n in (0, 1, 2)] == ["0 members", "1 member",
                                                         "2 members"]
    assert counted(1, "member line") == "1 member line"


def test_deal_of_one_member_says_member():
    r = _run(["deal", "--topology", "2x4x2", "--members", "1"])
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines()[0] == "topology 2x4x2: 1 member, T = 16 x 1 = 16 slots"


def test_deal_topology_dump_listing_one_cpu_says_cpu(work):
    """A dump whose <cpu count="2"> lists one: "lists 1 CPUs"."""
    f = work / "t.xml"
    f.write_text('<groups><group level="1" cache-level="0"><cpu count="2">0</cpu>'
                 '</group></groups>\n')
    line = _error(["deal", "--topology", f, "--members", "1"])
    assert line.endswith('<cpu count="2"> lists 1 CPU'), line


def test_inspect_of_one_junk_line_says_line(work):
    f = work / "huge"
    f.write_text("junk\n")
    assert _error(["inspect", f]) == ("Error: no line of a groups view "
                                      "(net.inet.tcp.reuseport_lb.groups) among 1 line")


GROUP = """\
group port 8080 af inet members {n} gen 5 map {slots} dirty 0 rebuilds 1 allocfail 0
learn window_ms 10000 age_ms 4210 rolls 1
member 0 tag 0 learned slots 16
cpu 0 offset 0 slots 16
"""


def test_inspect_group_of_two_with_one_member_line(work):
    f = work / "v"
    f.write_text(GROUP.format(n=2, slots=32))
    assert _error(["inspect", f]).endswith(
        "group port 8080 af inet (line 1): 2 members announced, 1 member line")


def test_inspect_table_of_one_member_one_rebuild_one_roll(work):
    f = work / "v"
    f.write_text(GROUP.format(n=1, slots=16))
    r = _run(["inspect", f])
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines()[0] == ("port 8080 (inet): 1 member, map 16, 1 rebuild, "
                                        "0 without memory, window 10000 ms, 1 roll")


def test_inspect_map_of_one_slot_for_one_member(work):
    f = work / "v"
    f.write_text(GROUP.format(n=1, slots=1).replace("slots 16", "slots 1"))
    assert _error(["inspect", f]).endswith(
        "a map of 1 slot for 1 member (a map has 16 a member)")


def test_case_timeout_range_is_written_as_every_other(work):
    assert _error(["run", "--check-only", "--case-timeout", "0"]) == (
        "Error: Invalid value for '--case-timeout': 0: must be 1..86400 (seconds per case)")


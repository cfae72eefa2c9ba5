"""Small or endless input ends fast: a YAML alias bomb in a targets file is
refused before it expands (no aliases; description is text); the YAML parser
is libyaml's where PyYAML has it; /dev/zero and the like end every reader."""

import time

import pytest
import yaml
from click.testing import CliRunner

from rxl.cli.main import main
from rxl.guest import targets as T

BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
    f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
    f"*{chr(97 + i)}]\n" for i in range(8))


def _timed(args, limit=5.0, **kw):
    t0 = time.process_time()        # CPU time: a loaded host must not fail it
    r = CliRunner().invoke(main, [str(a) for a in args], **kw)
    took = time.process_time() - t0
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert took < limit, took
    return r


def test_an_alias_bomb_in_description_is_refused_at_once(tmp_path, monkeypatch):
    monkeypatch.setenv("RXL_WORK", str(tmp_path / "w"))
    p = tmp_path / "t.yaml"
    body = "".join("    " + ln + "\n" for ln in BOMB.splitlines())
    p.write_text("targets:\n  box:\n    kind: box\n    host: h\n    description:\n"
                 + "".join("      " + ln + "\n" for ln in BOMB.splitlines()))
    assert len(p.read_bytes()) < 1200 and body
    r = _timed(["targets", "--targets", p])
    assert r.exit_code == 2 and "alias" in r.stdout
    r = _timed(["run", "--target", "box", "--targets", p, "--check-only"])
    assert r.exit_code == 2 and "alias" in r.stderr


def test_an_ordinary_alias_is_refused_too(tmp_path):
    p = tmp_path / "t.yaml"
    p.write_text("shapes:\n  s: &s {sockets: 2}\n  t: *s\n")
    with pytest.raises(T.TargetsError, match=r"line 2: an anchor \(&s\)") as ei:
        T.load(str(p))
    assert [e.partition("t.yaml: ")[2][:26] for e in ei.value.errors] == [
        "line 2: an anchor (&s): a ", "line 3: an alias (*s): a t"]


def test_an_anchor_without_an_alias_is_refused(tmp_path):
    """The message said a targets file takes no anchors, but an anchor with
    no alias passed."""
    p = tmp_path / "t.yaml"
    p.write_text("targets: {b: {kind: box, host: h.example.org}, "
                 "c: &x {kind: box, host: h2.example.org}}\n")
    with pytest.raises(T.TargetsError, match=r"line 1: an anchor \(&x\): a targets file "
                                              "takes no anchors or aliases"):
        T.load(str(p))


@pytest.mark.parametrize("desc", ["[a, b]", "{x: 1}", "5", "x" * 600])
def test_a_description_is_text(desc, tmp_path):
    p = tmp_path / "t.yaml"
    p.write_text(f"targets:\n  box: {{kind: box, host: h, description: {desc}}}\n")
    with pytest.raises(T.TargetsError, match="targets.box.description"):
        T.load(str(p))
    p.write_text("targets:\n  box: {kind: box, host: h, description: the rack one}\n")
    assert T.load(str(p)).get("box").description == "the rack one"


def test_the_yaml_loader_is_libyamls_where_present():
    if yaml.__with_libyaml__:
        assert T.BASE_LOADER is yaml.CSafeLoader
    assert issubclass(T.BASE_LOADER, (yaml.SafeLoader, getattr(yaml, "CSafeLoader", ())))


@pytest.mark.parametrize("args", [
    ["inspect", "/dev/zero"], ["parse", "/dev/zero"], ["kcount", "analyze", "/dev/zero"],
    ["kcount", "table", "--trace", "accept-off", "pristine", "/dev/zero"],
    ["learn", "--log", "/dev/zero"], ["targets", "--targets", "/dev/zero"],
    ["deal", "--topology", "/dev/zero", "--members", "0"],
])
def test_an_endless_input_ends(args, tmp_path, monkeypatch):
    monkeypatch.setenv("RXL_WORK", str(tmp_path / "w"))
    r = _timed(args)
    assert r.exit_code == 2 and r.stderr.startswith("Error: "), r.output


def test_a_targets_fifo_is_read(tmp_path):
    import os
    import threading
    rfd, wfd = os.pipe()  # what <(...) hands over: /dev/fd/N, an anonymous pipe

    def writer():
        with os.fdopen(wfd, "w") as f:
            f.write("targets:\n  b: {kind: box, host: h}\n")

    threading.Thread(target=writer, daemon=True).start()
    try:
        assert T.load(f"/dev/fd/{rfd}").get("b").host == "h"
    finally:
        os.close(rfd)


def test_bench_accept_repetitions_are_capped_and_a_dry_run_ends(tmp_path):
    """--repetitions 100000 printed 700,000 argv lines in a dry run (over 10 s):
    out of range is one error naming the option; the cap itself ends fast."""
    r = _timed(["bench", "accept", "--dry-run", "--build-dir", tmp_path,
                "--repetitions", "100000"])
    assert r.exit_code == 2
    assert r.output.strip().splitlines() == [
        "Error: Invalid value for '--repetitions': must be 1..1000, got 100000"]
    r = _timed(["bench", "accept", "--dry-run", "--build-dir", tmp_path,
                "--repetitions", "1000"], limit=10.0)
    assert r.exit_code == 0, r.output

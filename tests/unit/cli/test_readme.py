"""The README says what happens: its --json list is the commands that take
--json, its eBPF call returns what it says, its targets.yaml example works
as written, and make run installs what a named target's run needs."""

import json
import re
from pathlib import Path

import click
from click.testing import CliRunner

from rxl.cli.main import main

ROOT = Path(__file__).resolve().parents[3]
README = (ROOT / "README.md").read_text()


def _commands(group=main, path=()):
    for name, cmd in sorted(group.commands.items()):
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, path + (name,))
        else:
            yield " ".join(path + (name,)), cmd


def test_the_json_list_is_every_command_that_takes_json():
    m = re.search(r"`deal`,\s+`spread`.*?take `--json`", README, re.S)
    assert m, "the --json sentence"
    listed = set(re.findall(r"`([a-z ]+)`", " ".join(m.group(0).split())))
    takes = {name for name, cmd in _commands()
             if any("--json" in p.opts for p in cmd.params)}
    assert listed - {"--json"} == takes


def test_the_ebpf_call_returns_lines_and_a_deal():
    from rxl.bench import ebpf
    from rxl.decide import model, topology
    lines, deal = ebpf.deal_lines(topology.load("2x4x2"), [0, 1, 2, 9])
    assert lines[:2] == ["cpuent 0 16", "cpuent 1 1048592"]
    assert "`['cpuent 0 16', 'cpuent 1 1048592']`" in README
    assert isinstance(deal, model.Deal)
    assert all(re.fullmatch(r"(cpuent \d+ \d+|slots \d+ \d+)", ln) for ln in lines)


def test_the_targets_example_works_as_written(tmp_path, monkeypatch):
    monkeypatch.setenv("RXL_WORK", str(tmp_path / "work"))
    block = re.search(r"```yaml\n(shapes:.*?)```", README, re.S).group(1)
    f = tmp_path / "targets.yaml"
    f.write_text(block)
    r = CliRunner().invoke(main, ["targets", "--targets", str(f)])
    assert r.exit_code == 0, r.output
    for name in ("big", "vm", "box"):
        assert re.search(rf"^{name}\s", r.stdout, re.M), r.stdout
    for name in ("vm", "box"):
        r = CliRunner().invoke(main, ["run", "--target", name, "--targets", str(f),
                                      "--check-only", "--json"])
        assert r.exit_code == 0, r.output
        assert json.loads(r.stdout)["doctor"] == "ssh"


def test_make_run_installs_what_the_checked_run_needs():
    # the recipe (both branches: RUN_ARGS with --check-only/--dry-run runs that alone)
    recipe = re.search(r"^run: setup\n(.*?)^endif$", (ROOT / "Makefile").read_text(),
                       re.M | re.S)
    body = recipe.group(1)
    assert "--check-only --json" in body and '["doctor"]' in body
    assert "findstring ssh://" not in body

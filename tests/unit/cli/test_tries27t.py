"""Issue 27's fourteenth pass (docs/results/newcomer.md, "Fourteenth pass"),
fault 9: the targets file's checker stopped at a shape's first bad field (a
bad field hid the rules between fields, one broken rule the next), and
``rxl targets`` never looked at a key file once another target had a mistake.
Every mistake of every shape and target is one line now, and ``rxl targets``
lists them all on stdout before its one ``Error:`` line (exit 2)."""

import pytest

from clierror import error_line as _error, files, run as _run, work  # noqa: F401 (fixture)
from rxl.guest import targets as T


def _mistakes(y, body):
    """``rxl targets --targets y`` (y holding ``body``): its listed mistakes,
    each without the file's name, after asserting the surface around them."""
    y.write_text(body)
    r = _run(["targets", "--targets", y])
    assert r.exit_code == 2, r.output
    lines = r.stdout.splitlines()
    assert all(ln.startswith(f"{y}: ") for ln in lines), lines
    n = len(lines)
    assert r.stderr == f"Error: {y}: {n} mistake{'s' * (n > 1)} (listed above)\n"
    return [ln[len(str(y)) + 2:] for ln in lines]


def test_two_bad_rules_of_one_target_are_two_lines(work):
    """``sockets: 3`` over two NUMA nodes and 100 MiB: both said, not the first."""
    got = _mistakes(work / "t.yaml", "targets:\n"
                    "  big: {kind: qemu, sockets: 3, numa_nodes: 2, memory_mib: 100}\n")
    assert got == [
        "targets.big.numa_nodes: 2 does not divide sockets=3 (each NUMA node holds whole "
        "sockets)",
        "targets.big.memory_mib: 100 must be >= 128 per NUMA node and split evenly over 2"]


def test_a_bad_field_hides_no_rule_of_the_good_ones(work):
    """A bad nic: stopped every rule between fields (the memory below, and the
    vCPU count); a bad field only drops the rules that read it."""
    got = _mistakes(work / "t.yaml", "shapes:\n"
                    "  s: {sockets: 200, cores: 2, nic: rtl8139, memory_mib: 100,"
                    " nic_domain: -1}\n")
    assert got == [
        "shapes.s.nic: 'rtl8139' is not one of e1000e, e1000, igb",
        "shapes.s.nic_domain: must be a NUMA node (an integer >= 0) or null (no _PXM), "
        "got -1 (YAML reads a number)",
        "shapes.s: 1600 vCPUs (sockets x dies x cores x threads); QEMU's q35 machine "
        "takes at most 288",
        "shapes.s.memory_mib: 100 must be >= 128 per NUMA node and split evenly over 2"]


def test_a_directory_key_is_listed_beside_another_targets_mistake(work):
    """The key of ``a`` (a directory) was checked only once the whole file was
    good: another target's bad port dropped it."""
    (work / "kd").mkdir()
    got = _mistakes(work / "t.yaml", "targets:\n"
                    f"  a: {{kind: box, host: h, key: {work / 'kd'}}}\n"
                    "  b: {kind: box, host: h, port: 0}\n")
    assert got == [f"targets.a.key: {work / 'kd'}: is a directory, not a private key file",
                   "targets.b.port: must be an integer in 1..65535, got 0 (YAML reads a "
                   "number)"]


def test_a_targets_own_key_is_listed_beside_its_other_mistakes(work):
    (work / "kd").mkdir()
    got = _mistakes(work / "t.yaml", "targets:\n"
                    f"  a: {{kind: box, host: h, port: 0, key: {work / 'kd'}}}\n")
    assert got == ["targets.a.port: must be an integer in 1..65535, got 0 (YAML reads a "
                   "number)",
                   f"targets.a.key: {work / 'kd'}: is a directory, not a private key file"]


def test_a_missing_key_is_still_no_mistake_of_the_listing(work):
    """A key that is not there yet is needed when its target is used (README):
    the listing says so, beside other targets, and no mistake is counted."""
    y = work / "t.yaml"
    y.write_text(f"targets:\n  a: {{kind: box, host: h, key: {work / 'nokey'}}}\n")
    r = _run(["targets", "--targets", y])
    assert r.exit_code == 0, r.output
    assert f"a                box: ssh://root@h:22 key {work / 'nokey'} (no such file yet: " \
        "needed when it is used)" in r.stdout.splitlines()


def test_a_bad_kind_hides_none_of_the_fields(work):
    """A kind that is no kind stopped the target's check: its port, its host
    and its shape fields are each checked as the kinds that take them."""
    got = _mistakes(work / "t.yaml", "targets:\n"
                    "  a: {kind: vmware, host: 'b h', port: 0, cores: 0}\n")
    assert [g.split(":")[0] for g in got] == ["targets.a.kind", "targets.a.cores",
                                              "targets.a.host", "targets.a.port"], got


def test_a_shape_given_twice_still_checks_its_fields(work):
    got = _mistakes(work / "t.yaml", "targets:\n"
                    "  c: {kind: qemu, shape: nosuch, cores: 0}\n")
    assert got == ["targets.c: give shape: or the shape fields (cores), not both",
                   "targets.c.cores: must be an integer >= 1, got 0 (YAML reads a number)",
                   "targets.c.shape: 'nosuch' is not a shape of this file (known: none)"]


def test_a_shape_that_is_a_list_is_one_mistake_not_a_traceback(work):
    """``shape: [x]`` was a TypeError traceback (an unhashable name)."""
    got = _mistakes(work / "t.yaml", "targets:\n  b: {kind: qemu, shape: [x]}\n")
    assert got == ["targets.b.shape: ['x'] is not a shape of this file (known: none)"]


@pytest.mark.parametrize("args", [["--check-only"], ["--dry-run"]], ids=" ".join)
def test_run_names_the_used_targets_key_and_counts_the_rest(work, args):
    """``rxl run --target a``: the file's first mistake, here a's directory key,
    and how many more there are; nothing made."""
    (work / "kd").mkdir()
    y = work / "t.yaml"
    y.write_text("targets:\n"
                 f"  a: {{kind: box, host: h, key: {work / 'kd'}}}\n"
                 "  b: {kind: box, host: h, port: 0}\n"
                 "  c: {kind: box, host: h, key: /no/such/key}\n")
    before = files(work)
    line = _error(["run", *args, "--targets", y, "--target", "a"])
    assert line == f"Error: {y}: targets.a.key: {work / 'kd'}: is a directory, not a private " \
        f"key file (and 1 more mistake: rxl targets --targets {y} lists them)"
    assert files(work) == before


def test_load_checks_only_the_used_targets_key():
    """``use``: that target's key, missing too; another target's missing key
    is no mistake of a run that does not use it."""
    doc = {"targets": {"a": {"kind": "box", "host": "h", "key": "/no/such/a"},
                       "b": {"kind": "box", "host": "h"}}}
    assert T.parse(doc, "f").targets["b"].host == "h"
    assert T.parse(doc, "f", keys=True).targets["a"].key == "/no/such/a"
    assert T.parse(doc, "f", use="b").targets["b"].host == "h"
    with pytest.raises(T.TargetsError) as ei:
        T.parse(doc, "f", use="a")
    assert ei.value.errors == ["f: targets.a.key: /no/such/a: no such key file"]

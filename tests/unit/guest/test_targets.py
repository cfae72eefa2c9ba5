"""rxl.guest.targets: the YAML file of targets and guest shapes."""

import textwrap

import pytest

from rxl.guest import targets as T

GOOD = textwrap.dedent("""\
    shapes:
      big:
        sockets: 4
        dies: 2
        cores: 2
        threads: 1
        numa_nodes: 2
        memory_mib: 2048
        nic: igb
    targets:
      guest:
        kind: qemu
        shape: big
      small:
        kind: qemu
        sockets: 1
        numa_nodes: 0
      vm:
        kind: bhyve
        host: 192.0.2.10
        port: 2200
        user: admin
      box:
        kind: box
        host: box.example.org
    """)


def write(tmp_path, text):
    p = tmp_path / "targets.yaml"
    p.write_text(textwrap.dedent(text))
    return str(p)


def test_good_file(tmp_path):
    ts = T.load(write(tmp_path, GOOD))
    g = ts.get("guest")
    assert g.kind == "qemu" and g.shape == T.Shape(4, 2, 2, 1, 2, 2048, "igb")
    assert g.shape.vcpus == 16
    # inline fields over the default shape; no NUMA nodes: no _PXM bridge either
    assert ts.get("small").shape == T.Shape(sockets=1, numa_nodes=0, nic_domain=None)
    vm = ts.get("vm").ssh_target()
    assert (vm.host, vm.port, vm.user, vm.name) == ("192.0.2.10", 2200, "admin", "vm")
    assert ts.get("box").port == 22 and ts.get("box").user == "root"
    with pytest.raises(ValueError, match="no fixed address"):
        g.ssh_target()


def test_unknown_name_lists_known(tmp_path):
    with pytest.raises(KeyError, match="known: box, guest, guest-2l3, guest-2s, guest-e1000e, guest-nopxm, small, vm"):
        T.load(write(tmp_path, GOOD)).get("nope")


def test_every_mistake_one_line(tmp_path):
    path = write(tmp_path, """\
        shapes:
          s1: {sockets: 3, numa_nodes: 2}
          s2: {cores: 0, nic: rtl8139, colour: red}
        targets:
          a: {kind: vmware}
          b: {kind: box}
          c: {kind: box, host: h, port: 70000}
          d: {kind: bhyve, host: h, sockets: 2}
          e: {kind: qemu, shape: nosuch}
          f: {kind: qemu, host: h}
          g: {kind: box, host: h, key: /no/such/key}
          h: {kind: qemu, shape: s1, cores: 4}
          i: {kind: box, host: h, user: "a@b"}
          j: {kind: qemu, memory_mib: 100}
        """)
    with pytest.raises(T.TargetsError) as ei:
        T.load(path)
    errs = ei.value.errors
    expect = [
        "shapes.s1.numa_nodes: 2 does not divide sockets=3",
        "shapes.s2: unknown field 'colour'",
        "shapes.s2.cores: must be an integer >= 1, got 0",
        "shapes.s2.nic: 'rtl8139' is not one of",
        "targets.a.kind: 'vmware' is not one of qemu, bhyve, box",
        "targets.b.host: required for kind box",
        "targets.c.port: must be an integer in 1..65535, got 70000",
        "targets.d.sockets: only the own guest (kind qemu) has a shape",
        "targets.e.shape: 'nosuch' is not a shape of this file (known: s1, s2)",
        "targets.f.host: not for kind qemu",
        "targets.h: give shape: or the shape fields (cores), not both",
        "targets.i.user: a@b: not a login name",
        "targets.j.memory_mib: 100 must be >= 128 per NUMA node",
    ]
    assert len(errs) == len(expect), errs
    for want in expect:
        assert sum(want in e for e in errs) == 1, (want, errs)
    assert all("\n" not in e and e.startswith(path + ": ") for e in errs)
    # str() is one line: the first mistake and how many more 
    assert str(ei.value) == f"{errs[0]} (and {len(errs) - 1} more mistakes: rxl targets " \
        f"--targets {path} lists them)"


def test_several_mistakes_of_one_target_are_each_a_line(tmp_path):
    path = write(tmp_path, """\
        targets:
          a: {kind: box, host: "bad host", port: 99999, user: "r oot"}
          b: {kind: box, host: h, port: 0, user: "r oot", key: ""}
          "-x": {kind: box, host: h, description: "a\\tb", port: 70000}
        """)
    with pytest.raises(T.TargetsError) as ei:
        T.load(path)
    fields = [e[len(path) + 2:].split(":")[0] for e in ei.value.errors]
    assert fields == ["targets.a.host", "targets.a.port", "targets.a.user",
                      "targets.b.port", "targets.b.user", "targets.b.key",
                      "targets", "targets.-x.description", "targets.-x.port"], ei.value.errors


def test_a_key_is_checked_when_its_target_is_used(tmp_path):
    """A missing key file fails only the target that names it ."""
    ts = T.load(write(tmp_path, """\
        targets:
          g: {kind: box, host: h, key: /no/such/key}
          ok: {kind: box, host: h2}
        """))
    assert ts.get("ok").host == "h2"
    with pytest.raises(T.TargetsError, match=r"targets.g.key: /no/such/key: no such key file$"):
        ts.get("g")


def test_a_name_given_twice_is_a_mistake(tmp_path):
    """PyYAML keeps the last of two equal keys; the file says which lines."""
    path = write(tmp_path, """\
        targets:
          a: {kind: box, host: h}
          a: {kind: box, host: h2}
          b: {kind: box, host: h, host: h3}
        """)
    with pytest.raises(T.TargetsError) as ei:
        T.load(path)
    assert ei.value.errors == [
        f"{path}: line 3: 'a' given again (first on line 2); only one may be there",
        f"{path}: line 4: 'host' given again (first on line 4); only one may be there"]


def test_top_level_mistakes_name_the_file_once(tmp_path):
    path = write(tmp_path, "extra: 1\ntargets: 5\n")
    with pytest.raises(T.TargetsError) as ei:
        T.load(path)
    assert ei.value.errors == [
        f"{path}: unknown field 'extra' (one of shapes, targets)",
        f"{path}: targets: must be a mapping of name -> target"]


def test_a_shape_over_qemus_vcpu_limit(tmp_path):
    with pytest.raises(T.TargetsError, match=r"g: 720000 vCPUs .* at most 288$"):
        T.load(write(tmp_path, "targets:\n  g: {kind: qemu, sockets: 300, dies: 1, "
                               "cores: 300, threads: 8}\n"))
    assert T.load(write(tmp_path, "targets:\n  g: {kind: qemu, sockets: 2, dies: 1, "
                                  "cores: 72, threads: 2}\n")).get("g").shape.vcpus == 288


def test_a_name_that_looks_like_an_address_points_at_ssh_urls(tmp_path):
    for spec in ("root@host", "http://root@host"):
        with pytest.raises(ValueError, match="an SSH target is ssh://user@host"):
            T.resolve(spec, str(write(tmp_path, "targets: {}\n")))
    missing = tmp_path / "none.yaml"
    with pytest.raises(KeyError, match="no such file: only the built-in targets"):
        T.Targets(path=str(missing)).get("x")


def test_bool_is_not_an_int(tmp_path):
    with pytest.raises(T.TargetsError, match=r"sockets: must be an integer >= 1, got true \(YAML reads a boolean\)"):
        T.load(write(tmp_path, "targets:\n  g: {kind: qemu, sockets: true}\n"))


def test_bad_yaml_names_line(tmp_path):
    with pytest.raises(T.TargetsError, match=r"line 2: not valid YAML"):
        T.load(write(tmp_path, "targets:\n  a: b: c\n"))


def test_top_level_must_be_mapping(tmp_path):
    with pytest.raises(T.TargetsError, match="must be a mapping"):
        T.load(write(tmp_path, "- a\n- b\n"))


def test_missing_files(tmp_path, monkeypatch):
    monkeypatch.setenv("RXL_WORK", str(tmp_path))
    # No default file: only the built-in QEMU guests.
    ts = T.load()
    assert set(ts.targets) == {"guest", "guest-nopxm", "guest-e1000e", "guest-2s",
                               "guest-2l3"}
    assert ts.get("guest").shape == T.Shape() == T.Shape(2, 2, 4, 2, 2, 2048, "igb", 0)
    assert ts.get("guest-nopxm").shape == T.Shape(nic_domain=None)
    # QEMU 7.2's fallback: e1000e, two L3 per socket, no _PXM
    assert ts.get("guest-e1000e").shape == ts.get("guest-2l3").shape == T.Shape(
        2, 2, 2, 2, 2, 1024, "e1000e", None)
    assert ts.get("guest-2s").shape == T.Shape(2, 1, 2, 2, 2, 1024, "e1000e", None)
    with pytest.raises(T.TargetsError, match="no such file"):
        T.load(str(tmp_path / "given.yaml"))


def test_relative_key_is_next_to_the_file(tmp_path):
    from rxl.guest.sshkeys import generate_ed25519
    generate_ed25519(tmp_path / "k")
    ts = T.load(write(tmp_path, "targets:\n  b: {kind: box, host: h, key: k}\n"))
    assert ts.get("b").key == str(tmp_path / "k")


def test_resolve_url_and_name(tmp_path):
    t = T.resolve("ssh://me@127.0.0.1:2222")
    assert (t.kind, t.host, t.port, t.user) == ("box", "127.0.0.1", 2222, "me")
    assert T.resolve("vm", write(tmp_path, GOOD)).kind == "bhyve"
    from rxl.guest.ssh import TargetError
    with pytest.raises(TargetError, match="port 0"):
        T.resolve("ssh://h:0")


def test_rxl_targets_lists_and_reports_every_mistake(tmp_path):
    from click.testing import CliRunner

    from rxl.cli.main import main
    good = write(tmp_path, GOOD)
    r = CliRunner().invoke(main, ["targets", "--targets", good])
    assert r.exit_code == 0
    assert "vm               bhyve: ssh://admin@192.0.2.10:2200" in r.output
    assert "guest            own QEMU guest: 4 sockets x 2 dies" in r.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("targets:\n  a: {kind: box}\n  b: {kind: box, host: h, port: 0}\n")
    r = CliRunner().invoke(main, ["targets", "--targets", str(bad)])
    assert r.exit_code == 2
    assert len([ln for ln in r.stdout.splitlines() if ln.startswith(str(bad))]) == 2
    assert r.stderr == f"Error: {bad}: 2 mistakes (listed above)\n"


def test_targets_key_makes_and_prints_the_harness_key(tmp_path, monkeypatch):
    """rxl targets --key: the public line a target's authorized_keys needs,
    made on first use, the same line the second time."""
    from click.testing import CliRunner
    from rxl.guest.cli import targets_cmd
    monkeypatch.setenv("RXL_WORK", str(tmp_path))
    first = CliRunner().invoke(targets_cmd, ["--key"])
    assert first.exit_code == 0, first.output
    line = first.stdout.strip()
    assert line.startswith("ssh-ed25519 AAAA") and "\n" not in line
    assert (tmp_path / "ssh" / "id_ed25519.pub").read_text().strip() == line
    assert "PermitRootLogin prohibit-password" in first.stderr
    assert CliRunner().invoke(targets_cmd, ["--key"]).stdout.strip() == line


def test_the_default_shape_is_the_numa_server_and_its_nic_sits_in_node_0():
    """What docs/results/guest-numa.md measured: 32 vCPUs, igb behind a bridge with
    _PXM 0 (QEMU 8.0 or later); the no-_PXM twin has the NIC on pcie.0."""
    from rxl.guest import qemu
    s = T.Shape()
    assert (s.vcpus, s.driver, s.nic_domain) == (32, "igb", 0)
    cfg = s.config("/r")
    assert cfg.nic_numa_node == 0 and cfg.nics == ("igb",) and qemu.required_qemu(cfg) == (8, 0)
    flat = T.Shape(nic_domain=None).config("/r")
    assert flat.nic_numa_node is None
    assert T.Shape(**T.E1000E_SHAPE).driver == "em"
    assert qemu.required_qemu(T.Shape(**T.E1000E_SHAPE).config("/r")) == (7, 2)


@pytest.mark.parametrize("fields,msg", [
    ("nic_domain: 2", "nic_domain: 2 is not one of the shape's 2 NUMA nodes"),
    ("nic_domain: -1", "nic_domain: must be a NUMA node"),
    ("nic_domain: yes", "nic_domain: must be a NUMA node"),
    ("numa_nodes: 0, nic_domain: 0", "nic_domain: 0 is not one of the shape's 0 NUMA nodes"),
])
def test_bad_nic_domain_is_one_line(tmp_path, fields, msg):
    with pytest.raises(T.TargetsError, match=msg):
        T.load(write(tmp_path, "targets:\n  g: {kind: qemu, " + fields + "}\n"))
    ok = T.load(write(tmp_path, "targets:\n  g: {kind: qemu, nic_domain: null}\n"))
    assert ok.get("g").shape.nic_domain is None


@pytest.mark.parametrize("text,mistake", [
    ("targets: {guest: {kind: box, host: h.example.org}}\n",
     "targets.guest: guest is a built-in QEMU guest's name (what rxl learn and run boot by "
     "it): a targets file may give it another shape (kind: qemu), not kind: box"),
    ("targets: {guest-2s: {kind: bhyve, host: h.example.org}}\n",
     "targets.guest-2s: guest-2s is a built-in QEMU guest's name"),
    ('targets: {b: {kind: box, host: h.example.org, description: "a\\0b"}}\n',
     "targets.b.description: a\\x00b: holds a control character"),
    ('targets: {b: {kind: box, host: h.example.org, description: "red \\e[31m"}}\n',
     "targets.b.description: red \\x1b[31m: holds a control character"),
])
def test_a_builtin_name_of_another_kind_or_a_control_character_is_a_mistake(tmp_path, text,
                                                                            mistake):
    """A box named guest silently replaced the own QEMU guest (rxl learn's
    default --target); a NUL in a description passed.  Giving guest another
    shape stays allowed (test_good_file)."""
    with pytest.raises(T.TargetsError) as ei:
        T.load(write(tmp_path, text))
    assert any(m.partition(".yaml: ")[2].startswith(mistake) for m in ei.value.errors), \
        ei.value.errors


# ---- issue 27, eighth pass, fault 19: a YAML merge key

@pytest.mark.parametrize("loader", ["CSafeLoader", "SafeLoader"])
@pytest.mark.parametrize("text,line", [
    ("targets: {a: {<<: {kind: box}, host: h}}\n", 1),
    ("targets:\n  a:\n    host: h\n    <<: {kind: box}\n", 4),
    ("targets:\n  a:\n    <<: [{kind: box}, {port: 22}]\n    host: h\n", 3),
])
def test_a_merge_key_is_refused_naming_it_and_its_line(tmp_path, monkeypatch, loader, text,
                                                       line):
    """`<<: {kind: box}` said 'not valid YAML: could not determine a constructor
    for the tag tag:yaml.org,2002:merge' (PyYAML's internals; it is valid YAML)."""
    import yaml
    if not hasattr(yaml, loader):
        pytest.skip(f"PyYAML without {loader}")
    monkeypatch.setattr(T, "BASE_LOADER", getattr(yaml, loader))
    p = tmp_path / "targets.yaml"
    p.write_text(text)
    with pytest.raises(T.TargetsError) as exc:
        T.load(str(p))
    assert exc.value.errors == [f"{p}: line {line}: a merge key (<<): a targets file takes no "
                               "merge keys (as no anchors or aliases); write the values out"]

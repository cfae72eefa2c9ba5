"""rxl.guest.bhyve: the bhyve argv builder (pure; bhyve itself cannot run here)."""

import pytest

from rxl.guest.bhyve import (BhyveConfigError, MAX_NUMA_DOMAINS, VMConfig, build_argv, describe,
                       supports_numa)


def opt(argv, flag):
    return [argv[i + 1] for i, a in enumerate(argv) if a == flag]


def test_two_socket_default():
    argv = build_argv(VMConfig(image="/vm/fbsd14.raw"))
    assert argv[0] == "bhyve" and argv[-1] == "rxl"
    assert opt(argv, "-c") == ["cpus=8,sockets=2,cores=2,threads=2"]
    assert opt(argv, "-m") == ["2048M"]
    assert opt(argv, "-s") == ["0,hostbridge", "1,lpc", "2,virtio-blk,/vm/fbsd14.raw",
                               "3,virtio-net,tap0"]
    assert opt(argv, "-l") == ["com1,stdio",
                               "bootrom,/usr/local/share/uefi-firmware/BHYVE_UEFI.fd"]
    assert "-n" not in argv


def test_numa_domains_split_cpus_and_memory():
    argv = build_argv(VMConfig(image="i", sockets=4, cores=1, threads=2, numa_nodes=2,
                               memory_mib=4096), numa_supported=True)
    assert opt(argv, "-n") == ["id=0,size=2048M,cpus=0-3", "id=1,size=2048M,cpus=4-7"]


@pytest.mark.parametrize("kw,numa,msg", [
    ({"numa_nodes": 2}, False, "has no -n"),
    ({"numa_nodes": 3}, True, "does not divide sockets=2"),
    ({"numa_nodes": MAX_NUMA_DOMAINS + 2, "sockets": 10}, True, "at most 8"),
    ({"memory_mib": 200}, False, "below 256 MiB, the least for a guest"),
    ({"numa_nodes": 2, "memory_mib": 1025}, True, "split evenly over 2"),
    ({"cores": 0}, False, "cores must be a positive integer"),
    ({"image": ""}, False, "image is required"),
    ({"image": "a,b"}, False, "comma"),
    ({"name": "bad name"}, False, "name"),
    ({"disk": "floppy"}, False, "disk 'floppy'"),
    ({"tap": "eth0"}, False, "tapN"),
])
def test_refusals(kw, numa, msg):
    cfg = dict({"image": "/vm/x.raw"}, **kw)
    with pytest.raises(BhyveConfigError, match=msg):
        build_argv(VMConfig(**cfg), numa_supported=numa)


def test_supports_numa_reads_usage():
    old = "Usage: bhyve [-aCDeHhPSuWwxY]\n       [-c [[cpus=]numcpus]...] [-m mem] vmname"
    new = old.replace("[-m mem]", "[-m mem] [-n id,size,cpus[,domain_policy]]")
    assert not supports_numa(old)
    assert supports_numa(new)


def test_describe_says_untested_and_commit_1():
    cfg = VMConfig(image="/vm/x.raw")
    text = describe(cfg, build_argv(cfg))
    assert "UNTESTED ON HARDWARE" in text
    assert "commit 1" in text and "cannot be shown" in text
    assert "kldload -n vmm" in text and "bhyvectl --destroy --vm=rxl" in text
    # what makes the guest reachable (a tap up on open, a bridge,
    # sshd with root's key login and the harness key
    assert "sysctl net.link.tap.up_on_open=1" in text.splitlines()
    assert "addm tap0 up" in text and "PermitRootLogin prohibit-password" in text
    assert "rxl targets --key" in text


def test_rxl_vm_prints_and_refuses_start_off_freebsd(tmp_path):
    from click.testing import CliRunner

    from rxl.cli.main import main
    img = tmp_path / "x.raw"
    img.write_bytes(bytes(512))  # one sector: the least a disk image holds
    r = CliRunner().invoke(main, ["vm", "--image", str(img), "--sockets", "2"])
    assert r.exit_code == 0, r.output
    assert "cpus=8,sockets=2,cores=2,threads=2" in r.output and "UNTESTED" in r.output
    r = CliRunner().invoke(main, ["vm", "--image", str(img), "--start"])
    assert r.exit_code != 0 and "needs a FreeBSD host with bhyve" in r.output


@pytest.mark.parametrize("opt,val", [("--cores", "0"), ("--memory", "-5"), ("--sockets", "0"),
                                     ("--threads", "9"), ("--numa-nodes", "-1")])
def test_rxl_vm_names_the_option_out_of_range(tmp_path, opt, val):
    from click.testing import CliRunner

    from rxl.cli.main import main
    img = tmp_path / "x.raw"
    img.write_bytes(b"")
    r = CliRunner().invoke(main, ["vm", "--image", str(img), opt, val])
    assert r.exit_code == 2 and opt in r.output


def test_rxl_vm_refuses_a_missing_image(tmp_path):
    from click.testing import CliRunner

    from rxl.cli.main import main
    r = CliRunner().invoke(main, ["vm", "--image", str(tmp_path / "nope.raw")])
    assert r.exit_code == 2 and "--image" in r.output and "nope.raw: no such file" in r.output

"""rxl.bench.ebpf_host: privilege and kernel checks of the eBPF selectors."""

from rxl.bench import ebpf_host as H

STATUS = "Name:\tpython3\nCapInh:\t0000000000000000\nCapEff:\t{}\nCapBnd:\t000001ffffffffff\n"


def test_cap_eff_reads_the_effective_set():
    assert H.cap_eff(STATUS.format("000001ffffffffff")) == 0x1ffffffffff
    assert H.cap_eff(STATUS.format("0000000000000000")) == 0
    assert H.cap_eff("no such line\n") == 0
    assert H.cap_eff("CapEff:\tzz\n") == 0


def test_root_or_cap_bpf_and_cap_net_admin():
    both = (1 << 39) | (1 << 12)
    assert H.privilege_problem(euid=0, caps=0) is None
    assert H.privilege_problem(euid=1000, caps=both) is None
    # One of the two is not enough: CAP_BPF loads, CAP_NET_ADMIN is for the
    # networking program type.
    assert "CAP_BPF" in H.privilege_problem(euid=1000, caps=1 << 39)
    assert "root" in H.privilege_problem(euid=1000, caps=1 << 12)


def test_kernel_release_and_minimum():
    assert H.kernel_release("6.1.0-18-amd64") == (6, 1)
    assert H.kernel_release("5.12.0") == (5, 12)
    assert H.kernel_release("weird") is None
    assert H.kernel_problem("Linux", "5.12.0") is None
    assert H.kernel_problem("Linux", "6.1.0-18-amd64") is None
    assert "older than 5.12" in H.kernel_problem("Linux", "5.11.22")
    assert "older than 5.12" in H.kernel_problem("Linux", "4.19.0")
    assert "unknown" in H.kernel_problem("Linux", "weird")
    assert "needs Linux" in H.kernel_problem("FreeBSD", "14.0-STABLE")

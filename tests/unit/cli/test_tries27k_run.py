"""Issue 27's tenth pass (docs/results/newcomer.md, "Tenth pass"), faults
11-16: a key file that is a FIFO or a device (the key check blocked on it, or
read /dev/zero for ever), a host or user whose message did not say what is
wrong, a kernel of another release than the tree's, a base URL that does not
parse, and a memory size below the per-node least worded as if the total were
below it. Each is refused in one ``Error:`` line, exit 2, nothing made."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from clierror import error_line as _error, run as _run, work  # noqa: F401 (work: fixture)
from fakefreebsd import kernel_bytes
from rxl.guest.ssh import TargetError, check_host

HARNESS = Path(__file__).resolve().parents[3] / "harness"


def _tree(work):
    return sorted(str(p.relative_to(work)) for p in work.rglob("*"))


def _rxl(args, env=None, timeout=120):
    """``rxl ARGS`` in its own process (a hang is a TimeoutExpired, not a hung
    suite); its CompletedProcess."""
    e = dict(os.environ, PYTHONPATH=str(HARNESS), **(env or {}))
    e.pop("RXL_BASE_URL", None)
    return subprocess.run([sys.executable, "-m", "rxl"] + [str(a) for a in args],
                          env=e, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def _one_error(r):
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr
    (line,) = r.stderr.splitlines()
    assert line.startswith("Error: "), line
    return line


# ------------------------------------------ 11: a key that is a FIFO or a device

@pytest.fixture
def fifo(work):
    path = work / "fifo"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
@pytest.mark.parametrize("args", [["targets"], ["run", "--check-only", "--target", "b"],
                                  ["run", "--dry-run", "--target", "b"]], ids=" ".join)
def test_a_targets_key_that_is_no_regular_file_is_refused_at_once(kind, args, fifo, work):
    """11: rxl targets and run with the target hung until killed (the key check
    opened the FIFO, or read /dev/zero for ever)."""
    key, what = (fifo, "a FIFO") if kind == "fifo" else ("/dev/zero", "a character device")
    y = work / "t.yaml"
    y.write_text(f"targets:\n  b: {{kind: box, host: h.example, key: {key}}}\n")
    before = _tree(work)
    r = _rxl(args + ["--targets", y], env={"RXL_WORK": str(work / "w")})
    line = _one_error(r)
    mistake = f"{y}: targets.b.key: {key}: {what}, not a regular file, no private key"
    if args == ["targets"]:  # the file's mistakes listed, as every other one is
        assert r.stdout.splitlines() == [mistake]
        assert line == f"Error: {y}: 1 mistake (listed above)"
    else:
        assert line == f"Error: {mistake}"
    assert _tree(work) == before


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
@pytest.mark.parametrize("args", [["targets", "--key"],
                                  ["run", "--check-only", "--target", "ssh://root@h.example"]],
                         ids=" ".join)
def test_the_harness_key_no_regular_file_is_refused_at_once(kind, args, fifo, work):
    """11: RXL_WORK=wk rxl targets --key (wk/ssh/id_ed25519 a FIFO, or a link to
    /dev/zero) hung."""
    (work / "wk" / "ssh").mkdir(parents=True)
    key = work / "wk" / "ssh" / "id_ed25519"
    if kind == "fifo":
        os.mkfifo(key)
        what = "a FIFO"
    else:
        os.symlink("/dev/zero", key)
        what = "a character device"
    line = _one_error(_rxl(args, env={"RXL_WORK": str(work / "wk")}))
    assert line.startswith(f"Error: the harness key: {key}: {what}, not a regular file, "
                           f"no private key; remove {key} and {key}.pub"), line
    assert sorted(os.listdir(work / "wk" / "ssh")) == ["id_ed25519"]


# -------------------------------------------- 12, 13: what is wrong with a host or user

@pytest.mark.parametrize("host", ["h%00x", "h%zz", "[h.example]"])
def test_a_host_that_is_no_address_is_called_no_host_name(host):
    """12: "h%00x: not an IPv6 address" for a host that holds no ':'."""
    line = _error(["run", "--check-only", "--target", f"ssh://root@{host}"])
    assert line.startswith(f"Error: Invalid value for '--target': ssh://root@{host}: "
                           f"{host}: not a host name or IP address ("), line


@pytest.mark.parametrize("host", ["[::g]", "fe80::1::2", "[fe80::zz%em0]"])
def test_a_host_with_a_colon_is_still_not_an_ipv6_address(host):
    with pytest.raises(TargetError, match=r": not an IPv6 address$"):
        check_host(host)


def test_an_empty_user_is_called_empty():
    """13: "ssh://@h.example: : not a login name" showed the empty user as nothing."""
    assert _error(["run", "--check-only", "--target", "ssh://@h.example"]) == \
        "Error: Invalid value for '--target': ssh://@h.example: the user is empty: give " \
        "a login name (letters, digits, '_', '.', '-', not starting with '-', at most 32)"


# ------------------------------------------------- 14: a kernel of another release

V14 = b"FreeBSD 14.0-RELEASE #1 def: Mon Nov 30 2026"


@pytest.fixture
def kern14(work):
    path = work / "kern14"
    path.write_bytes(kernel_bytes(tail=b"\0@(#)" + V14 + b"\n\0" + V14 + b"\n"))
    return path


@pytest.mark.parametrize("mode", ["--check-only", "--dry-run"])
@pytest.mark.parametrize("option", ["--kernel", "--pristine-kernel"])
def test_a_kernel_of_another_release_than_the_base_is_refused(mode, option, kern14,
                                                              kernel_file, work):
    """14: a 14.0-RELEASE kernel against the 15.0 base (patches/BASE
    __FreeBSD_version 1500068) was taken, exit 0, and the dry run planned to boot it
    with the 15.0 base's userland."""
    args = ["run", mode, option, kern14]
    if option == "--pristine-kernel":
        args += ["--kernel", kernel_file]
    before = _tree(work)
    assert _error(args) == (
        f"Error: Invalid value for '{option}': {kern14}: a FreeBSD 14.0 kernel "
        f"({V14.decode()}), but patches/BASE is FreeBSD 15.0 (__FreeBSD_version 1500068): "
        "the run boots it with that release's userland and test programs; give a kernel "
        "built from the tree")
    assert _tree(work) == before


def test_a_kernel_of_the_base_release_is_still_taken(kernel_file):
    r = _run(["run", "--check-only", "--kernel", kernel_file])
    assert r.exit_code == 0 and r.stderr == "", r.output


# ------------------------------------------------------ 15: a base URL that does not parse

@pytest.mark.parametrize("how", ["option", "env"])
@pytest.mark.parametrize("url, why", [("http://[::1", "Invalid IPv6 URL"),
                                      ("https://h.example:x/r.git",
                                       "Port could not be cast to integer value as 'x'")])
def test_a_base_url_that_does_not_parse_is_refused(how, url, why, monkeypatch):
    """15: exit 0, "will be fetched from http://[::1" (git refuses it at fetch time)."""
    if how == "env":
        monkeypatch.setenv("RXL_BASE_URL", url)
        args, opt = ["run", "--check-only"], "$RXL_BASE_URL"
    else:
        args, opt = ["run", "--check-only", "--base-url", url], "'--base-url'"
    assert _error(args) == f"Error: Invalid value for {opt}: {url}: not a URL ({why})"


def test_a_base_url_that_parses_is_still_taken():
    r = _run(["run", "--check-only", "--base-url", "https://[::1]:8443/r.git"])
    assert r.exit_code == 0 and "will be fetched from https://[::1]:8443/r.git" in r.stdout, \
        r.output


# ------------------------------------------------------- 16: memory below the per-node least

@pytest.mark.parametrize("mib, said", [
    (255, "255 MiB over 2 NUMA nodes is 127.5 MiB per node, below 128 MiB per NUMA node "
          "(at least 256 MiB)"),
    (128, "128 MiB over 2 NUMA nodes is 64 MiB per node, below 128 MiB per NUMA node "
          "(at least 256 MiB)")])
def test_memory_below_the_per_node_least_says_the_share(mib, said):
    """16: "255: memory_mib=255 is below 128 MiB per NUMA node (2 nodes)" read as 255 < 128."""
    assert _error(["run", "--check-only", "--memory", str(mib)]) == \
        f"Error: Invalid value for '--memory': {said}"


def test_memory_that_does_not_split_says_so_once():
    line = _error(["run", "--check-only", "--memory", "257"])
    assert line == "Error: Invalid value for '--memory': 257 MiB does not split evenly " \
                   "over 2 NUMA nodes", line

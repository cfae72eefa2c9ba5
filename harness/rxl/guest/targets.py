"""Targets as data: named machines and guest shapes in a YAML file.

The file (default ``$RXL_WORK/targets.yaml``; ``--targets FILE``)::

    shapes:                      # guest shapes for the own QEMU guest
      two-socket:
        sockets: 2
        dies: 1
        cores: 2
        threads: 2
        numa_nodes: 2
        memory_mib: 1024
        nic: e1000e
    targets:
      guest:                     # the harness's own QEMU guest
        kind: qemu
        shape: two-socket        # a name from shapes:, or the fields inline
      vm:                        # a bhyve VM reached over SSH
        kind: bhyve
        host: 192.0.2.10
        user: root
        key: ~/.ssh/id_ed25519   # default: the harness key $RXL_WORK/ssh/id_ed25519
      box:
        kind: box                # a test machine with a real multi-queue NIC
        host: box.example.org
        port: 22

Kinds: ``qemu`` (the harness boots it; shape fields apply), ``bhyve`` and
``box`` (running FreeBSD machines reached with :mod:`rxl.guest.ssh`; host required,
shape fields refused). :func:`load` reports *every* mistake, one line each
(``FILE: targets.box.port: ...``), in one :class:`TargetsError`: a bad field
hides no other field of its target or shape, nor a rule between good ones,
and with ``keys`` (``rxl targets``) an unusable key file is one of them.
"""

from __future__ import annotations

import datetime
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import yaml

from rxl import paths
from rxl.cli.options import TAKES_NO_STDIN, host_memory_mib, link_reason, read_limited
from rxl.errors import BadOption, DataError, UsageError, counted, message, os_reason, show
from rxl.guest import qemu
from rxl.guest.qemu import IFLIB_NIC_MODELS, NIC_DRIVERS, NIC_MODELS
from rxl.guest.ssh import SSHTarget, TargetError, check_host, check_user, parse_url
from rxl.guest.sshkeys import KeyFileError, check_key_file

KINDS = ("qemu", "bhyve", "box")
#: NIC models a shape may name (the NIC under test): rxl.guest.qemu.IFLIB_NIC_MODELS.
SHAPE_FIELDS = ("sockets", "dies", "cores", "threads", "numa_nodes", "memory_mib", "nic",
                "nic_domain")
SSH_FIELDS = ("host", "port", "user", "key")
TARGET_FIELDS = ("kind", "shape", "description") + SSH_FIELDS + SHAPE_FIELDS
#: Most vCPUs a shape may have: QEMU's q35 machine takes at most 288
#: (``max_cpus`` in QEMU 7.2's hw/i386/pc_q35.c).
MAX_VCPUS = 288
#: The own guest's default shape, a two-socket NUMA server (docs/results/guest-numa.md):
#: 2 sockets x 2 dies (one L3 each) x 4 cores x 2 SMT threads = 32 vCPUs, one NUMA
#: node per socket, and an igb (82576) behind a host bridge with ``_PXM`` 0. FreeBSD
#: gives igb0 the interrupt CPUs of node 0 that are not second SMT threads
#: (0, 2, ..., 14: one per core, four per L3 group), so iflib makes 8 RX queues
#: (igb's cap): in numeric order they fill L3 group 0 (CPUs 0-7) before L3
#: group 1, and core_spread=1 alternates the two; no queue is ever on node 1.
DEFAULT_SHAPE = {"sockets": 2, "dies": 2, "cores": 4, "threads": 2, "numa_nodes": 2,
                 "memory_mib": 2048, "nic": "igb", "nic_domain": 0}
#: The shapes of QEMU 7.2 (Debian 12's, no igb): e1000e -> em0 with 2 RX queues on
#: pcie.0 (no _PXM); two-socket is docs/results/guest-boot.md's guest (8 vCPUs),
#: two-l3 gives each socket two dies (16 vCPUs, docs/results/spread-guest.md).
E1000E_SHAPE = {"sockets": 2, "dies": 1, "cores": 2, "threads": 2, "numa_nodes": 2,
                "memory_mib": 1024, "nic": "e1000e", "nic_domain": None}


#: Built-in shapes and qemu targets, there without a targets file (a file's
#: entries of the same name win): ``guest`` (the default, :data:`DEFAULT_SHAPE`),
#: ``guest-nopxm`` (the same without _PXM: the NIC's domain unknown, its
#: interrupt CPUs those of both nodes), ``guest-e1000e`` (QEMU 7.2's fallback,
#: two-l3), ``guest-2s`` and ``guest-2l3`` (the earlier guests).
BUILTIN_SHAPES = {"numa": DEFAULT_SHAPE,
                  "numa-nopxm": dict(DEFAULT_SHAPE, nic_domain=None),
                  "two-socket": E1000E_SHAPE,
                  "two-l3": dict(E1000E_SHAPE, dies=2)}
BUILTIN_TARGETS = {"guest": "numa", "guest-nopxm": "numa-nopxm", "guest-e1000e": "two-l3",
                   "guest-2s": "two-socket", "guest-2l3": "two-l3"}


#: Longest mistake line kept whole (the values in one are cut by show() first).
LINE_MAX = 1 << 16


class TargetsError(DataError):
    """A targets file with mistakes; ``errors`` holds one line per mistake.

    ``str()`` is one line (the CLI's errors are): the first mistake and how
    many more there are, which ``rxl targets`` lists one per line.
    """

    def __init__(self, errors: List[str], path: Optional[str] = None):
        # each line is printed as it is (rxl targets lists them on stdout): what
        # show() did not escape (the file's path, in every line) is escaped here,
        # as the error surface escapes its one line (rxl.errors.message)
        errors = [message(str(e), LINE_MAX) for e in errors]
        more = len(errors) - 1
        where = f" --targets {message(str(path), LINE_MAX)}" if path else ""
        super().__init__(errors[0] if more <= 0 else
                         f"{errors[0]} (and {more} more mistake{'s' * (more > 1)}: "
                         f"rxl targets{where} lists them)")
        self.errors = errors
        self.path = path


@dataclass(frozen=True)
class Shape:
    """The own QEMU guest's CPU/NUMA/NIC shape. vCPUs = sockets*dies*cores*threads.

    The defaults are :data:`DEFAULT_SHAPE`'s. ``nic_domain``: the NUMA node whose
    host bridge the NIC sits behind (``_PXM``), None for none (the NIC on
    q35's ``pcie.0``, its domain unknown to the guest).
    """

    sockets: int = DEFAULT_SHAPE["sockets"]
    dies: int = DEFAULT_SHAPE["dies"]
    cores: int = DEFAULT_SHAPE["cores"]
    threads: int = DEFAULT_SHAPE["threads"]
    numa_nodes: int = DEFAULT_SHAPE["numa_nodes"]
    memory_mib: int = DEFAULT_SHAPE["memory_mib"]
    nic: str = DEFAULT_SHAPE["nic"]
    nic_domain: Optional[int] = DEFAULT_SHAPE["nic_domain"]

    @property
    def vcpus(self) -> int:
        return self.sockets * self.dies * self.cores * self.threads

    @property
    def driver(self) -> str:
        """FreeBSD's driver of the NIC (``igb``, ``em``): its ``dev.<driver>.0`` node."""
        return qemu.NIC_DRIVERS[self.nic]

    def config(self, root_dir: str) -> "qemu.GuestConfig":
        """The QEMU guest of this shape booting the staged root ``root_dir``."""
        return qemu.GuestConfig(root_dir=root_dir, sockets=self.sockets, dies=self.dies,
                                cores=self.cores, threads=self.threads,
                                numa_nodes=self.numa_nodes, memory_mib=self.memory_mib,
                                nics=(self.nic,), nic_numa_node=self.nic_domain)


@dataclass(frozen=True)
class Target:
    """One named target. ``kind`` in :data:`KINDS`; ``shape`` only for ``qemu``;
    host/port/user/key only for ``bhyve`` and ``box`` (key None: the harness key)."""

    name: str
    kind: str
    host: str = ""
    port: int = 22
    user: str = "root"
    key: Optional[str] = None
    shape: Optional[Shape] = None
    description: str = ""
    #: One of :data:`BUILTIN_TARGETS` the targets file does not name.
    builtin: bool = False

    def ssh_target(self):
        """The rxl.guest.ssh.SSHTarget of a bhyve/box target. ValueError for ``qemu``."""
        if self.kind == "qemu":
            raise ValueError(f"{self.name}: the own guest has no fixed address; "
                             "rxl guest up prints it")
        return SSHTarget(self.host, self.port, self.user, self.key, name=self.name)


@dataclass
class Targets:
    """A loaded file: ``shapes`` and ``targets`` by name, ``path`` it came from."""

    path: str
    shapes: Dict[str, Shape] = field(default_factory=dict)
    targets: Dict[str, Target] = field(default_factory=dict)

    def get(self, name: str) -> Target:
        """The target ``name``. KeyError with the known names when there is no
        such target; TargetsError when its ``key:`` is not a private key SSH
        can use (rxl.guest.sshkeys.check_key_file: missing, a directory, not a
        key, encrypted; a key is checked when its target is used, not when the
        file is read)."""
        try:
            t = self.targets[name]
        except KeyError:
            known = ", ".join(sorted(self.targets)) or "none"
            where = self.path if Path(self.path).is_file() else \
                f"{self.path} (no such file: only the built-in targets)"
            raise KeyError(f"{name}: no such target in {where} (known: {known})") from None
        if t.key is not None:
            try:
                check_key_file(t.key)
            except KeyFileError as exc:
                raise TargetsError([f"{self.path}: targets.{name}.key: {exc}"],
                                   self.path) from None
        return t


def default_path() -> Path:
    """``$RXL_WORK/targets.yaml``."""
    return paths.work_root() / "targets.yaml"


#: A target's or shape's name.
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
#: Longest ``description:`` of a target, characters.
DESCRIPTION_MAX = 500


def _kind_of(v: Any) -> str:
    """How a message names a value of the wrong kind: ``a list``, ``5``."""
    if isinstance(v, (dict, list)):
        return f"a {'mapping' if isinstance(v, dict) else 'list'}"
    if isinstance(v, str):
        return f"{len(v)} characters"
    return repr(v)[:40]


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_shape(where: str, d: Dict[str, Any], errs: List[str], *,
                 whole: bool = True) -> Optional[Shape]:
    """The shape of the fields ``d`` gives over :data:`DEFAULT_SHAPE`, or None
    when it has a mistake: each mistake one line in ``errs``, every one (a bad
    field does not hide another, nor a rule between fields whose own values
    are good: ``sockets: 3`` with ``numa_nodes: 2`` and ``memory_mib: 100`` is
    two lines). ``whole`` False checks each field alone (fields given beside
    ``shape:``, which make no shape of their own)."""
    vals = dict(DEFAULT_SHAPE)
    bad = set()
    for k in SHAPE_FIELDS:
        if k not in d:
            continue
        v = d[k]
        if k == "nic":
            if v in NIC_MODELS and v not in IFLIB_NIC_MODELS:
                errs.append(f"{where}.nic: {as_written(d, k, v)} is no iflib NIC (its "
                            f"driver, {NIC_DRIVERS[v]}, has no iflib core_spread or rx queue "
                            "CPUs, which the runs set and show; the SSH NIC alone is "
                            f"virtio): one of {', '.join(IFLIB_NIC_MODELS)}")
                bad.add(k)
                continue
            if v not in NIC_MODELS:
                errs.append(f"{where}.nic: {as_written(d, k, v)} is not one of "
                            f"{', '.join(IFLIB_NIC_MODELS)}")
                bad.add(k)
                continue
        elif k == "nic_domain":
            if v is not None and (not _is_int(v) or v < 0):
                errs.append(f"{where}.nic_domain: must be a NUMA node (an integer >= 0) "
                            f"or null (no _PXM), got {as_written(d, k, v, text=False)}")
                bad.add(k)
                continue
        elif k == "numa_nodes":
            if not _is_int(v) or v < 0:
                errs.append(f"{where}.numa_nodes: must be an integer >= 0, got "
                            f"{as_written(d, k, v, text=False)}")
                bad.add(k)
                continue
        elif not _is_int(v) or v < 1:
            errs.append(f"{where}.{k}: must be an integer >= 1, got "
                        f"{as_written(d, k, v, text=False)}")
            bad.add(k)
            continue
        vals[k] = v
    if not whole:
        return None
    if "nic_domain" not in d and "numa_nodes" not in bad and not vals["numa_nodes"]:
        vals["nic_domain"] = None      # no NUMA nodes: no node to put the NIC's bridge in
    before = len(errs)

    def good(*keys: str) -> bool:
        """Whether the fields a rule reads are each good (a bad one is said already)."""
        return not bad.intersection(keys)

    if good("sockets", "dies", "cores", "threads"):
        vcpus = vals["sockets"] * vals["dies"] * vals["cores"] * vals["threads"]
        if vcpus > MAX_VCPUS:
            errs.append(f"{where}: {vcpus} vCPUs (sockets x dies x cores x threads); "
                        f"QEMU's q35 machine takes at most {MAX_VCPUS}")
    nodes = vals["numa_nodes"]
    if good("sockets", "numa_nodes") and nodes and vals["sockets"] % nodes:
        errs.append(f"{where}.numa_nodes: {nodes} does not divide sockets={vals['sockets']} "
                    "(each NUMA node holds whole sockets)")
    if good("nic_domain", "numa_nodes") and vals["nic_domain"] is not None \
            and vals["nic_domain"] >= nodes:
        errs.append(f"{where}.nic_domain: {vals['nic_domain']} is not one of the shape's "
                    f"{counted(nodes, 'NUMA node')} (null: no _PXM)")
    if good("memory_mib", "numa_nodes"):
        split = max(nodes, 1)
        if vals["memory_mib"] < 128 * split or vals["memory_mib"] % split:
            errs.append(f"{where}.memory_mib: {vals['memory_mib']} must be >= 128 per NUMA "
                        f"node and split evenly over {split}")
    if bad or len(errs) > before:
        return None
    return Shape(**vals)


def _unknown(where: str, d: Dict[str, Any], allowed, errs: List[str]) -> None:
    """Unknown keys of ``d``; ``where`` "" for the file's top level."""
    for k in d:
        if k not in allowed:
            errs.append(f"{where + ': ' if where else ''}unknown field {k!r} "
                        f"(one of {', '.join(allowed)})")


def _check_ssh(where: str, d: Dict[str, Any], kind: Optional[str], path: str,
               errs: List[str], key_check: Optional[bool]) -> Optional[Dict[str, Any]]:
    """The host, port, user and key of a bhyve or box target (``kind`` None: a
    target whose kind is a mistake, its SSH fields checked as such a target's,
    none required), or None; each mistake one line in ``errs``. ``key_check``:
    None, the key file is not looked at (it is when its target is used:
    :meth:`Targets.get`); False, one that is there but unusable is a mistake
    (a directory, not a key, encrypted) and a missing one is not (it is needed
    when used); True, a missing one is a mistake too (the target is used)."""
    before = len(errs)
    host = d.get("host")
    if host is None:
        if kind is not None:
            errs.append(f"{where}.host: required for kind {kind} (a name or address)")
    elif not isinstance(host, str):  # YAML read a number, a date, a boolean
        errs.append(f"{where}.host: {as_written(d, 'host', host)}: not a host name or "
                    "IP address")
    else:
        try:
            host = check_host(host)
        except TargetError as exc:
            errs.append(f"{where}.host: {exc}")
    port = d.get("port", 22)
    if not _is_int(port) or not 1 <= port <= 65535:
        errs.append(f"{where}.port: must be an integer in 1..65535, got "
                    f"{as_written(d, 'port', port, text=False)}")
    user = d.get("user", "root")
    if not isinstance(user, str):
        errs.append(f"{where}.user: {as_written(d, 'user', user)}: not a login name")
    else:
        try:
            user = check_user(user)
        except TargetError as exc:
            errs.append(f"{where}.user: {exc}")
    key = d.get("key")
    if key is not None:
        if not isinstance(key, str) or not key:
            errs.append(f"{where}.key: must be a path to a private key, got "
                        f"{as_written(d, 'key', key)}")
            key = None
        else:
            user_of = re.match(r"~([^/]+)", key)
            if user_of and os.path.expanduser(user_of.group(0)) == user_of.group(0):
                # expanduser leaves an unknown ~user as it is: a relative
                # path under the file's directory would be a guess
                errs.append(f"{where}.key: {show(user_of.group(0), 40)}: no such user")
                key = None
            else:
                key = os.path.expanduser(key)
                if not os.path.isabs(key):
                    key = str(Path(path).parent / key)
        if key is not None and key_check is not None:
            try:  # what run makes of it (Targets.get), whatever else the target holds
                check_key_file(key)
            except KeyFileError as exc:
                if key_check or not exc.missing:
                    errs.append(f"{where}.key: {exc}")
    if len(errs) > before:
        return None
    return {"host": host, "port": port, "user": user, "key": key}


def _check_target(name: Any, where: str, d: Dict[str, Any], targets: Dict[Any, Any],
                  shapes: Dict[Any, Any], out: Targets, path: str, errs: List[str],
                  key_check: Optional[bool]) -> Optional[Target]:
    """The target ``name`` (mapping ``d``), or None; every mistake of it one line in
    ``errs``: its name, description and kind, and each field by what it is for,
    also beside another mistake (a bad kind, port or key hides none of the others).
    ``key_check``: :func:`_check_ssh`'s."""
    before = len(errs)
    _unknown(where, d, TARGET_FIELDS, errs)
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        errs.append(f"targets: {as_written(targets, name, is_key=True)}: a target name "
                    "is 1-64 letters, digits, "
                    "'_', '.' or '-' (what --target NAME gives)")
    desc = d.get("description", "")
    if not isinstance(desc, str) or len(desc) > DESCRIPTION_MAX:
        errs.append(f"{where}.description: must be text of at most {DESCRIPTION_MAX} "
                    "characters, got " + (_kind_of(desc) if isinstance(desc, (str, dict, list))
                                          else as_written(d, "description", desc)))
    elif not desc.isprintable():  # rxl targets prints it on the target's line
        errs.append(f"{where}.description: {show(desc, 40)}: holds a control "
                    "character (a description is one line of text)")
    kind = d.get("kind")
    if kind not in KINDS:
        errs.append(f"{where}.kind: {as_written(d, 'kind', kind)} is not one of "
                    f"{', '.join(KINDS)}")
        kind = None  # each field below checked as the kinds that take it take it
    elif name in BUILTIN_TARGETS and kind != "qemu":
        errs.append(f"{where}: {name} is a built-in QEMU guest's name (what rxl "
                    f"learn and run boot by it): a targets file may give it another "
                    f"shape (kind: qemu), not kind: {kind}; name the {kind} otherwise")
    ssh_given = [k for k in SSH_FIELDS if k in d]
    shape_given = [k for k in SHAPE_FIELDS + ("shape",) if k in d]
    shape, ssh = None, None
    if kind == "qemu":
        for k in ssh_given:
            errs.append(f"{where}.{k}: not for kind qemu (the harness picks a "
                        "loopback port and uses its own key)")
    elif kind is not None:
        for k in shape_given:
            errs.append(f"{where}.{k}: only the own guest (kind qemu) has a shape; "
                        f"a {kind} target's topology is read from it")
    if kind == "qemu" or (kind is None and shape_given):
        inline = {k: d[k] for k in SHAPE_FIELDS if k in d}
        if "shape" in d:
            if inline:
                errs.append(f"{where}: give shape: or the shape fields "
                            f"({', '.join(inline)}), not both")
                _check_shape(where, d, errs, whole=False)  # each field's own mistake
            ref = d["shape"]
            try:
                known = ref in shapes
            except TypeError:  # a list or a mapping: no name
                known = False
            if not known:
                errs.append(f"{where}.shape: {as_written(d, 'shape', ref)} is not a "
                            "shape of this file "
                            f"(known: {', '.join(map(str, shapes)) or 'none'})")
            else:
                shape = out.shapes.get(ref)  # None if that shape had its own mistake
        else:
            shape = _check_shape(where, d, errs)  # d: its text as written
    if kind != "qemu" and (kind is not None or ssh_given):
        ssh = _check_ssh(where, d, kind, path, errs, key_check)
    if len(errs) > before or kind is None:
        return None
    if kind == "qemu":
        return None if shape is None else Target(str(name), kind, shape=shape,
                                                  description=desc)
    return None if ssh is None else Target(str(name), kind, description=desc, **ssh)


def parse(doc: Any, path: str = "<targets>", *, keys: bool = False,
          use: Optional[str] = None) -> Targets:
    """Validate a loaded YAML document. Raises TargetsError listing every mistake
    of every shape and target, one line each.

    ``keys``: each target's ``key:`` file is checked too, one that is there but
    unusable a mistake, a missing one not (``rxl targets``: it is needed when its
    target is used); ``use``: the target to be used (``--target NAME``), whose
    key file is checked, missing too, as :meth:`Targets.get` does."""
    errs: List[str] = []

    def key_check(name: Any) -> Optional[bool]:
        return True if name == use else (False if keys else None)

    out = Targets(path=path)
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise TargetsError([f"{path}: must be a mapping with 'targets:' (and 'shapes:')"],
                           path)
    _unknown("", doc, ("shapes", "targets"), errs)
    # None (``shapes:`` with nothing under it) is no shapes; a list, a number or
    # a string is the wrong type even when empty or zero (``[] or {}`` hid it)
    shapes = doc.get("shapes")
    shapes = {} if shapes is None else shapes
    if not isinstance(shapes, dict):
        errs.append("shapes: must be a mapping of name -> shape")
        shapes = {}
    for name, d in shapes.items():
        where = f"shapes.{name}"
        named = isinstance(name, str) and _NAME.fullmatch(name)
        if not named:  # its fields are checked still (one line per mistake)
            errs.append(f"shapes: {as_written(shapes, name, is_key=True)}: a shape name is "
                        "1-64 letters, digits, "
                        "'_', '.' or '-'")
        if not isinstance(d, dict):
            errs.append(f"{where}: must be a mapping of {', '.join(SHAPE_FIELDS)}")
            continue
        _unknown(where, d, SHAPE_FIELDS, errs)
        s = _check_shape(where, d, errs)
        if s is not None and named:
            out.shapes[str(name)] = s
    targets = doc.get("targets")
    targets = {} if targets is None else targets
    if not isinstance(targets, dict):
        errs.append("targets: must be a mapping of name -> target")
        targets = {}
    for name, d in targets.items():
        where = f"targets.{name}"
        if not isinstance(d, dict):
            errs.append(f"{where}: must be a mapping with kind: ({', '.join(KINDS)})")
            continue
        target = _check_target(name, where, d, targets, shapes, out, path, errs,
                               key_check(name))
        if target is not None:
            out.targets[str(name)] = target
    if errs:
        raise TargetsError([f"{path}: {e}" for e in errs], path)
    return out


#: The YAML loader: libyaml's (CSafeLoader) where PyYAML was built with it, else
#: the pure-Python SafeLoader; both construct safe types only.
BASE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
#: Largest targets file read, bytes: a file of a hundred targets is a few KiB.
MAX_BYTES = 1 << 20


_STR_TAG = "tag:yaml.org,2002:str"
#: A plain ``<<`` key: YAML 1.1's merge key (PyYAML resolves it to this tag).
_MERGE_TAG = "tag:yaml.org,2002:merge"


class Written(dict):
    """A mapping as :func:`read_yaml` builds one, keeping the text of each key
    and value that YAML did not read as a string (``host: 12345`` is the int
    12345, ``yes:`` the key True, ``2026-12-02`` a date): ``key_text`` and
    ``value_text`` map the key to what was written."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.key_text: Dict[Any, str] = {}
        self.value_text: Dict[Any, str] = {}


#: An integer as a targets file takes one: decimal digits, a sign at most.
#: YAML 1.1 (PyYAML) also reads ``026`` as octal 22, ``22:22`` as
#: sexagesimal 1342, ``0b10110`` as binary and ``2_222`` as 2222: a reader
#: of the file sees another number than the harness would use.
_DECIMAL = re.compile(r"[-+]?(?:0|[1-9][0-9]*)")
_INT_TAG = "tag:yaml.org,2002:int"


@dataclass(frozen=True)
class NotDecimal:
    """A plain scalar YAML 1.1 reads as an integer written in another form
    than decimal digits: no integer to the checks (they refuse it, naming
    the key path), ``text`` as written, ``value`` what YAML would make of it."""

    text: str
    value: int

    @property
    def form(self) -> str:
        t = self.text.lstrip("+-")
        if ":" in t:
            return "sexagesimal (base 60)"
        if "_" in t:
            return "underscored"
        if t.startswith("0b"):
            return "binary"
        if t.startswith("0x"):
            return "hexadecimal"
        return "octal"

    def __str__(self) -> str:
        return self.text


def _construct_int(loader, node):
    """YAML's int tag, decimal digits only (:data:`_DECIMAL`); any other form
    a :class:`NotDecimal`, which no integer check takes."""
    text = loader.construct_scalar(node)
    value = yaml.SafeLoader.construct_yaml_int(loader, node)
    if isinstance(text, str) and _DECIMAL.fullmatch(text):
        return value
    return NotDecimal(str(text), value)


def _yaml_kind(v: Any) -> str:
    """What YAML made of a plain scalar that is not a string."""
    if isinstance(v, NotDecimal):
        return f"{v.value} from its {v.form} form; write decimal digits"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, (int, float)):
        return "a number"
    if isinstance(v, (datetime.date, datetime.datetime)):
        return "a date"
    if isinstance(v, bytes):
        return "bytes (!!binary)"
    if v is None:
        return "null"
    return type(v).__name__


def as_written(d: Any, key: Any, value: Any = None, *, is_key: bool = False,
               text: bool = True) -> str:
    """How a message shows ``d[key]`` (or, ``is_key``, the key itself): the
    text as written in the file, and what YAML read it as when that is not
    text (``12345 (YAML reads a number: quote it, '12345', for text)``; a
    field that is no text, ``text`` False, gets no advice to quote)."""
    texts = getattr(d, "key_text" if is_key else "value_text", {})
    v = key if is_key else value
    if isinstance(v, str) or key not in texts:
        return f"'{show(v, 40)}'" if isinstance(v, str) else repr(v)[:40]
    w = show(texts[key], 40)
    return f"{w} (YAML reads {_yaml_kind(v)}" + (f": quote it, '{w}', for text)" if text
                                                 else ")")


def read_yaml(text: str, path: str, error: Callable[[List[str], str], Exception]) -> Any:
    """``text`` (the contents of ``path``) as YAML, safe types only
    (:data:`BASE_LOADER`).

    An alias (``*name``) or an anchor (``&name``) raises ``error(lines, path)`` before anything is
    built: a targets file does not need one, and nested aliases expand
    exponentially (a 1 KiB file can stand for gigabytes). So does a merge key
    (``<<``, named with its line), which merges copies as an alias does (a
    quoted ``'<<'`` is a plain key, and refused as an unknown field). A key given twice in
    one mapping, which PyYAML would settle silently by keeping the last, also
    raises ``error``, one line per such key (``PATH: line N: 'KEY' given
    again (first on line M); ...``). Raises yaml.YAMLError for text that is
    not YAML.
    """
    aliases = [f"{path}: line {ev.start_mark.line + 1}: "
               + (f"an alias (*{ev.anchor})" if isinstance(ev, yaml.AliasEvent) else
                  f"an anchor (&{ev.anchor})")
               + ": a targets file takes no anchors or aliases; write the value out"
               for ev in yaml.parse(text, Loader=BASE_LOADER)
               if isinstance(ev, yaml.NodeEvent) and ev.anchor is not None]
    if aliases:
        raise error(aliases[:1] + aliases[1:10], path)

    class Loader(BASE_LOADER):  # type: ignore[misc, valid-type]
        """The safe loader, recording duplicated mapping keys."""

    dups: List[str] = []

    def mapping(loader, node, deep=False):
        seen: Dict[Any, int] = {}
        written: Dict[Any, str] = {}
        merges = [f"{path}: line {k.start_mark.line + 1}: a merge key (<<): a targets file "
                  "takes no merge keys (as no anchors or aliases); write the values out"
                  for k, _ in node.value if k.tag == _MERGE_TAG]
        if merges:
            raise error(merges, path)
        for knode, vnode in node.value:
            # A plain scalar YAML typed (12345, yes, 2026-12-02) or tagged
            # (!!binary): its text as written, for a message about it.
            for n, role in ((knode, "key"), (vnode, "value")):
                if isinstance(n, yaml.ScalarNode) and n.tag != _STR_TAG:
                    written[(role, id(n))] = n.value
            key = loader.construct_object(knode, deep=True)
            line = knode.start_mark.line + 1
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: the constructor below says so
                continue
            if first is None:
                seen[key] = line
            else:
                dups.append(f"{path}: line {line}: {key!r} given again (first on line "
                            f"{first}); only one may be there")
        out = Written(yaml.SafeLoader.construct_mapping(loader, node, deep))
        for knode, vnode in node.value:
            if ("key", id(knode)) in written or ("value", id(vnode)) in written:
                try:
                    key = loader.construct_object(knode, deep=True)
                    hash(key)
                except TypeError:
                    continue
                if ("key", id(knode)) in written:
                    out.key_text[key] = written[("key", id(knode))]
                if ("value", id(vnode)) in written:
                    out.value_text[key] = written[("value", id(vnode))]
        return out

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    Loader.add_constructor(_INT_TAG, _construct_int)
    loader = Loader(text)
    try:
        doc = loader.get_single_data()
    finally:
        loader.dispose()
    if dups:
        raise error(dups, path)
    return doc


def load(path: Optional[str] = None, *, keys: bool = False,
         use: Optional[str] = None) -> Targets:
    """Read and validate the targets file (default :func:`default_path`);
    ``keys`` and ``use``: which key files are checked with it (:func:`parse`).

    A missing default file is an empty set of targets; a missing file given
    explicitly, a symlink loop or dangling link (either), a directory, more than :data:`MAX_BYTES`, bytes that are not
    UTF-8 (or hold NUL bytes), unreadable YAML (also nested past Python's
    recursion limit), an alias, or invalid contents raise TargetsError. The
    pipe of ``<(...)`` is read like a file; a socket or a named FIFO is
    refused before it is opened (rxl.cli.options.read_limited). An empty
    file is the empty set of targets, as a file of comments only is (the
    same YAML document) and as a missing default file is.
    """
    if path == "-" and not os.path.lexists(path):
        raise TargetsError([f"-: a targets file is not read from standard input; give "
                            f"{TAKES_NO_STDIN}"])
    p = Path(path) if path else default_path()
    try:
        st = os.stat(p)
    except OSError as exc:
        # a symlink loop or a dangling link (at it or on its way) is said to be
        # one, given or the default: Path.exists() called both missing
        why = link_reason(p)
        if why:
            raise TargetsError([f"{p}: {why}"]) from None
        if not isinstance(exc, (FileNotFoundError, NotADirectoryError)):
            raise TargetsError([f"{p}: {os_reason(exc)}"]) from None
        if path:
            raise TargetsError([f"{p}: no such file"]) from None
        return _with_builtins(Targets(path=str(p)))
    if stat.S_ISDIR(st.st_mode):
        raise TargetsError([f"{p}: is a directory, not a targets file"])
    try:
        text = read_limited(str(p), "a targets file", MAX_BYTES, text=True,
                            takes=TAKES_NO_STDIN).decode("utf-8")
        doc = read_yaml(text, str(p), TargetsError)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = str(getattr(exc, "problem", None) or exc)
        if "nesting depth" in problem:  # libyaml's word for it
            problem = "nested too deeply"
        raise TargetsError([f"{p}:{where}: not valid YAML: {problem}"]) from None
    except DataError as exc:
        if isinstance(exc, TargetsError):
            raise
        raise TargetsError([str(exc)]) from None
    except RecursionError:
        raise TargetsError([f"{p}: not valid YAML: nested too deeply"]) from None
    except OSError as exc:
        raise TargetsError([f"{p}: {exc.strerror}"]) from None
    return _with_builtins(parse(doc, str(p), keys=keys, use=use))


def _with_builtins(t: Targets) -> Targets:
    """``t`` plus the built-in shapes and targets it does not name."""
    for name, fields in BUILTIN_SHAPES.items():
        t.shapes.setdefault(name, Shape(**fields))
    for name, shape in BUILTIN_TARGETS.items():
        t.targets.setdefault(name, Target(name, "qemu", shape=t.shapes[shape],
                                          description="built-in QEMU guest", builtin=True))
    return t


#: The target rxl learn and rxl run boot when no --target is given.
DEFAULT_TARGET = "guest"


def default_guest() -> Optional[Target]:
    """The :data:`DEFAULT_TARGET` of the default targets file when that file gives
    it a shape of its own, else None (the built-in: rxl learn boots
    :data:`DEFAULT_SHAPE`, rxl run the same at its ``--memory``). One meaning for
    ``guest``: what ``--target guest`` boots, no ``--target`` boots too. Raises
    TargetsError for the file's mistakes, as ``--target guest`` does."""
    t = load(use=DEFAULT_TARGET).targets[DEFAULT_TARGET]
    return None if t.builtin else t


def check_host_memory(t: Target, option: Optional[str] = "--target") -> None:
    """Refuse the own-guest target ``t`` whose shape has more memory than this
    host's RAM, which QEMU cannot allocate at boot ("cannot set up guest
    memory"): rxl.cli.options.check_guest's rule for ``--memory``, the message
    naming the target and its shape's ``memory_mib``. rxl.errors.BadOption
    naming ``option`` (``--target``), or a UsageError naming the targets file
    for the default guest it gives (``option`` None)."""
    host = host_memory_mib()
    if t.shape is None or host is None or t.shape.memory_mib <= host:
        return
    why = (f"{t.name}: its shape's memory_mib {t.shape.memory_mib} MiB is more than this "
           f"host's {host} MiB of RAM (QEMU cannot allocate it)")
    if option is None:
        raise UsageError(f"{show(str(default_path()))}: {why}")
    raise BadOption(why, option)


def resolve(spec: str, path: Optional[str] = None) -> Target:
    """``--target`` value -> Target: an ``ssh://user@host[:port]`` URL (kind ``box``)
    or a name from the targets file. Raises rxl.guest.ssh.TargetError (a
    ValueError: the URL itself is malformed, a usage error), TargetsError (the
    targets file has mistakes) or KeyError (no such name), each one line."""
    if spec.startswith("ssh://"):
        t = parse_url(spec)
        return Target(spec, "box", host=t.host, port=t.port, user=t.user)
    if "@" in spec or "://" in spec:
        raise ValueError(f"{spec}: not a target name; an SSH target is "
                         "ssh://user@host[:port]")
    return load(path, use=spec).get(spec)

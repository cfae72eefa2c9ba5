"""The harness's layout: imports run one way, and no module reaches into another's privates.

The packages and what each may import are the table of docs/design.md
("Harness") and each package's ``__init__`` docstring: ``decide`` at the
bottom, then ``tree``, ``guest``, ``verify``, ``learn`` and ``bench``, and
``host`` (``rxl doctor``, which reads every stage's needs) on top.  Every
package may use the leaves ``rxl.paths`` and ``rxl.errors`` and the command
line's shared home ``rxl.cli`` (its error surface, option types and option
groups); that home imports only the leaves, except its root group
``rxl.cli.main``, which gathers every package's ``cli``.  The root holds only
the package marker, ``__main__`` and the two leaves.
"""

import ast
from pathlib import Path

RXL = Path(__file__).resolve().parents[2] / "harness" / "rxl"

#: Modules every package may import.
LEAVES = {"paths", "errors"}
#: Package -> the rxl packages and root modules it may import.
ALLOWED = {
    "cli": LEAVES,
    "decide": LEAVES | {"cli"},
    "tree": LEAVES | {"cli", "decide"},
    "guest": LEAVES | {"cli", "decide", "tree"},
    "verify": LEAVES | {"cli", "decide", "tree", "guest"},
    "learn": LEAVES | {"cli", "decide", "tree", "guest", "verify"},
    "bench": LEAVES | {"cli", "decide", "tree", "guest", "verify", "learn"},
    "host": LEAVES | {"cli", "decide", "tree", "guest", "verify", "learn", "bench"},
}
#: Modules allowed more than their package: the root group gathers every command.
MODULE_ALLOWED = {"cli/main.py": set(ALLOWED)}
#: Root modules and what they may import.
ROOT_MODULES = {
    "__init__": set(),
    "__main__": {"cli"},
    "paths": set(),
    "errors": set(),
}


def _imported(path: Path, package: str):
    """(line, top-level rxl name) for every import of rxl in ``path``, function-local
    and relative ones included; ``package`` is the module's package (``""``: root)."""
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if parts[0] == "rxl" and len(parts) > 1:
                    yield node.lineno, parts[1]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                here = ["rxl"] + ([package] if package else [])
                mod = here[:len(here) - node.level + 1]
                mod += [p for p in (node.module or "").split(".") if p]
            else:
                mod = (node.module or "").split(".")
            if mod[0] != "rxl":
                continue
            if len(mod) > 1:
                yield node.lineno, mod[1]
            else:
                for a in node.names:
                    yield node.lineno, a.name


def layout_violations(root: Path):
    """Every import against the direction, and every module outside the layout,
    as ``path:line: message`` strings."""
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if len(rel.parts) == 1:
            package, allowed = "", ROOT_MODULES.get(path.stem)
            if allowed is None:
                out.append(f"{rel}: a module at the root; put it in a package")
                continue
        else:
            package = rel.parts[0]
            allowed = ALLOWED.get(package)
            if allowed is None:
                out.append(f"{rel}: {package}/ is not a package of the layout")
                continue
            allowed = allowed | MODULE_ALLOWED.get(rel.as_posix(), set())
        for line, name in _imported(path, package):
            if name != package and name not in allowed:
                out.append(f"{rel}:{line}: {package or path.stem} may not import rxl.{name}")
    return out


def test_imports_follow_the_package_direction(tmp_path):
    assert layout_violations(RXL) == []
    # The check itself: a decide module reaching up, a root module, a relative
    # import, the CLI home reaching into a package; the leaves and the home pass.
    (tmp_path / "decide").mkdir()
    (tmp_path / "decide" / "model.py").write_text(
        "from rxl.decide import topology\nfrom rxl.errors import DataError\n"
        "from rxl.cli.options import show\n"
        "def f():\n    from rxl.verify import parse\n")
    (tmp_path / "guest").mkdir()
    (tmp_path / "guest" / "image.py").write_text("from ..verify import stages\nimport rxl.paths\n"
                                                 "from rxl.tree import world\n")
    (tmp_path / "cli").mkdir()
    (tmp_path / "cli" / "options.py").write_text("from rxl.tree import base\n")
    (tmp_path / "cli" / "main.py").write_text("from rxl.tree.cli import build\n")
    (tmp_path / "extra.py").write_text("")
    assert layout_violations(tmp_path) == [
        "cli/options.py:1: cli may not import rxl.tree",
        "decide/model.py:5: decide may not import rxl.verify",
        "extra.py: a module at the root; put it in a package",
        "guest/image.py:1: guest may not import rxl.verify",
    ]


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _module_of(root: Path, dotted: str) -> bool:
    """Whether ``rxl.<dotted>`` names a module or package under ``root``."""
    rel = Path(*dotted.split("."))
    return (root / rel).with_suffix(".py").is_file() or (root / rel / "__init__.py").is_file()


def private_reaches(root: Path):
    """Every use of another module's private name (``_name``, not ``__dunder__``):
    ``from rxl.x import _name`` and ``mod._name`` on a name bound to an rxl module,
    as ``path:line: message`` strings."""
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        tree = ast.parse(path.read_text(), str(path))
        modules = set()  # local names bound to rxl modules
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith("rxl.") and a.asname:
                        modules.add(a.asname)
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rxl"):
                base = (node.module or "").split(".", 1)[1] if "." in node.module else ""
                for a in node.names:
                    if _is_private(a.name):
                        out.append(f"{rel}:{node.lineno}: imports {node.module}.{a.name}")
                    elif _module_of(root, f"{base}.{a.name}".strip(".")):
                        modules.add(a.asname or a.name)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id in modules and _is_private(node.attr):
                out.append(f"{rel}:{node.lineno}: uses {node.value.id}.{node.attr}")
    return out


def test_no_module_reaches_into_another_modules_private_names(tmp_path):
    assert private_reaches(RXL) == []
    # The check itself: both ways of reaching in are found, dunders and own names pass.
    (tmp_path / "guest").mkdir()
    (tmp_path / "guest" / "ssh.py").write_text("def _open():\n    pass\n")
    (tmp_path / "guest" / "sshkeys.py").write_text("")
    (tmp_path / "verify").mkdir()
    (tmp_path / "verify" / "run.py").write_text(
        "from rxl.guest import ssh\nfrom rxl.guest.ssh import _open\n"
        "import rxl.guest.sshkeys as keys\n"
        "ssh._open()\nkeys.__name__\n_local = 1\nprint(_local)\n")
    assert private_reaches(tmp_path) == [
        "verify/run.py:2: imports rxl.guest.ssh._open",
        "verify/run.py:4: uses ssh._open",
    ]

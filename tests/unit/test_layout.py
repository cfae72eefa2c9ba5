"""The harness's layout (issue 15): imports run one way, no module over 400 lines.

The packages and what each may import are the table of docs/design.md
("Harness") and each package's ``__init__`` docstring: ``decide`` imports
nothing of rxl; ``tree`` and ``guest`` import ``decide`` at most;
``verify``, ``learn`` and ``bench`` sit on top, in that order.  The root
holds only the package marker, ``__main__``, the root command group
(``cli``, which imports every package's ``cli``) and the leaf ``paths``.
"""

import ast
from pathlib import Path

RXL = Path(__file__).resolve().parents[2] / "harness" / "rxl"

#: Package -> the rxl packages and root modules it may import.
ALLOWED = {
    "decide": set(),
    "tree": {"decide", "paths"},
    "guest": {"decide", "paths"},
    "verify": {"decide", "tree", "guest", "paths"},
    "learn": {"decide", "tree", "guest", "verify", "paths"},
    "bench": {"decide", "tree", "guest", "verify", "learn", "paths"},
}
#: Root modules and what they may import.
ROOT_MODULES = {
    "__init__": set(),
    "__main__": {"cli"},
    "paths": set(),
    "cli": set(ALLOWED),
}
#: No Python module of the harness is longer than this (lines).
MAX_LINES = 400


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
        for line, name in _imported(path, package):
            if name != package and name not in allowed:
                out.append(f"{rel}:{line}: {package or path.stem} may not import rxl.{name}")
    return out


def test_imports_follow_the_package_direction(tmp_path):
    assert layout_violations(RXL) == []
    # The check itself: a decide module reaching up, a root module, a relative import.
    (tmp_path / "decide").mkdir()
    (tmp_path / "decide" / "model.py").write_text(
        "from rxl.decide import topology\n"
        "def f():\n    from rxl.verify import parse\n")
    (tmp_path / "guest").mkdir()
    (tmp_path / "guest" / "image.py").write_text("from ..tree import build\nimport rxl.paths\n")
    (tmp_path / "extra.py").write_text("")
    assert layout_violations(tmp_path) == [
        "decide/model.py:3: decide may not import rxl.verify",
        "extra.py: a module at the root; put it in a package",
        "guest/image.py:1: guest may not import rxl.tree",
    ]


def test_no_python_module_over_400_lines():
    sizes = {str(p.relative_to(RXL)): len(p.read_text().splitlines())
             for p in RXL.rglob("*.py")}
    assert len(sizes) > 30  # the walk found the harness
    assert {p: n for p, n in sizes.items() if n > MAX_LINES} == {}

"""YAML files the harness reads: PyYAML's safe loader, duplicate keys refused."""

from __future__ import annotations

from typing import Any, Callable, Dict, List


def read_yaml(text: str, path: str, error: Callable[[List[str], str], Exception]) -> Any:
    """``text`` (the contents of ``path``) as YAML, safe types only.

    A key given twice in one mapping, which PyYAML would settle silently by
    keeping the last, raises ``error(lines, path)``, one line per such key
    (``PATH: line N: 'KEY' given again (first on line M); ...``). Raises
    yaml.YAMLError for text that is not YAML.
    """
    import yaml

    class Loader(yaml.SafeLoader):
        """SafeLoader that records duplicated mapping keys."""

    dups: List[str] = []

    def mapping(loader, node, deep=False):
        seen: Dict[Any, int] = {}
        for knode, _ in node.value:
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
        return yaml.SafeLoader.construct_mapping(loader, node, deep)

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    loader = Loader(text)
    try:
        doc = loader.get_single_data()
    finally:
        loader.dispose()
    if dups:
        raise error(dups, path)
    return doc

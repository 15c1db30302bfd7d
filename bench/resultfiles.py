"""The results files of bench/results/, read so that a missing file or field says which.

Every table on the docs' pages is rendered from these files (bench/report.py); a block that needs
something a file lacks must fail with the file's name and the field's path, never render a blank.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator


class MissingResult(Exception):
    """A results file, or a field in one, that a block needs."""


# -- reading the results -------------------------------------------------------------------------

class Node:
    """A dict or list of a results file that knows where it is. ``node[key]`` is the value (a Node
    for a dict or list) and raises MissingResult when the key is absent or its value null;
    ``node.get(key)`` allows both."""

    __slots__ = ("_value", "_file", "_path")

    def __init__(self, value: Any, file: str, path: str = "") -> None:
        self._value, self._file, self._path = value, file, path

    def _wrap(self, value: Any, key: Any) -> Any:
        path = f"{self._path}[{key}]" if isinstance(key, int) else (f"{self._path}.{key}" if self._path else key)
        return Node(value, self._file, path) if isinstance(value, (dict, list)) else value

    def __getitem__(self, key: Any) -> Any:
        try:
            value = self._value[key]
        except (KeyError, IndexError, TypeError):
            value = None
        if value is None:
            where = f"{self._path}.{key}" if self._path else str(key)
            raise MissingResult(f"bench/results/{self._file}.json has no {where} "
                                f"(rerun: python -m bench --only {self._file})")
        return self._wrap(value, key)

    def get(self, key: Any, default: Any = None) -> Any:
        value = self._value.get(key) if isinstance(self._value, dict) else None
        return default if value is None else self._wrap(value, key)

    def __contains__(self, key: Any) -> bool:
        return isinstance(self._value, dict) and self._value.get(key) is not None

    def __iter__(self) -> Iterator[Any]:
        if isinstance(self._value, dict):
            return iter(self._value)
        return (self._wrap(v, i) for i, v in enumerate(self._value))

    def __len__(self) -> int:
        return len(self._value)

    def items(self) -> Iterator[tuple[str, Any]]:
        return ((k, self[k]) for k in self._value)

    def plain(self) -> Any:
        return self._value


class Results:
    """The results files by benchmark name: ``results["replication"]`` is that file's Node."""

    def __init__(self, files: dict[str, Any]) -> None:
        self._files = files

    @classmethod
    def load(cls, folder: Path) -> Results:
        """Every full run's file in ``folder``; a smoke run's (``NAME-quick.json``) are left out."""
        files = sorted(folder.glob("*.json"))
        return cls({p.stem: json.loads(p.read_text()) for p in files if not p.stem.endswith("-quick")})

    def __getitem__(self, name: str) -> Node:
        if name not in self._files:
            raise MissingResult(f"bench/results/{name}.json is missing (run: python -m bench --only {name})")
        return Node(self._files[name], name)

"""The SQS service model (vendored from botocore, see ``_vendor_model``), as light shape objects.

Both protocols walk it: JSON input is validated against it, Query input is decoded by it, and
Query output is encoded by it. What is specific to an action lives in ``requests``/``responses``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

XML_NAMESPACE = "http://queue.amazonaws.com/doc/2012-11-05/"


@dataclass(frozen=True, slots=True, eq=False)
class Shape:
    name: str
    type: str                              # structure | list | map | string | integer | long | boolean | blob
    # a reference's traits are folded into a copy of the shape, as botocore does
    location_name: str | None = None
    flattened: bool = False
    members: dict[str, "Shape"] = field(default_factory=dict)
    required: frozenset[str] = frozenset()
    member: "Shape | None" = None          # list element
    key: "Shape | None" = None             # map key
    value: "Shape | None" = None           # map value


@dataclass(frozen=True, slots=True)
class Operation:
    name: str
    input: Shape
    output: Shape | None
    result_wrapper: str | None


class ServiceModel:
    def __init__(self, raw: dict):
        self._raw = raw["shapes"]
        self.namespace: str = raw["metadata"].get("xmlNamespace", XML_NAMESPACE)
        self.target_prefix: str = raw["metadata"]["targetPrefix"]
        self.operations: dict[str, Operation] = {}
        for name, op in raw["operations"].items():
            out = op.get("output")
            self.operations[name] = Operation(
                name,
                self._resolve(op["input"]),
                self._resolve(out) if out else None,
                out.get("resultWrapper") if out else None,
            )

    def _resolve(self, ref: dict) -> Shape:
        name = ref["shape"]
        raw = self._raw[name]
        t = raw["type"]
        kw: dict = dict(
            name=name,
            type=t,
            location_name=ref.get("locationName"),
            flattened=bool(ref.get("flattened") or raw.get("flattened")),
        )
        if t == "structure":
            kw["members"] = {m: self._resolve(r) for m, r in raw.get("members", {}).items()}
            kw["required"] = frozenset(raw.get("required", ()))
        elif t == "list":
            kw["member"] = self._resolve(raw["member"])
        elif t == "map":
            kw["key"] = self._resolve(raw["key"])
            kw["value"] = self._resolve(raw["value"])
        return Shape(**kw)


@cache
def sqs_model() -> ServiceModel:
    path = Path(__file__).with_name("sqs-2012-11-05.json")
    return ServiceModel(json.loads(path.read_text()))

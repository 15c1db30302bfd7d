"""User callables for the simulator: named on the command line, imported here, run in Spark.

``sim run --workload module:function`` (a workload factory, sim/workload.py) and
``analyze DIR --check module:function`` (an extra check over each run's history,
sim/analysis.py) name a callable as ``module:function`` (imported as ``python -m`` would, the
current directory first) or ``path/to/file.py:function``. ``ShippedCallable`` carries it to the
Spark executors as cloudpickle bytes, *by value* for the user's own module: that module need not
be importable on the executors, so it works on any Spark master. Executors need the real
cloudpickle package (an install requirement of elasticmq-py), not the user's module. A helper
the callable uses from another module of the user's that the executors lack must be moved into
the named module.
"""

from __future__ import annotations

import importlib
import importlib.util
import pickle
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

class LoadError(ValueError):
    pass


def load(spec: str) -> tuple[Callable[..., Any], str]:
    """``module:function`` (imported as ``python -m`` would, the current directory first) or
    ``file.py:function``; returns the callable and its module's name."""
    target, sep, name = spec.rpartition(":")
    if not sep or not target or not name.isidentifier():
        raise LoadError(f"{spec!r}: expected module:function or path/to/file.py:function")
    try:
        if target.endswith(".py") or "/" in target:
            path = Path(target).resolve()
            modname = path.stem
            loaded = sys.modules.get(modname)
            if loaded is None or Path(getattr(loaded, "__file__", "") or "").resolve() != path:
                s = importlib.util.spec_from_file_location(modname, path)
                if s is None or s.loader is None:
                    raise LoadError(f"{spec!r}: cannot load {path}")
                loaded = importlib.util.module_from_spec(s)
                sys.modules[modname] = loaded   # cloudpickle pickles by value only a module it finds here
                s.loader.exec_module(loaded)
            module = loaded
        else:
            if "" not in sys.path and str(Path.cwd()) not in sys.path:
                sys.path.insert(0, str(Path.cwd()))
            module = importlib.import_module(target)
    except LoadError:
        raise
    except (ImportError, OSError, SyntaxError) as e:
        raise LoadError(f"{spec!r}: cannot import {target}: {e}") from None
    fn = getattr(module, name, None)
    if not callable(fn):
        raise LoadError(f"{spec!r}: {module.__name__} has no callable {name!r}")
    return fn, module.__name__


@dataclass(frozen=True)
class ShippedCallable:
    """A user's callable as cloudpickle bytes: its own module travels by value. Executors need
    cloudpickle installed (an install requirement), not the user's module."""

    spec: str                       # what the user named, for messages and replay commands
    payload: bytes = field(repr=False)

    @classmethod
    def of(cls, spec: str) -> "ShippedCallable":
        import cloudpickle

        fn, modname = load(spec)
        module = sys.modules[modname]
        target, _, name = spec.rpartition(":")
        if target.endswith(".py") or "/" in target:
            spec = f"{Path(target).resolve()}:{name}"    # a replay command works from anywhere
        # the project itself is installed on the executors (the simulator runs there): by reference
        ours = modname.split(".")[0] in ("sim", "cluster", "storage", "elasticmq_py")
        if not ours:
            cloudpickle.register_pickle_by_value(module)
        try:
            payload = cloudpickle.dumps(fn)
        finally:
            if not ours:
                cloudpickle.unregister_pickle_by_value(module)
        return cls(spec, payload)

    def get(self) -> Callable[..., Any]:
        fn = _loaded.get(self.payload)
        if fn is None:
            fn = _loaded[self.payload] = pickle.loads(self.payload)
        return fn


# Unpickled callables, per executor process: a task runs many seeds with one workload.
_loaded: dict[bytes, Callable[..., Any]] = {}

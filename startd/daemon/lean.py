"""What ``startd run`` keeps out of its memory: modules its libraries import for a feature the daemon never
uses. A pool runs a hundred daemons on one machine, and each module is paid a hundred times over.

* ``rich`` (and pygments): structlog imports it, when it is installed, to render tracebacks the daemon
  formats as plain text anyway (format_exc_info runs before its renderers).
* ``urllib.request`` (with http.client and the email package): paho-mqtt reads the proxy settings with it,
  only when PySocks is installed. It stays a stand-in until one of its names is used.
* ``importlib.metadata`` (with zipfile, csv and the email package): pydantic lists the ``pydantic`` entry
  points of the installed distributions, its plugins, when it builds the first model. The stand-in answers
  that one question itself when no distribution on the path can declare such a plugin; any other use, or
  a path where one might, loads the module itself and asks it.

Nothing changes but when a module is loaded: a stand-in becomes the module itself at its first use.
"""

from __future__ import annotations

import importlib
import os
import sys
import types
from typing import Any

__all__ = ["keep_out", "Deferred"]


class Deferred(types.ModuleType):
    """A module's stand-in in ``sys.modules``: importing it costs nothing; the first name looked up loads
    the module itself, which then takes the stand-in's place (and the stand-in forwards to it)."""

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)  # the import system's questions (__path__, __file__...): no load
        return getattr(self._load(), attr)

    def _load(self) -> types.ModuleType:
        name = self.__name__
        if sys.modules.get(name) is self:
            del sys.modules[name]
        real = importlib.import_module(name)  # sets the parent package's attribute to the module too
        own = {k: v for k, v in self.__dict__.items() if k not in ("__name__", "__doc__")}
        self.__dict__.update(real.__dict__)
        self.__dict__.update(own)  # what the stand-in answers itself, for the holders of the stand-in
        return real


def _defer(name: str, **own: Any) -> None:
    if name in sys.modules:
        return
    stand_in = Deferred(name)
    stand_in.__dict__.update(own)
    parent, _, child = name.rpartition(".")
    sys.modules[name] = stand_in
    if parent:
        setattr(importlib.import_module(parent), child, stand_in)


def _no_distribution_declares(group: str) -> bool:
    """True only when no distribution importlib.metadata would find can declare entry points of ``group``:
    no finder but the standard one lists distributions, no entry of ``sys.path`` is an archive, and no
    ``entry_points.txt`` of a ``*.dist-info``/``*.egg-info`` directory (or an egg's ``EGG-INFO``) names it."""
    from importlib.machinery import PathFinder

    if any(f is not PathFinder and getattr(f, "find_distributions", None) is not None for f in sys.meta_path):
        return False
    for entry in sys.path:
        root = entry or "."
        try:
            children = os.listdir(root)
        except NotADirectoryError:
            return False  # an archive on the path: importlib.metadata reads it
        except (OSError, TypeError, ValueError):
            continue
        egg = os.path.basename(entry).lower().endswith(".egg")
        for child in children:
            low = child.lower()
            if not (low.endswith((".dist-info", ".egg-info")) or (egg and low == "egg-info")):
                continue
            try:
                with open(os.path.join(root, child, "entry_points.txt"), "rb") as f:
                    if group.encode() in f.read():
                        return False
            except OSError:
                continue
    return True


def _entry_points(**params: Any) -> Any:
    """importlib.metadata.entry_points, answered without the module for pydantic's question when no
    distribution can declare a pydantic plugin (an empty selection, as the module would give)."""
    if params == {"group": "pydantic"} and _no_distribution_declares("pydantic"):
        return ()
    stand_in = sys.modules.get("importlib.metadata")
    real = stand_in._load() if isinstance(stand_in, Deferred) else importlib.import_module("importlib.metadata")
    return real.entry_points(**params)


def keep_out() -> None:
    """Before the daemon is imported (and only in the daemon's process): the stand-ins above."""
    if "structlog" not in sys.modules:
        sys.modules.setdefault("rich", None)  # type: ignore[arg-type]
    _defer("urllib.request")
    _defer("importlib.metadata", entry_points=_entry_points)

"""The macro table of a read configuration and its lookups: HTCondor's MACRO_SET, ``insert_macro``,
``lookup_macro`` and ``param()``.

:class:`Config` holds the raw definitions by upper-case name, with the built-in defaults table
consulted last. Definitions are stored raw, with only self-references expanded (``X = $(X) more``
sees the previous ``X``); every other reference is expanded when the value is read.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping

from .errors import ConfigError
from .expand import Expander
from .knobs import Definition

if TYPE_CHECKING:
    from .settings import StartdSettings

SUBSYSTEM = "STARTD"
_IDCHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./")

DETECTED = "<Detected>"
DEFAULT = "<Default>"
ENVIRONMENT = "<Environment>"
#: where a knob the daemon settled itself comes from (a directory it used instead of an unwritable one)
FIXED = "<Daemon>"


def load_defaults() -> dict[str, str]:
    """The built-in defaults table (upper-case name -> raw text)."""
    from .defaults import DEFAULTS

    return {k.upper(): v for k, v in DEFAULTS.items()}


# ----------------------------------------------------------------------------------------------
# the configuration


@dataclass
class Config:
    """A read configuration. Build it with :func:`startd.config.load`.

    ``get(NAME)`` expands lazily; ``source(NAME)`` says where the winning definition is.
    """

    subsystem: str = SUBSYSTEM
    localname: str | None = None
    table: dict[str, Definition] = field(default_factory=dict)
    defaults: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    random_cache: dict[str, str] = field(default_factory=dict)
    rng: random.Random = field(default_factory=random.Random)
    origin: tuple[str | None, str | None] = (None, None)
    #: runtime configuration read after the files and the environment (a ``reconfig`` command's text)
    runtime: str = ""
    #: knobs the daemon settled itself, read after everything else (see :func:`startd.config.load`)
    fixed: dict[str, str] = field(default_factory=dict)
    _settings: StartdSettings | None = None

    # -- lookup -------------------------------------------------------------------------------

    def _prefixes(self) -> list[str]:
        out = []
        if self.localname:
            out.append(self.localname.upper())
        if self.subsystem and self.subsystem.upper() not in out:
            out.append(self.subsystem.upper())
        return out

    def lookup_definition(self, name: str) -> Definition | None:
        """The definition a reference to ``name`` resolves to (``<Default>`` ones included)."""
        key = name.upper()
        for prefix in self._prefixes():
            d = self.table.get(f"{prefix}.{key}")
            if d is not None:
                return d
            dv = self.defaults.get(f"{prefix}.{key}")
            if dv is not None:
                return Definition(f"{prefix}.{name}", dv, DEFAULT)
        d = self.table.get(key)
        if d is not None:
            return d
        dv = self.defaults.get(key)
        if dv is not None:
            return Definition(name, dv, DEFAULT)
        return None

    def raw(self, name: str) -> str | None:
        """The unexpanded value of ``name`` (after subsystem and default resolution), or None."""
        d = self.lookup_definition(name)
        return None if d is None else d.raw

    def _expander(self) -> Expander:
        return Expander(self.raw, self.env, self.random_cache, self.rng)

    def expand(self, text: str, scope: str = "") -> str:
        """Expand the macros in ``text`` against this configuration."""
        return self._expander().expand(text, scope=scope)

    def get(self, name: str, default: str | None = None) -> str | None:
        """The fully expanded value of ``name`` as condor_config_val prints it; ``default`` when undefined.

        Like HTCondor's ``param()``, a knob defined as empty counts as not defined.
        """
        d = self.lookup_definition(name)
        if d is None:
            return default
        try:
            value = self._expander().expand(d.raw, scope=name.upper())
        except ConfigError as exc:
            if exc.file is None and d.line > 0:
                raise ConfigError(f"{name}: {exc.message}", d.file, d.line) from exc
            raise
        return value if value != "" else default

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def source(self, name: str) -> str | None:
        """``file:line`` of the definition that won, ``<Default>``/``<Detected>``/``<Environment>``, or None."""
        d = self.lookup_definition(name)
        return None if d is None else d.source

    def defined_names(self) -> list[str]:
        """Names defined by files, the environment and the host (not the defaults table), as written."""
        return [d.name for d in self.table.values()]

    def names(self) -> list[str]:
        """Every knob name with a value: defined ones and the defaults."""
        out = {d.name.upper(): d.name for d in self.table.values()}
        for k in self.defaults:
            out.setdefault(k, k)
        return sorted(out.values(), key=str.upper)

    def settings(self) -> StartdSettings:
        """The typed view (:class:`startd.config.settings.StartdSettings`), built once."""
        if self._settings is None:
            from .settings import build_settings

            self._settings = build_settings(self)
        return self._settings

    # -- definition -----------------------------------------------------------------------------

    def define(self, name: str, value: str, file: str, line: int) -> None:
        """Insert a definition as HTCondor's insert_macro does (self-references expanded now)."""
        names = [name]
        for prefix in self._prefixes():
            if name.upper().startswith(prefix + ".") and len(name) > len(prefix) + 1:
                names.append(name[len(prefix) + 1:])
                break
        value = self._expander().expand_self(value, names)
        key = name.upper()
        existing = self.table.get(key)
        if existing is None and "." not in name:
            dv = self.defaults.get(key)
            # a value equal to the default is not stored, so its source stays <Default>
            if dv is not None and (dv == value or (dv.lower() == value.lower() and dv.lower() in ("true", "false"))):
                return
        self.table[key] = Definition(name if existing is None else existing.name, value, file, line)

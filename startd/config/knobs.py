"""A knob's definition, and what the typed readers need of a configuration.

The typed readers (:mod:`startd.config.settings`, :mod:`startd.config.slottypes`) read a
:class:`startd.config.macro_set.Config`, and ``Config.settings()`` calls them. They are typed against
:class:`Knobs`, the part of ``Config`` they use, so that neither needs to import the module that
calls it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass
class Definition:
    """One knob as the configuration defines it: raw value and where it was set."""

    name: str
    raw: str
    file: str
    line: int = 0

    @property
    def source(self) -> str:
        return f"{self.file}:{self.line}" if self.line > 0 else self.file


class Knobs(Protocol):
    """The lookups of a read configuration that the typed readers use (``Config`` has them)."""

    @property
    def table(self) -> dict[str, Definition]:
        """Every definition read, by upper-case name."""
        ...

    def get(self, name: str, default: str | None = None) -> str | None:
        """The fully expanded value of ``name``; ``default`` when undefined."""
        ...

    def lookup_definition(self, name: str) -> Definition | None:
        """The definition a reference to ``name`` resolves to."""
        ...

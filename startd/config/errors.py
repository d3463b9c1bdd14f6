"""The one exception the configuration reader raises."""

from __future__ import annotations


class ConfigError(ValueError):
    """A configuration that cannot be used, with the place that made it so.

    ``str(err)`` is ``"<file>:<line>: <message>"`` when the place is known, so a command line tool can
    print it as it is. The parts stay available as ``file``, ``line`` and ``message``.
    """

    def __init__(self, message: str, file: str | None = None, line: int | None = None) -> None:
        self.message = message
        self.file = file
        self.line = line
        super().__init__(self._render())

    def _render(self) -> str:
        if self.file is None:
            return self.message
        if self.line is None or self.line <= 0:
            return f"{self.file}: {self.message}"
        return f"{self.file}:{self.line}: {self.message}"

    @property
    def where(self) -> str | None:
        """``file:line`` (or just ``file``) of the error, or None when it has no place."""
        if self.file is None:
            return None
        if self.line is None or self.line <= 0:
            return self.file
        return f"{self.file}:{self.line}"

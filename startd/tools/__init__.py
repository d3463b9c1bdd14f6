"""Administrator tools that work on this machine's files rather than talking to a daemon (``startd token``).

:func:`load_tool_config` reads the configuration the way every client command does: ``-c FILE``, else
``CONDOR_CONFIG`` and the usual places, else only the defaults and the ``_CONDOR_*`` environment.
"""

from __future__ import annotations

from .. import config as _config


def load_tool_config(path: str | None) -> "_config.Config":
    """The configuration a tool reads. Raises :class:`startd.config.ConfigError` for a broken file."""
    if path is not None:
        return _config.load(path)
    if _config.config_path() is not None:
        return _config.load()
    return _config.load(text="")

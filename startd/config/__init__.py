"""HTCondor's configuration language, as HTCondor 25 reads it.

Public API::

    from startd import config
    conf = config.load("/etc/condor/condor_config")     # or config.load(text="START = True\\n")
    conf.get("START")          # expanded value as condor_config_val prints it; None when not defined
    conf.source("START")       # "file:line" of the winning definition, or "<Default>"/"<Detected>"/"<Environment>"
    conf.raw("START")          # the unexpanded value
    conf.settings()            # typed view: startd.config.settings.StartdSettings (pydantic)
    new = config.reload(conf)  # read the same source again; raises ConfigError and leaves `conf` as it was

``load()`` with neither a path nor text reads ``$CONDOR_CONFIG`` (``ONLY_ENV`` means no file), then
``/etc/condor/condor_config``. A broken file raises :class:`ConfigError` naming the file and line;
nothing half-read is returned. Loading also builds the typed view, so a knob of the wrong type
(``UPDATE_INTERVAL = soon``) fails at load too.

Templates for ``use CATEGORY : NAME`` are the files ``policies/<category>/<name>.config`` of the
repository (``STARTD_POLICY_DIR`` overrides the directory).
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Mapping

from .errors import ConfigError
from .knobs import Definition
from .macro_set import DEFAULT, DETECTED, ENVIRONMENT, Config
from .parse_macros import policy_dir

__all__ = ["load", "reload", "Config", "ConfigError", "Definition", "config_path", "policy_dir",
           "DEFAULT", "DETECTED", "ENVIRONMENT"]

_FALLBACK_PATHS = ("/etc/condor/condor_config", "/usr/local/etc/condor_config")


def config_path(env: Mapping[str, str] | None = None) -> str | None:
    """The file ``load()`` reads when given nothing: ``$CONDOR_CONFIG`` or the usual places; None for ONLY_ENV."""
    environ = os.environ if env is None else env
    path = environ.get("CONDOR_CONFIG")
    if path:
        return None if path == "ONLY_ENV" else path
    for p in _FALLBACK_PATHS:
        if Path(p).is_file():
            return p
    return None


def load(path: str | os.PathLike[str] | None = None, *, text: str | None = None, subsystem: str = "STARTD",
         localname: str | None = None, env: Mapping[str, str] | None = None,
         defaults: Mapping[str, str] | None = None, seed: int | None = None,
         random_cache: dict[str, str] | None = None, validate: bool = True, runtime: str | None = None,
         fixed: Mapping[str, str] | None = None) -> Config:
    """Read a configuration: the host's detected macros, the defaults, the file (or ``text``) with its
    includes, templates and local files, then the ``_CONDOR_<NAME>`` environment overrides.

    ``env`` replaces ``os.environ`` (for ``$ENV()``, ``_CONDOR_*`` and ``CONDOR_CONFIG``); ``defaults``
    replaces the built-in defaults table; ``seed`` fixes ``$RANDOM_*`` choices; ``random_cache`` carries
    earlier random choices over (they stay fixed for a daemon's life); ``runtime`` is runtime configuration
    (``condor_config_val -rset``, a ``reconfig`` command's text), read after everything else and kept
    for later reloads; ``fixed`` are knobs the daemon settled itself (the directories it had to use), which
    beat even that and are kept for later reloads too. Raises :class:`ConfigError`.
    """
    from .reader import read

    rng = random.Random(seed) if seed is not None else None
    if text is None:
        if path is None:
            path = config_path(env)
            if path is None and (env if env is not None else os.environ).get("CONDOR_CONFIG") != "ONLY_ENV":
                raise ConfigError("no configuration file: set CONDOR_CONFIG or pass a path")
    conf = read(str(path) if path is not None else None, text, subsystem=subsystem, localname=localname,
                env=env, defaults=defaults, random_cache=random_cache, rng=rng, runtime=runtime, fixed=fixed)
    conf.origin = (None if path is None else str(path), text)
    conf.runtime = runtime or ""
    conf.fixed = dict(fixed or {})
    if validate:
        conf.settings()
    return conf


def reload(previous: Config, *, path: str | os.PathLike[str] | None = None, text: str | None = None,
           env: Mapping[str, str] | None = None, runtime: str | None = None) -> Config:
    """Read the configuration again (SIGHUP, ``reconfig``) and return the new one.

    ``previous`` is never changed: on a :class:`ConfigError` the caller keeps using it. Random choices
    made for ``previous`` are carried over so ``$RANDOM_INTEGER`` stays fixed for the daemon's life, and
    so is its runtime configuration (HTCondor keeps runtime settings until the daemon restarts);
    ``runtime`` given replaces it.
    """
    origin = getattr(previous, "origin", (None, None))
    if path is None and text is None:
        path, text = origin
    if runtime is None:
        runtime = getattr(previous, "runtime", "") or None
    return load(path, text=text, subsystem=previous.subsystem, localname=previous.localname, env=env,
                defaults=previous.defaults, random_cache=dict(previous.random_cache), runtime=runtime,
                fixed=getattr(previous, "fixed", None))

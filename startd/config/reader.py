"""Reading a whole configuration into a :class:`~startd.config.macro_set.Config`: HTCondor's
``real_config`` and ``process_locals``, and the ``_CONDOR_<NAME>`` environment overrides.

The order of reading is HTCondor's: the detected host macros, the built-in defaults (consulted last at
lookup), the file with its includes and templates in order, ``LOCAL_CONFIG_DIR`` then
``LOCAL_CONFIG_FILE``, and finally the ``_CONDOR_<NAME>`` environment overrides. Definitions are
stored raw, with only self-references expanded (``X = $(X) more`` sees the previous ``X``); every
other reference is expanded when the value is read.
"""

from __future__ import annotations

import os
import random
import re
from pathlib import Path
from typing import Mapping

from . import host
from .errors import ConfigError
from .knobs import Definition
from .macro_set import (
    _IDCHARS,
    DEFAULT,
    DETECTED,
    ENVIRONMENT,
    FIXED,
    SUBSYSTEM,
    Config,
    load_defaults,
)
from .parse_macros import _Frame, _Parser

_DEFAULT_EXCLUDE = (r"^((\..*)|(.*\.pl)|(.*\.py)|(.*\.sh)|(.*~)|(#.*)|(.*\.rpmsave)|(.*\.rpmnew)"
                    r"|(.*\.dpkg-old)|(.*\.dpkg-dist)|(.*\.cfsaved))$")
# _CONDOR_ variables that carry process state between HTCondor daemons, not configuration.
_ENV_NOT_CONFIG = ("ANCESTOR_", "INHERIT", "PRIVATE_INHERIT", "REMOTE_SPOOL_DIR", "STARTD_ATTRS_FROM_ENV")


# ----------------------------------------------------------------------------------------------
# the whole reading


def _split_list(value: str) -> list[str]:
    return [p for p in re.split(r"[,\s]+", value) if p]


def _process_locals(parser: _Parser, conf: Config) -> None:
    """LOCAL_CONFIG_DIR (sorted, filtered by LOCAL_CONFIG_DIR_EXCLUDE_REGEXP), then LOCAL_CONFIG_FILE."""
    dirs = conf.get("LOCAL_CONFIG_DIR")
    if dirs:
        pattern = conf.get("LOCAL_CONFIG_DIR_EXCLUDE_REGEXP") or _DEFAULT_EXCLUDE
        try:
            exclude = re.compile(pattern)
        except re.error:
            exclude = re.compile(_DEFAULT_EXCLUDE)
        src = conf.source("LOCAL_CONFIG_DIR") or DEFAULT
        for d in _split_list(dirs):
            p = Path(d)
            if not p.is_dir():
                continue
            for entry in sorted(p.iterdir(), key=lambda e: e.name):
                if exclude.search(entry.name) or not entry.is_file():
                    continue
                parser.read_file(str(entry), 1, where=_where(src))
    done: set[str] = set()
    while True:
        files = conf.get("LOCAL_CONFIG_FILE")
        if not files:
            return
        src = conf.source("LOCAL_CONFIG_FILE") or DEFAULT
        todo = [f for f in _split_list(files) if f not in done] if "|" not in files else [files.strip()]
        todo = [f for f in todo if f not in done]
        if not todo:
            return
        for f in todo:
            done.add(f)
            before = conf.raw("LOCAL_CONFIG_FILE")
            require = conf.get("REQUIRE_LOCAL_CONFIG_FILE")
            must = True if require is None else (require.strip().lower() not in ("false", "no", "f", "n", "0"))
            parser.read_file(f, 1, must_exist=must, where=_where(src))
            if conf.raw("LOCAL_CONFIG_FILE") != before:
                break  # the file named more local files: start over with the new list


def _where(source: str) -> tuple[str, int] | None:
    if ":" in source and source.rsplit(":", 1)[1].isdigit():
        f, l = source.rsplit(":", 1)
        return f, int(l)
    return None


def _apply_environment(conf: Config, env: Mapping[str, str]) -> None:
    for key in sorted(env):
        if not key.upper().startswith("_CONDOR_"):
            continue
        name = key[len("_CONDOR_"):]
        if not name or any(name.upper().startswith(p) for p in _ENV_NOT_CONFIG):
            continue
        if any(c not in _IDCHARS for c in name):
            continue
        conf.define(name, env[key], ENVIRONMENT, 0)


def _validate(conf: Config) -> None:
    """Expand every defined knob once, so loops and bad macro functions fail at load, at their line."""
    for d in list(conf.table.values()):
        if "$" not in d.raw:
            continue
        try:
            conf._expander().expand(d.raw, scope=d.name.upper())
        except ConfigError as exc:
            f = d.file if d.line > 0 else (d.file if d.file != ENVIRONMENT else f"_CONDOR_{d.name}")
            raise ConfigError(f"{d.name}: {exc.message}", f, d.line if d.line > 0 else None) from exc


def read(path: str | None = None, text: str | None = None, *, subsystem: str = SUBSYSTEM,
         localname: str | None = None, env: Mapping[str, str] | None = None,
         defaults: Mapping[str, str] | None = None, random_cache: dict[str, str] | None = None,
         rng: random.Random | None = None, text_name: str = "<string>", runtime: str | None = None,
         fixed: Mapping[str, str] | None = None) -> Config:
    """Read a configuration from a file or from text; see :func:`startd.config.load`. ``runtime`` (the
    runtime configuration a ``reconfig`` command carried) is read last, after the ``_CONDOR_*``
    environment: real_config ends with process_dynamic_configs, so a runtime setting beats both the files
    and the environment. ``fixed`` (knob -> value) is what the daemon itself settled and beats everything:
    the directories it had to use instead of unwritable ones, so every knob built on them follows."""
    environ = dict(os.environ if env is None else env)
    conf = Config(subsystem=subsystem, localname=localname,
                  defaults=load_defaults() if defaults is None else {k.upper(): v for k, v in defaults.items()},
                  env=environ, random_cache={} if random_cache is None else random_cache,
                  rng=rng or random.Random())
    for name, value in host.host_macros(subsystem).items():
        conf.table[name.upper()] = Definition(name, value, DETECTED)
    parser = _Parser(conf)
    if text is not None:
        parser.parse(text, _Frame(text_name), 0)
    elif path is not None:
        # HTCondor defines CONFIG_ROOT as the directory of the top-level configuration file, so a
        # configuration can name files beside itself.
        root = os.path.dirname(os.path.abspath(path))
        conf.table["CONFIG_ROOT"] = Definition("CONFIG_ROOT", root, DETECTED)
        parser.read_file(path, 0)
    _process_locals(parser, conf)
    _apply_environment(conf, environ)
    if runtime:
        parser.parse(runtime, _Frame("<runtime>"), 0)
    for name, value in (fixed or {}).items():
        conf.define(name, value, FIXED, 0)
    _validate(conf)
    return conf

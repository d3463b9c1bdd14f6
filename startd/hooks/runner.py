"""Carrying out the engine's :class:`~startd.engine.events.RunHook` outputs.

:class:`HookRunner` runs each hook as :func:`startd.hooks.process.run_program` does (no shell, a
timeout, capped output, the process group killed when it overruns), logs its standard error and any
failure with the reason, and answers the engine with a :class:`~startd.engine.events.HookResult` when
the engine waits for one. A hook that hangs, crashes, prints garbage or megabytes, or is missing only
ever costs its own slot that one answer.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any, Callable

from ..engine.events import HookResult, RunHook
from .process import DEFAULT_MAX_OUTPUT, ProcessResult, run_program

log = logging.getLogger("startd.hooks")

EngineFeed = Callable[[Any], None]


class HookRunner:
    """Runs hooks for the engine. ``engine_feed`` receives each HookResult; ``clock`` gives ``now``."""

    def __init__(self, engine_feed: EngineFeed, *, clock: Callable[[], float] = time.time,
                 max_output: int = DEFAULT_MAX_OUTPUT, env: dict[str, str] | None = None) -> None:
        self._feed = engine_feed
        self._clock = clock
        self._max_output = max_output
        self._env = env
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    def submit(self, out: RunHook) -> asyncio.Task[None] | None:
        """Start running the hook ``out`` asks for; returns its task (None once shut down)."""
        if self._closed:
            return None
        task = asyncio.get_running_loop().create_task(self._run(out), name=f"hook {out.hook} {out.slot}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _environment(self, out: RunHook) -> dict[str, str]:
        env = dict(os.environ if self._env is None else self._env)
        # what HookClientMgr publishes: which slot and which hook this is
        env["_CONDOR_SLOT"] = out.slot
        env["_CONDOR_HOOK_KEYWORD"] = out.keyword
        env["_CONDOR_HOOK_NAME"] = out.hook
        return env

    async def _run(self, out: RunHook) -> None:
        name = f"{out.keyword}_HOOK_{out.hook} ({out.path}) for {out.slot}"
        try:
            res = await run_program(out.path, out.args, stdin=out.stdin, env=self._environment(out),
                                    timeout=out.timeout, max_output=self._max_output)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # never let one hook take the daemon down
            log.exception("%s could not be run: %s", name, exc)
            res = ProcessResult(path=out.path, args=list(out.args), error=f"{out.path}: {exc}")
        self._log(name, res)
        if not out.request:
            return
        ad = None
        bad: list[tuple[str, str]] = []
        if not res.error:
            from .protocol import parse_hook_ad

            ad, bad = parse_hook_ad(res.stdout)
            for line, why in bad:
                log.warning("%s printed a line that is not an attribute, ignored: %r (%s)", name, line, why)
        result = HookResult(now=self._clock(), request=out.request, hook=out.hook, slot=out.slot, ad=ad,
                            exit_code=res.exit_code, signal=res.signal, error=res.error,
                            bad_lines=tuple(b[0] for b in bad))
        try:
            self._feed(result)
        except Exception:
            log.exception("the engine refused the result of %s", name)

    @staticmethod
    def _log(name: str, res: ProcessResult) -> None:
        if res.stderr.strip():
            log.warning("%s printed to stderr: %s", name, res.stderr.strip())
        if res.error:
            log.error("%s failed: %s", name, res.error)
        elif res.exit_code != 0:
            log.warning("%s %s", name, res.describe())
        else:
            log.debug("%s exited with status 0 after %.2f s", name, res.duration)

    @property
    def running(self) -> int:
        """How many hooks are running now."""
        return len(self._tasks)

    async def shutdown(self) -> None:
        """Kill every running hook (its whole process group) and wait until each is reaped."""
        self._closed = True
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        for t in tasks:
            try:
                await t
            except BaseException:
                pass

"""Fixtures of the CEDAR tests: a listener with a stand-in daemon, the wheel as a client, a relay, and
``startd run`` subprocesses.

``cedar_server(config_text="", **server_kwargs)`` starts a listener (stopped after the test);
``client`` is the wheel with an empty token directory and a configuration of its own;
``daemon_process(config_path)`` starts ``startd run`` (killed by its PID after the test, with its jobs).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, Iterator

import pytest

# the daemon tests' helpers (tests/daemon/daemonkit.py) start and drive `startd run`
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "daemon"))

from cedarkit import Client, FakeBackend, Relay, ServerThread, security  # noqa: E402
from daemonkit import DaemonProcess  # noqa: E402

from startd.starter.state import reap_leftovers  # noqa: E402


@pytest.fixture
def cedar_server() -> Iterator[Callable[..., ServerThread]]:
    started: list[ServerThread] = []

    def start(config_text: str = "", backend: FakeBackend | None = None, **kwargs: Any) -> ServerThread:
        s = ServerThread(backend or FakeBackend(), security(config_text), **kwargs)
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()


@pytest.fixture
def client(tmp_path: Path) -> Client:
    return Client(tmp_path / "client")


@pytest.fixture
def relay() -> Iterator[Callable[[int], Relay]]:
    made: list[Relay] = []

    def start(port: int) -> Relay:
        r = Relay(port)
        made.append(r)
        return r

    yield start
    for r in made:
        r.close()


@pytest.fixture
async def daemon_process() -> AsyncIterator[Callable[..., Awaitable[DaemonProcess]]]:
    started: list[DaemonProcess] = []

    async def start(config_path: Path, name: str = "m1", wait_online: bool = True) -> DaemonProcess:
        p = DaemonProcess(config_path, name)
        started.append(p)
        return await p.start(wait_online)

    yield start
    for p in started:
        await p.kill()
        reap_leftovers(p.spool, timeout=5)

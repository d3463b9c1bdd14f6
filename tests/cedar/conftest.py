"""Fixtures of the CEDAR tests: a listener with a stand-in daemon, the wheel as a client, a relay.

``cedar_server(config_text="", **server_kwargs)`` starts a listener (stopped after the test);
``client`` is the wheel with an empty token directory and a configuration of its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from cedarkit import Client, FakeBackend, Relay, ServerThread, security


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

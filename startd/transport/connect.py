"""Connecting to an MQTT broker (aiomqtt): the protocol probe and the connection both sides use.

Protocol: MQTT 5 when the broker speaks it, else 3.1.1 (amqtt, the embedded broker, speaks only 3.1.1).
Our sockets set TCP_NODELAY, so a command's round trip on the embedded broker takes about a millisecond.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import uuid
from collections.abc import AsyncIterator

import aiomqtt
import structlog

from .settings import MqttSettings

log = structlog.get_logger("startd.transport")

#: every publication and subscription is at least once: the replies and events that matter, the retained
#: ads and status, and the subscriptions to commands (aiomqtt's default would be 0, at most once)
QOS = 1
#: how long a graceful MQTT DISCONNECT may take before the socket is simply closed
DISCONNECT_TIMEOUT = 1.0
# MQTT 5 CONNACK reason 132 / MQTT 3.1.1 return code 1: the broker does not speak the protocol version asked
_UNSUPPORTED_PROTOCOL = {1, 132}


def _is_unsupported_protocol(exc: BaseException) -> bool:
    rc = getattr(exc, "rc", None)
    value = getattr(rc, "value", rc)
    return isinstance(value, int) and value in _UNSUPPORTED_PROTOCOL


def make_client(settings: MqttSettings, *, protocol: str, identifier: str | None = None,
                will: aiomqtt.Will | None = None, timeout: float = 10.0, inflight: int | None = None) -> aiomqtt.Client:
    """An aiomqtt client for ``settings`` speaking ``protocol`` ("5" or "3.1.1"); ``inflight``: how many
    QoS 1 publications its owner keeps awaiting their acknowledgement at once (paho's window, and the
    number past which aiomqtt warns of pending calls, a few subscriptions above it)."""
    client = aiomqtt.Client(
        settings.host, settings.port,
        username=settings.username, password=settings.password,
        identifier=identifier,
        protocol=aiomqtt.ProtocolVersion.V5 if protocol == "5" else aiomqtt.ProtocolVersion.V311,
        will=will,
        keepalive=settings.keepalive,
        timeout=timeout,
        tls_context=settings.ssl_context(),
        tls_insecure=True if settings.tls and settings.tls_insecure else None,
        transport=settings.transport,
        websocket_path=settings.websocket_path,
        # small request/reply messages: without TCP_NODELAY, Nagle and delayed ACKs add ~40 ms a hop
        socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)],
        max_inflight_messages=inflight,
    )
    if inflight is not None:
        client.pending_calls_threshold = inflight + 10
    return client


async def probe_protocol(settings: MqttSettings, timeout: float = 5.0) -> str:
    """"5" when the broker speaks MQTT 5, else "3.1.1".

    The probe is a bare MQTT 5 CONNECT (no will, no credentials): a 3.1.1-only broker refuses it as an
    unsupported protocol (amqtt misreads a full MQTT 5 CONNECT and waits for bytes that never come, so the
    real connection cannot be the probe). Any other answer, a refusal for want of credentials included,
    comes from a broker that parsed MQTT 5.
    """
    bare = MqttSettings(**{**settings.__dict__, "username": None, "password": None})
    client = make_client(bare, protocol="5", identifier=f"startd-probe-{uuid.uuid4().hex[:8]}",
                         timeout=timeout)
    try:
        await _enter(client)
    except aiomqtt.MqttError as e:
        if _is_unsupported_protocol(e):
            return "3.1.1"
        if getattr(e, "rc", None) is not None:
            return "5"  # refused for another reason: it understood us
        raise
    await close_client(client)
    return "5"


async def _enter(client: aiomqtt.Client) -> None:
    """Connect ``client``; whatever ends the attempt (a refusal, a timeout, a cancellation while a broker
    that accepted the TCP connection never sends its CONNACK), no socket is left open behind it."""
    try:
        await client.__aenter__()
    except BaseException:
        abandon_client(client)
        raise


async def close_client(client: aiomqtt.Client, timeout: float = DISCONNECT_TIMEOUT) -> None:
    """Disconnect gracefully (so the broker does not publish the will) within ``timeout``; past it, or when
    the caller is cancelled meanwhile, the socket is closed. Never raises but the caller's cancellation."""
    try:
        await asyncio.wait_for(client.__aexit__(None, None, None), timeout)
    except TimeoutError:
        log.warning("the broker did not take our DISCONNECT in time; closing the socket", timeout=timeout)
    except Exception as e:  # noqa: BLE001 - a broken connection is what we are closing anyway
        log.debug("disconnect failed; closing the socket", error=repr(e))
    finally:
        abandon_client(client)


def abandon_client(client: aiomqtt.Client) -> None:
    """Close the client's socket now, without a word to the broker (it publishes the will), and release
    what waits on the connection. Idempotent; harmless on a client that disconnected cleanly."""
    # aiomqtt has no public way to drop a connection: this reaches into it (aiomqtt 2.x, paho 2.x)
    paho = getattr(client, "_client", None)
    with contextlib.suppress(Exception):
        if paho is not None:
            paho._reset_sockets()  # closes the socket (unregistering its reader) and paho's socket pair
    disconnected = getattr(client, "_disconnected", None)
    if isinstance(disconnected, asyncio.Future) and not disconnected.done():
        # whoever iterates the client's messages or waits for the disconnection is released
        disconnected.set_result(None)
    lock = getattr(client, "_lock", None)
    if isinstance(lock, asyncio.Lock) and lock.locked():
        lock.release()


@contextlib.asynccontextmanager
async def connect(settings: MqttSettings, *, identifier: str | None = None, will: aiomqtt.Will | None = None,
                  timeout: float = 10.0, protocol: str | None = None,
                  inflight: int | None = None) -> AsyncIterator[tuple[aiomqtt.Client, str]]:
    """Connect (probing the protocol when ``auto``); yields ``(client, protocol)``. Raises
    :class:`aiomqtt.MqttError`."""
    proto = protocol or settings.protocol
    if proto == "auto":
        proto = await probe_protocol(settings, timeout)
    client = make_client(settings, protocol=proto, identifier=identifier, will=will, timeout=timeout,
                         inflight=inflight)
    await _enter(client)
    try:
        yield client, proto
    finally:
        await close_client(client)

"""``STARTD_MQTT_BROKER``: the broker named in the configuration, as HTCondor's ``CONDOR_HOST`` names the
pool's central manager for every daemon and tool (CONTRACTS section 2). The daemon and every client command
read it; ``--broker`` overrides it; a unit file or a container is configured by configuration alone."""

from __future__ import annotations

import json
from pathlib import Path

from daemonkit import DaemonProcess, cli, write_config

from startd import config
from startd.transport.address import configured_broker, resolve_client_target


async def test_the_daemon_uses_the_broker_the_configuration_names(tmp_path: Path, topic_root: str,
                                                                 mosquitto_broker: str) -> None:
    cfg = write_config(tmp_path, topic_root, f"STARTD_MQTT_BROKER = {mosquitto_broker}\n")
    d = await DaemonProcess(cfg, "m1").start()
    try:
        assert d.url == mosquitto_broker  # the address file names the configured broker, no embedded one
        # a client with the same configuration finds it without the address file
        d.address_file.unlink()
        code, out, err = await cli("status", "-c", str(cfg), "--json")
        assert code == 0, err
        assert {ad["Name"].split("@")[0] for ad in json.loads(out)} == {"slot1"}
    finally:
        await d.kill()


async def test_broker_on_the_command_line_overrides_the_configuration(tmp_path: Path, topic_root: str,
                                                                     mosquitto_broker: str) -> None:
    cfg = write_config(tmp_path, topic_root, "STARTD_MQTT_BROKER = mqtt://127.0.0.1:9\n")
    d = await DaemonProcess(cfg, "m1", broker=mosquitto_broker).start()
    try:
        assert d.url == mosquitto_broker
        code, _, err = await cli("status", "-c", str(cfg), "--broker", mosquitto_broker)
        assert code == 0, err
    finally:
        await d.kill()


async def test_embedded_in_the_configuration_starts_the_embedded_broker(tmp_path: Path, topic_root: str) -> None:
    cfg = write_config(tmp_path, topic_root, "STARTD_MQTT_BROKER = embedded\n")
    d = await DaemonProcess(cfg, "m1").start()
    try:
        url = d.url
        assert url is not None and url != "mqtt://127.0.0.1:1883"  # STARTD_BROKER_PORT = 0: a port of its own
        code, out, err = await cli("status", "-c", str(cfg), "--json")  # via the address file
        assert code == 0, err
    finally:
        await d.kill()


async def test_a_bad_broker_knob_stops_the_daemon_with_one_line_naming_it(tmp_path: Path, topic_root: str) -> None:
    cfg = write_config(tmp_path, topic_root, "STARTD_MQTT_BROKER = ftp://host:21\n")
    code, out, err = await cli("run", "-c", str(cfg), "--name", "m1", timeout=30)
    assert code == 2
    line = err.strip().splitlines()[-1]
    assert "STARTD_MQTT_BROKER" in line and f"{cfg}:" in line and "ftp://host:21" in line


def test_a_client_reads_the_knob_before_the_address_file(tmp_path: Path) -> None:
    cfg = tmp_path / "c.config"
    log = tmp_path / "log"
    log.mkdir()
    (log / ".startd_address").write_text("mqtt://127.0.0.1:1999\n")
    cfg.write_text(f"LOG = {log}\nSTARTD_MQTT_BROKER = mqtt://broker.example:1884\n")
    target = resolve_client_target(None, str(cfg))
    assert (target.settings.host, target.settings.port, target.source) == ("broker.example", 1884, "STARTD_MQTT_BROKER")
    assert resolve_client_target("mqtt://127.0.0.1:1885", str(cfg)).settings.port == 1885
    # embedded: the daemon's port is chosen at start, so the client follows the address file
    cfg.write_text(f"LOG = {log}\nSTARTD_MQTT_BROKER = embedded\n")
    assert resolve_client_target(None, str(cfg)).settings.port == 1999
    assert configured_broker(config.load(text="")) is None

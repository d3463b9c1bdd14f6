"""A configured pool signing key is the only one a daemon and its clients use (getTokenSigningKeyPath,
condor_utils/store_cred.cpp, has no fallback), tried against a real ``startd run`` and broker."""

from __future__ import annotations

import json
from pathlib import Path

from daemonkit import DaemonProcess, cli, write_config

from startd import config
from startd.security.keys import find_signing_key, load_signing_key


async def test_a_daemon_whose_configured_key_cannot_be_made_stops_naming_it(tmp_path: Path, topic_root: str) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    cfg = write_config(tmp_path, topic_root, f"SEC_TOKEN_POOL_SIGNING_KEY_FILE = {blocker}/passwords.d/POOL\n")
    code, _, err = await cli("run", "-c", str(cfg), "--name", "m1", timeout=30)
    assert code != 0
    assert f"{blocker}/passwords.d/POOL" in err
    assert "~/.startd" not in err


async def test_the_daemon_and_its_clients_use_the_configured_key_and_no_other(tmp_path: Path, topic_root: str,
                                                                              mosquitto_broker: str) -> None:
    key = tmp_path / "keys" / "POOL"
    cfg = write_config(tmp_path, topic_root, f"SEC_TOKEN_POOL_SIGNING_KEY_FILE = {key}\n"
                                             f"STARTD_MQTT_BROKER = {mosquitto_broker}\n")
    d = await DaemonProcess(cfg, "m1").start()
    try:
        assert key.exists()  # made where configured
        found = find_signing_key(config.load(cfg))
        assert found is not None and found[0] == key and found[1] == load_signing_key(key)
        code, out, err = await cli("drain", "-c", str(cfg), "m1")  # ADMINISTRATOR: signed with that key
        assert code == 0, err
        code, out, err = await cli("status", "-c", str(cfg), "--json")
        assert code == 0 and json.loads(out)[0]["State"] == "Drained", out
    finally:
        await d.kill()

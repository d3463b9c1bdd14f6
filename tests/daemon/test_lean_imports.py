"""``startd run`` loads only what a daemon uses: its process, once it has read its configuration and
handled a signed drain, holds neither the rooms of the other commands (submit, sim, analyze, tools) nor the
libraries only they or a rarer path need (the crypto library and PyJWT until a CEDAR connection or a sealed
reply; urllib.request, importlib.metadata and the email package, which its libraries import for features
it does not use)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from startd.security import tokens
from startd.security.keys import derive_jwt_key
from startd.security.tokens import mint
from startd.security.wire import sign_command

REPO = Path(__file__).resolve().parents[2]
KEY = derive_jwt_key(b"lean daemon pool key" * 3)

NEVER = ["cryptography", "jwt", "rich", "email", "http.client", "zipfile", "csv", "startd.submit", "startd.sim",
         "startd.analyze", "startd.tools"]

SCRIPT = r"""
import json, sys
from startd.daemon.lean import Deferred, keep_out
keep_out()  # what `startd run` does before it imports the daemon
import startd.daemon.shell
from startd.daemon.configuration import load_daemon_config
from startd.security.wire import CommandVerifier
from startd.transport import messages

conf = load_daemon_config(sys.argv[1])
conf.settings()
signed = json.loads(sys.argv[2])
verifier = CommandVerifier(bytes.fromhex(sys.argv[3]), issuer="lean.pool", audience="ep1")
who = verifier.verify(signed, now=signed["auth"]["ts"])
cmd = messages.parse_command(json.dumps({k: v for k, v in signed.items() if k != "auth"}))
assert who.authenticated and isinstance(cmd, messages.DrainCommand), (who, cmd)
messages.make_reply(cmd.request_id, True).model_dump()
deferred = sorted(n for n, m in sys.modules.items() if isinstance(m, Deferred))
print(json.dumps({"modules": sorted(n for n, m in sys.modules.items() if not isinstance(m, Deferred) and m is not None),
                  "deferred": deferred}))
"""


def _modules_of_a_daemon(tmp_path: Path) -> dict[str, list[str]]:
    assert tokens._plain_hmac_key(KEY)
    cfg = tmp_path / "startd.config"
    cfg.write_text(f"LOCAL_DIR = {tmp_path}\nTRUST_DOMAIN = lean.pool\nNUM_CPUS = 8\nNUM_SLOTS = 8\n")
    token = mint(KEY, identity="admin@lean.pool", issuer="lean.pool")
    signed = sign_command({"command": "drain", "request_id": "d1", "how": "graceful"}, token, audience="ep1")
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(cfg), json.dumps(signed), KEY.hex()], cwd=str(REPO),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_daemon_that_handled_a_signed_drain_loads_none_of_what_it_does_not_use(tmp_path: Path) -> None:
    seen = _modules_of_a_daemon(tmp_path)
    loaded = set(seen["modules"])
    assert "startd.daemon.loop" in loaded and "pydantic" in loaded
    assert sorted(m for m in loaded if any(m == n or m.startswith(n + ".") for n in NEVER)) == []
    assert {"urllib.request", "importlib.metadata"} <= set(seen["deferred"])


def test_a_deferred_module_is_the_module_itself_at_its_first_use() -> None:
    script = ("from startd.daemon.lean import keep_out; keep_out()\n"
              "import sys, urllib.request, importlib.metadata as md\n"
              "assert type(urllib.request).__name__ == 'Deferred'\n"
              "assert urllib.request.getproxies() == __import__('urllib.request').request.getproxies()\n"
              "assert type(sys.modules['urllib.request']).__name__ == 'module'\n"
              "assert md.version('pydantic') and md.entry_points(group='pydantic') is not None\n"
              "assert type(sys.modules['importlib.metadata']).__name__ == 'module'\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=str(REPO), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]


def test_pydantic_plugins_are_still_found_where_a_distribution_declares_one(tmp_path: Path) -> None:
    dist = tmp_path / "site" / "someplugin-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: someplugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[pydantic]\nsomeplugin = json:loads\n")
    script = ("import sys; sys.path.insert(0, sys.argv[1])\n"
              "from startd.daemon import lean; lean.keep_out()\n"
              "from importlib.metadata import entry_points\n"
              "eps = entry_points(group='pydantic')\n"
              "assert [e.name for e in eps] == ['someplugin'], eps\n"
              "assert not lean._no_distribution_declares('pydantic')\n")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "site")], cwd=str(REPO), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]

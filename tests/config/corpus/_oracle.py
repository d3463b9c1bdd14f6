"""Run HTCondor's own reader (the htcondor2 bindings) over corpus files; prints JSON.

Input (stdin): JSON list of [path, [knob, ...]]. Output: {path: {"values": {knob: text|None},
"error": str|None}}. Each value is the expanded text HTCondor's param lookup gives (read through a
scratch knob so typed knobs come back as text, as condor_config_val prints them).
"""

from __future__ import annotations

import json
import os
import sys


def main() -> None:
    import htcondor2

    requests = json.load(sys.stdin)
    htcondor2.set_subsystem("STARTD")
    import tempfile

    # an empty file, not ONLY_ENV: after ONLY_ENV the bindings stop reading files on reload
    with tempfile.NamedTemporaryFile("w", suffix=".config", delete=False) as empty:
        pass
    os.environ["CONDOR_CONFIG"] = empty.name
    htcondor2.reload_config()
    os.unlink(empty.name)
    baseline = set(k.upper() for k in htcondor2.param.keys())
    out: dict[str, object] = {}
    for path, knobs in requests:
        os.environ["CONDOR_CONFIG"] = path
        htcondor2.reload_config()
        extra = [k for k in htcondor2.param.keys() if k.upper() not in baseline and k.upper() != "ZZRAW"]
        values: dict[str, str | None] = {}
        for k in list(dict.fromkeys(list(knobs) + extra)):
            htcondor2.param["ZZRAW"] = f"$({k})"
            v = htcondor2.param.get("ZZRAW")
            values[k] = v if v else None
        out[path] = {"values": values, "extra": extra}
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()

"""The development identity provider's signing key, made by whichever process starts first:
processes starting together all end up with the same whole key."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import sys
from pathlib import Path
from adapters.identity.dev_provider import DevIdentityProvider
print(DevIdentityProvider(Path(sys.argv[1])).kid)
"""


def test_processes_starting_together_share_one_whole_key(tmp_path):
    key = tmp_path / "keys" / "dev.pem"
    starting = [
        subprocess.Popen(
            [sys.executable, "-c", SCRIPT, str(key)], stdout=subprocess.PIPE, text=True
        )
        for _ in range(6)
    ]
    kids = {process.communicate(timeout=120)[0].strip() for process in starting}
    assert all(process.returncode == 0 for process in starting)
    assert len(kids) == 1 and "" not in kids
    assert key.stat().st_mode & 0o777 == 0o600
    assert [path.name for path in key.parent.iterdir()] == ["dev.pem"]

"""The curl + openssl examples of docs/server.md, run as printed (only the port is the test server's)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.engine.server.kit import child_env, serving, simple_project, spool_files

DOC = Path(__file__).resolve().parents[3] / "docs" / "server.md"


def example(name: str) -> str:
    text = DOC.read_text(encoding="utf-8")
    match = re.search(rf"<!-- example: {name} -->\n```bash\n(.*?)```", text, re.S)
    assert match, f"example {name} not found in {DOC}"
    return match.group(1)


def _secret(script: str) -> str:
    match = re.search(r"export ROCKY_WEBHOOK_SECRET='([^']+)'", script)
    assert match
    return match.group(1)


@pytest.mark.skipif(not (shutil.which("openssl") and shutil.which("curl")), reason="needs openssl and curl")
@pytest.mark.parametrize("name", ["webhook-signed", "webhook-standard"])
def test_the_documented_signing_example_works(tmp_path: Path, name: str) -> None:
    script = example(name)
    simple_project(tmp_path)
    args = ("--scheduler", "--poll-interval-seconds", "3600")
    with serving(tmp_path, *args, env={"ROCKY_WEBHOOK_SECRET": _secret(script)}) as srv:
        runnable = script.replace("http://127.0.0.1:8080", srv.url)
        first = subprocess.run(["bash", "-c", runnable], capture_output=True, text=True, timeout=60,
                               env=child_env())
        again = subprocess.run(["bash", "-c", runnable], capture_output=True, text=True, timeout=60,
                               env=child_env())
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["demand"] == "accepted", first.stdout
    if name == "webhook-signed":
        assert json.loads(again.stdout) == {"demand": "duplicate"}  # same X-Rocky-Delivery
    else:
        assert json.loads(again.stdout)["demand"] == "accepted"  # a fresh webhook-id each time
    assert len(spool_files(tmp_path)) == (1 if name == "webhook-signed" else 2)

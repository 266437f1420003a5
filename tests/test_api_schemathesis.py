"""Schemathesis over the live service's OpenAPI document (``schemathesis run`` with every check):
generated valid and invalid requests against every operation, and stateful sequences that follow
the links it infers (POST /submit → GET /submissions/{id} → its events). No server error, and every
response matches what the document declares: status codes, media types, bodies, headers."""

from __future__ import annotations

import subprocess
import sys

API_KEY = "test-key-alice"  # the service fixture's first key (tests/conftest.py)


def test_schemathesis_finds_nothing(service, tmp_path):
    cmd = [sys.executable, "-m", "schemathesis.cli", "run", f"{service.url}/openapi.json",
           "-H", f"Authorization: Bearer {API_KEY}", "--checks", "all", "--max-examples", "25",
           "--request-timeout", "70", "--max-failures", "10", "--no-color"]
    r = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=240)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-8000:]
    assert "Selected: 12/12" in out and "passed" in out, out[-4000:]

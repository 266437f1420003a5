"""Schemathesis over the live service's OpenAPI document (``schemathesis run`` with every check):
generated valid and invalid requests against every operation, and stateful sequences that follow
the links it infers (POST /submit → GET /submissions/{id} → its events). No server error, and every
response matches what the document declares: status codes, media types, bodies, headers."""

from __future__ import annotations

import subprocess
import sys

API_KEY = "test-key-alice"  # the service fixture's first key (tests/conftest.py)


# A cursor is opaque: a well-formed one that is not a position in the caller's own list is a
# 400, which no schema can tell from a valid one.
CONFIG = """
[[operations]]
include-name = "GET /submissions"
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "404", "429"]
"""


def test_schemathesis_finds_nothing(service, tmp_path):
    (tmp_path / "schemathesis.toml").write_text(CONFIG)
    cmd = [sys.executable, "-m", "schemathesis.cli", "--config-file", str(tmp_path / "schemathesis.toml"),
           "run", f"{service.url}/openapi.json",
           "-H", f"Authorization: Bearer {API_KEY}", "--checks", "all", "--max-examples", "25",
           "--request-timeout", "70", "--max-failures", "10", "--no-color"]
    r = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=240)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-8000:]
    assert "Selected: 12/12" in out and "passed" in out, out[-4000:]

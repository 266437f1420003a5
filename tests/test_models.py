"""The result document's models: importing ``TestResult`` into a test module does not make
pytest try to collect it as a test class."""

from __future__ import annotations

import subprocess
import sys


def test_test_result_is_not_collected_by_pytest(tmp_path):
    probe = tmp_path / "test_probe.py"
    probe.write_text("from judge.models import TestResult\n\n\ndef test_nothing():\n    pass\n")
    run = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:randomly",
                          "-p", "no:cacheprovider", "-W", "error::pytest.PytestCollectionWarning",
                          str(probe)], capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "test_probe.py::test_nothing" in run.stdout and "TestResult" not in run.stdout

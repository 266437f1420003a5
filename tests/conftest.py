"""Shared fixtures: one warm sandbox for the whole session, exercises by slug."""

from __future__ import annotations

import pytest

from judge.exercise import discover
from judge.sandbox import Sandbox


@pytest.fixture(scope="session")
def sandbox():
    box = Sandbox()
    yield box
    box.close()


@pytest.fixture(scope="session")
def exercises():
    return discover()

"""Shared fixtures: one warm sandbox for the whole session, exercises by slug."""

from __future__ import annotations

import pytest
import torch

torch.set_num_threads(1)  # as in grading.warm(): small tensors, no oversubscription

from judge.exercise import discover
from judge.box.sandbox import Sandbox


@pytest.fixture(scope="session")
def sandbox():
    box = Sandbox()
    yield box
    box.close()


@pytest.fixture(scope="session")
def exercises():
    return discover()


# --- the service (judge serve) in a subprocess: tests/test_api*.py ---------------------------

import os  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

API_KEYS = ("test-key-alice", "test-key-bob")


class Service:
    """``judge serve`` on a free 127.0.0.1 port, with its own SQLite file and data dir."""

    def __init__(self, root: Path, *, workers: int = 2, **env: str):
        self.root, self.workers, self.env = Path(root), workers, env
        self.root.mkdir(parents=True, exist_ok=True)
        self.db = self.root / "judge.db"
        self.proc: subprocess.Popen | None = None
        self.url = ""

    def start(self, timeout: float = 120.0) -> "Service":
        import httpx

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = {**os.environ, "JUDGE_DATABASE_URL": f"sqlite:///{self.db}",
               "JUDGE_DATA_DIR": str(self.root / "data"), "JUDGE_API_KEYS": ",".join(API_KEYS),
               "JUDGE_WORKERS": str(self.workers), "JUDGE_EXERCISES": "glm5_mis",
               "JUDGE_RATE_LIMIT": "100000", "JUDGE_QUEUE_MAX": "100000",
               "JUDGE_CLIENT_QUEUE_MAX": "100000", **self.env}
        log = open(self.root / "server.log", "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "judge.cli", "serve", "--port", str(port)],
                                     cwd=self.root, env=env, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        self.url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"judge serve exited ({self.proc.returncode}):\n{self.log()}")
            try:
                r = httpx.get(self.url + "/readyz", timeout=2)
                if r.status_code == 200 and r.json()["workers_ready"] == self.workers:
                    return self
                if self.workers == 0 and r.json().get("database"):  # an API-only node: its database answers
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"judge serve was not ready in {timeout} s:\n{self.log()}")

    def log(self) -> str:
        try:
            return (self.root / "server.log").read_text(errors="replace")[-6000:]
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL the whole process group: the API process and its workers, no clean-up."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()

    def client(self, key: str | None = API_KEYS[0], **kw):
        import httpx

        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=kw.pop("timeout", 90), **kw)


@pytest.fixture(scope="session", params=["sqlite", "postgresql"])
def service(request, tmp_path_factory):
    """One real service per backend for the session: 2 workers, glm5_mis, and a temporary SQLite
    file or a fresh database on the session's PostgreSQL (every test using it runs on both)."""
    env = {}
    if request.param == "postgresql":
        env["JUDGE_DATABASE_URL"] = request.getfixturevalue("postgres").fresh_database()
    svc = Service(tmp_path_factory.mktemp(f"service-{request.param}"), **env).start()
    yield svc
    svc.stop()


@pytest.fixture
def service_factory():
    """``Service``, for tests that start (and kill) their own."""
    return Service


# --- the store's two backends: tests/test_store.py, the API suites -----------------------------

@pytest.fixture(scope="session")
def postgres():
    """A real PostgreSQL for the session (judge/service/pg_local.py: initdb as `postgres`, a free port)."""
    from judge.service.pg_local import LocalPostgres

    pg = LocalPostgres().start()
    yield pg
    pg.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request, tmp_path):
    """A fresh, empty database on each backend: a SQLite file, or a database of its own on the
    session's PostgreSQL (JUDGE_DATABASE_URL's two forms)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'judge.db'}"
    return request.getfixturevalue("postgres").fresh_database()


@pytest.fixture
def run_async():
    """``asyncio.run`` in a thread of its own: a browser test's session-scoped Playwright keeps
    an event loop running in the main thread, where asyncio.run refuses to start another."""
    import asyncio
    import threading

    def run(coro):
        out: dict = {}

        def main() -> None:
            try:
                out["value"] = asyncio.run(coro)
            except BaseException as e:  # noqa: BLE001 - raised again in the test's thread
                out["error"] = e

        t = threading.Thread(target=main)
        t.start()
        t.join()
        if "error" in out:
            raise out["error"]
        return out.get("value")

    return run

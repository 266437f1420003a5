"""A judge deployment on network namespaces: a database host, an API host, worker hosts.

``Cluster`` lays the roles of docs/deploy.md on a ``judge.service.netns.Topology``: the ``db``
host runs PostgreSQL (``pg_local.LocalPostgres`` bound to the host's own address, as the
``postgres`` user, reachable from the subnet), the ``api`` host ``judge serve --workers 0``, and
each worker host ``judge worker --concurrency N``, each with a data directory of its own and
``JUDGE_DATABASE_URL`` naming the db host's address: nothing but the network is shared between
roles, so what one host produced reaches another only through the database. The caller (a test,
the bench) sits in the root namespace, on the bridge: it talks HTTP to the API host and may read
the database directly to count what the hosts did.

Only the command line (``judge serve``, ``judge worker``) and the HTTP API are used, whatever the
dispatch inside is. ``python -m judge.service.netns_hosts postgres ADDRESS PORT CLIENTS ROOT`` is
the db host's program (run inside its namespace): it starts the cluster, writes its URL to
``ROOT/url``, and stops it when its stdin closes (its owner is gone) or on SIGTERM.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from judge.errors import UsageError
from judge.service.netns import Host, Topology

API_KEYS = ("test-key-alice", "test-key-bob")
PG_PORT = 5432
API_PORT = 8000
# every limit out of the way: the load is the caller's to choose
UNLIMITED = {"JUDGE_RATE_LIMIT": "1000000", "JUDGE_QUEUE_MAX": "1000000", "JUDGE_CLIENT_QUEUE_MAX": "1000000"}


class WorkerHost:
    """``judge worker --concurrency N`` on a host of its own; ``kill()`` is the machine dying."""

    def __init__(self, host: Host, root: Path, env: dict[str, str], concurrency: int):
        self.host, self.root, self.env, self.concurrency = host, root, env, concurrency
        self.log_path = root / "worker.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> "WorkerHost":
        self._mark = self.log_path.stat().st_size if self.log_path.exists() else 0
        self.proc = self.host.spawn([sys.executable, "-m", "judge.cli", "worker", "--concurrency",
                                     str(self.concurrency)], env=self.env, log=self.log_path, cwd=self.root)
        return self

    @property
    def pid(self) -> int:
        """The ``judge worker`` process (the last part of its workers' names, w<slot>.<gen>.<pid>)."""
        assert self.proc is not None
        return self.proc.pid

    def log(self, tail: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[self._mark:][-tail:]
        except OSError:
            return ""

    def wait_ready(self, timeout: float = 240) -> "WorkerHost":
        deadline = time.monotonic() + timeout
        while "worker(s) ready" not in self.log(10**6):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise UsageError(f"judge worker on {self.host.name} not ready:\n{self.log()}")
            time.sleep(0.2)
        return self

    def kill(self) -> int:
        """SIGKILL every process of the host (worker host, pool, workers, zygotes, children)."""
        return self.host.kill()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                pass
        self.host.kill()  # whatever is left of it


class Cluster:
    """db + api + ``workers`` worker hosts; ``start()``, then ``close()`` (or a ``with``)."""

    def __init__(self, root: Path, *, workers: int = 2, concurrency: int = 1,
                 exercises: str = "glm5_mis", env: dict[str, str] | None = None,
                 api_env: dict[str, str] | None = None):
        self.root = Path(root)
        self.n_workers, self.concurrency = workers, concurrency
        self.base_env = {**os.environ, "JUDGE_EXERCISES": exercises, **UNLIMITED, **(env or {})}
        self.api_env = api_env or {}
        self.topology: Topology | None = None
        self.workers: list[WorkerHost] = []
        self.database_url = ""
        self.api_url = ""
        self._pg_root: Path | None = None
        self._db_proc: subprocess.Popen | None = None
        self._api_proc: subprocess.Popen | None = None

    def start(self, timeout: float = 240) -> "Cluster":
        try:
            self.topology = Topology()
            self._start_db(timeout)
            self._start_api(timeout)
            for _ in range(self.n_workers):
                self.add_worker(wait=False)
            for w in self.workers:
                w.wait_ready(timeout)
        except BaseException:
            self.close()
            raise
        return self

    # --- the roles -----------------------------------------------------------------------
    def _start_db(self, timeout: float) -> None:
        db = self.topology.add_host("db")
        # where the postgres user can reach it (a test's tmp_path is private to root)
        self._pg_root = Path(tempfile.gettempdir()) / f"judge-netns-{self.topology.tag}-pg"
        url_file = self._pg_root / "url"
        self._db_proc = db.spawn([sys.executable, "-m", "judge.service.netns_hosts", "postgres", db.address,
                                  str(PG_PORT), str(self.topology.subnet), str(self._pg_root)],
                                 env=dict(os.environ), log=self.root / "db.log", stdin_pipe=True)
        deadline = time.monotonic() + timeout
        while not url_file.exists():
            if self._db_proc.poll() is not None or time.monotonic() > deadline:
                raise UsageError(f"the db host's PostgreSQL did not start:\n{_tail(self.root / 'db.log')}")
            time.sleep(0.05)
        self.database_url = url_file.read_text().strip()

    def _start_api(self, timeout: float) -> None:
        import httpx

        api = self.topology.add_host("api")
        env = {**self.base_env, "JUDGE_DATABASE_URL": self.database_url,
               "JUDGE_DATA_DIR": str(self.root / "api" / "data"), "JUDGE_API_KEYS": ",".join(API_KEYS),
               **self.api_env}
        (self.root / "api").mkdir(parents=True, exist_ok=True)
        self._api_proc = api.spawn([sys.executable, "-m", "judge.cli", "serve", "--workers", "0",
                                    "--host", api.address, "--port", str(API_PORT)],
                                   env=env, log=self.root / "api" / "server.log", cwd=self.root / "api")
        self.api_url = f"http://{api.address}:{API_PORT}"
        deadline = time.monotonic() + timeout
        while True:
            if self._api_proc.poll() is not None or time.monotonic() > deadline:
                raise UsageError(f"the API host did not start:\n{_tail(self.root / 'api' / 'server.log')}")
            try:
                if httpx.get(self.api_url + "/readyz", timeout=2).json().get("database"):
                    return
            except (httpx.HTTPError, ValueError):
                pass
            time.sleep(0.1)

    def add_worker(self, wait: bool = True) -> WorkerHost:
        """One more worker host (w1, w2, …), started; with ``wait`` until its workers are warm."""
        n = len(self.workers) + 1
        host = self.topology.add_host(f"w{n}")
        root = self.root / f"w{n}"
        root.mkdir(parents=True, exist_ok=True)
        env = {**self.base_env, "JUDGE_DATABASE_URL": self.database_url, "JUDGE_DATA_DIR": str(root / "data")}
        w = WorkerHost(host, root, env, self.concurrency).start()
        self.workers.append(w)
        return w.wait_ready() if wait else w

    def client(self, key: str | None = API_KEYS[0], **kw):
        """An HTTP client of the API host, from the root namespace."""
        import httpx

        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.api_url, headers=headers, timeout=kw.pop("timeout", 90), **kw)

    def close(self) -> None:
        """Stop the roles (gently first, the API and workers before the database), then remove
        the topology; every step runs whatever the previous ones did."""
        try:
            for w in self.workers:
                try:
                    w.stop()
                except Exception:  # noqa: BLE001 - the topology's close kills what is left
                    pass
            for proc in (self._api_proc, self._db_proc):
                if proc is not None and proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
                    try:
                        proc.wait(20)
                    except subprocess.TimeoutExpired:
                        pass
        finally:
            if self.topology is not None:
                self.topology.close()
            if self._pg_root is not None:
                shutil.rmtree(self._pg_root, ignore_errors=True)

    def __enter__(self) -> "Cluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


def _tail(path: Path, n: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return ""


def postgres_main(address: str, port: int, clients: str, root: Path) -> int:
    """The db host's program: PostgreSQL on ``address:port`` for ``clients`` until told to stop."""
    from judge.service.pg_local import LocalPostgres

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    pg = LocalPostgres(host=address, port=port, root=root, clients=clients).start()
    try:
        tmp = root / "url.tmp"
        tmp.write_text(pg.url + "\n")
        tmp.rename(root / "url")
        # our owner holds our stdin: its end closing (however it ended) stops us too
        threading.Thread(target=lambda: (sys.stdin.buffer.read(), stop.set()), daemon=True).start()
        stop.wait()
    finally:
        pg.stop()
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "postgres":
        sys.exit(postgres_main(sys.argv[2], int(sys.argv[3]), sys.argv[4], Path(sys.argv[5])))
    sys.exit("usage: python -m judge.service.netns_hosts postgres ADDRESS PORT CLIENTS ROOT")

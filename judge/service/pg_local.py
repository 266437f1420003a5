"""A throwaway PostgreSQL cluster on this machine, for the tests and ``make bench``.

Debian's server binaries (``/usr/lib/postgresql/<N>/bin``): ``initdb`` on a temporary directory
and ``postgres`` on a free 127.0.0.1 port, run as the ``postgres`` user when we are root (initdb
refuses root). ``LocalPostgres.url`` is a ``postgresql://`` URL for ``JUDGE_DATABASE_URL``;
``fresh_database()`` creates an empty database on it (one per test, cheap: a template copy).
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from judge.errors import UsageError

BIN_GLOB = "/usr/lib/postgresql/*/bin"


def server_bin() -> Path:
    """The newest installed server's bin directory (Debian's layout), or a UsageError."""
    found = sorted(Path("/").glob(BIN_GLOB.lstrip("/")), key=lambda p: int(p.parent.name)
                   if p.parent.name.isdigit() else 0)
    for d in reversed(found):
        if (d / "initdb").exists() and (d / "postgres").exists():
            return d
    raise UsageError("no PostgreSQL server found under /usr/lib/postgresql: install Debian's "
                     "`postgresql` package (make setup does, as root)")


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class LocalPostgres:
    """One cluster: ``start()`` it, ``stop()`` it (its directory goes too)."""

    def __init__(self, *, host: str = "127.0.0.1", port: int | None = None,
                 root: Path | None = None, clients: str | None = None):
        self.host, self.port = host, port or free_port(host)
        self.clients = clients  # a network (CIDR) allowed to connect besides localhost: other hosts
        self.bin = server_bin()
        self.root = Path(root or tempfile.mkdtemp(prefix="judge-pg-"))
        self.data = self.root / "data"
        self.proc: subprocess.Popen | None = None
        self.user = "judge"
        self.password = secrets.token_hex(8)
        self._as_postgres = os.geteuid() == 0

    @property
    def url(self) -> str:
        return self.url_for("judge")

    def url_for(self, database: str) -> str:
        return f"postgresql://{self.user}:{self.password}@{self.host}:{self.port}/{database}"

    def _run(self, *cmd: str, **kw) -> subprocess.CompletedProcess:
        return subprocess.run(list(cmd), check=True, capture_output=True, text=True,
                              user="postgres" if self._as_postgres else None, **kw)

    def start(self, timeout: float = 30.0) -> "LocalPostgres":
        self.root.mkdir(parents=True, exist_ok=True)
        pwfile = self.root / "pw"
        pwfile.write_text(self.password + "\n")
        if self._as_postgres:
            pw = pwd.getpwnam("postgres")
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
            os.chown(pwfile, pw.pw_uid, pw.pw_gid)
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", self.user, "-A", "scram-sha-256",
                  f"--pwfile={pwfile}", "-E", "UTF8", "--no-sync", "--locale=C")
        pwfile.unlink()
        if self.clients:  # e.g. the hosts of judge.service.netns, on their subnet
            with open(self.data / "pg_hba.conf", "a") as hba:
                hba.write(f"host all all {self.clients} scram-sha-256\n")
        # fsync off: a test cluster, thrown away; it measures the judge, not the disk
        opts = ["-c", f"listen_addresses={self.host}", "-c", f"port={self.port}",
                "-c", f"unix_socket_directories={self.root}", "-c", "fsync=off",
                "-c", "max_connections=300", "-c", "shared_buffers=64MB"]
        log = open(self.root / "postgres.log", "ab")
        self.proc = subprocess.Popen([str(self.bin / "postgres"), "-D", str(self.data), *opts],
                                     stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     user="postgres" if self._as_postgres else None,
                                     start_new_session=True)
        log.close()
        import psycopg

        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"postgres exited ({self.proc.returncode}):\n{self.log()}")
            try:
                with psycopg.connect(self.url_for("postgres"), autocommit=True, connect_timeout=2) as c:
                    c.execute("CREATE DATABASE judge")
                return self
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"postgres not up in {timeout} s:\n{self.log()}")
                time.sleep(0.05)

    def fresh_database(self) -> str:
        """An empty database of its own: its URL."""
        import psycopg

        name = "t_" + secrets.token_hex(6)
        with psycopg.connect(self.url_for("postgres"), autocommit=True) as c:
            c.execute(f'CREATE DATABASE "{name}"')
        return self.url_for(name)

    def log(self) -> str:
        try:
            return (self.root / "postgres.log").read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # "fast" shutdown: SIGTERM would wait for clients
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        shutil.rmtree(self.root, ignore_errors=True)

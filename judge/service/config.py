"""The service's configuration: embedded defaults, overridden by ``JUDGE_*`` environment variables.

Each field is the variable ``JUDGE_<FIELD>``; their table, with defaults and meanings, is in
docs/service.md ("Configuration"), and tests/test_docs.py keeps it equal to ``Config``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from judge.errors import UsageError
from judge.exercise import EXERCISES_ENV, default_exercises_dir, pack_exercises

PREFIX = "JUDGE_"


@dataclass(frozen=True)
class Config:
    database_url: str = "sqlite:///judge.db"
    api_keys: tuple[str, ...] = ()
    workers: int = field(default_factory=lambda: os.cpu_count() or 1)
    data_dir: Path = Path("judge-data")
    max_source_bytes: int = 65536
    queue_max: int = 1000
    client_queue_max: int = 100  # one client's queued + running: the rest of the queue stays others'
    max_transfers: int = 32  # file downloads in flight at once, every client's
    client_transfers: int = 4  # one client's file downloads in flight at once
    rate_limit: float = 60.0  # submissions per client per minute
    rate_burst: int = 0  # 0: the same as rate_limit
    wait_max: float = 60.0
    exercises: tuple[str, ...] = ()  # empty: every exercise found
    exercises_dir: Path = field(default_factory=default_exercises_dir)  # a pack's exercises/
    allow_weak_sandbox: bool = False  # grade even where Landlock or seccomp is missing
    poll_interval: float = 0.25  # an idle worker's look at the queue (new submissions wake it)
    notify_interval: float = 0.25  # the API's look for changes a notification did not announce

    @property
    def database_path(self) -> Path | None:
        """The SQLite file (None on PostgreSQL); a UsageError for a URL of neither kind."""
        url = self.database_url
        if url.startswith(("postgresql://", "postgres://")):
            return None
        if not url.startswith("sqlite:///"):
            raise UsageError("JUDGE_DATABASE_URL: expected sqlite:///PATH or postgresql://USER@HOST/DB, "
                             f"got {url.split('@')[-1]!r}")
        return Path(url[len("sqlite:///"):])

    @property
    def database_name(self) -> str:
        """The database, as logs name it (never a password)."""
        path = self.database_path
        return str(path) if path is not None else "postgresql://" + self.database_url.split("@")[-1]

    @property
    def burst(self) -> int:
        return self.rate_burst or max(1, int(self.rate_limit))

    def without_secrets(self) -> "Config":
        """The copy handed to worker processes: they never need the keys."""
        return replace(self, api_keys=())

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None, **overrides) -> "Config":
        env = dict(os.environ if env is None else env)
        kw: dict = {}

        def get(name: str) -> str | None:
            v = env.get(PREFIX + name)
            return v.strip() if v is not None and v.strip() != "" else None

        def num(name: str, conv, minimum):
            v = get(name)
            if v is None:
                return None
            try:
                out = conv(v)
            except ValueError:
                raise UsageError(f"{PREFIX}{name}: expected a number, got {v!r}") from None
            if out < minimum:
                raise UsageError(f"{PREFIX}{name}: must be at least {minimum}, got {v!r}")
            return out

        if (v := get("DATABASE_URL")) is not None:
            kw["database_url"] = v
        if (v := get("API_KEYS")) is not None:
            kw["api_keys"] = tuple(k.strip() for k in v.split(",") if k.strip())
        if (v := get("DATA_DIR")) is not None:
            kw["data_dir"] = Path(v)
        if (v := get("EXERCISES")) is not None:
            kw["exercises"] = tuple(s.strip() for s in v.split(",") if s.strip())
        if (v := get("EXERCISES_DIR")) is not None:
            kw["exercises_dir"] = pack_exercises(v, EXERCISES_ENV)  # the pack or its exercises/
        if (v := get("ALLOW_WEAK_SANDBOX")) is not None:
            kw["allow_weak_sandbox"] = v.lower() in ("1", "true", "yes", "on")
        for name, key, conv, minimum in [("WORKERS", "workers", int, 0),
                                         ("MAX_SOURCE_BYTES", "max_source_bytes", int, 1),
                                         ("QUEUE_MAX", "queue_max", int, 1),
                                         ("CLIENT_QUEUE_MAX", "client_queue_max", int, 1),
                                         ("MAX_TRANSFERS", "max_transfers", int, 1),
                                         ("CLIENT_TRANSFERS", "client_transfers", int, 1),
                                         ("RATE_LIMIT", "rate_limit", float, 0.001),
                                         ("RATE_BURST", "rate_burst", int, 1),
                                         ("WAIT_MAX", "wait_max", float, 0),
                                         ("POLL_INTERVAL", "poll_interval", float, 0.001),
                                         ("NOTIFY_INTERVAL", "notify_interval", float, 0.001)]:
            if (v := num(name, conv, minimum)) is not None:
                kw[key] = v
        kw.update(overrides)
        cfg = cls(**kw)
        cfg.database_path  # noqa: B018 - validate the URL now
        return cfg

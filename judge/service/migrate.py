"""The schema's migrations (Alembic, ``judge/service/migrations/``), for both backends.

A store opening a database first reads ``alembic_version`` (one tiny query); only when it is not
at ``HEAD`` does it load Alembic and upgrade. ``tests/test_store.py`` keeps ``HEAD`` equal to the
migrations' head. ``python -m judge.service.migrate URL`` upgrades a database by hand (as
``judge serve``/``judge worker`` do on start).
"""

from __future__ import annotations

import sys
from pathlib import Path

HEAD = "0003"  # the newest revision in migrations/versions/
SCRIPTS = Path(__file__).with_name("migrations")


def current(db, backend: str) -> str | None:
    """The database's revision (None: never migrated)."""
    if backend == "sqlite":
        exists = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'alembic_version'").fetchone()
    else:
        exists = db.execute("SELECT to_regclass('alembic_version')").fetchone()[0]
    if not exists:
        return None
    row = db.execute("SELECT version_num FROM alembic_version").fetchone()
    return row[0] if row else None


def sqlalchemy_url(url: str) -> str:
    """The store's URL as SQLAlchemy names it (psycopg 3 for PostgreSQL)."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    return url


def config(url: str):
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(SCRIPTS))
    cfg.set_main_option("sqlalchemy.url", sqlalchemy_url(url).replace("%", "%%"))
    return cfg


def upgrade(url: str, revision: str = "head") -> None:
    from alembic import command

    command.upgrade(config(url), revision)


def script_head() -> str:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(config("sqlite://")).get_current_head()


if __name__ == "__main__":
    upgrade(sys.argv[1])

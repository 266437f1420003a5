"""Heartbeats: a running submission's ``heartbeat`` (when its worker last said it is alive) and
``graded_by`` (the worker whose verdict was stored), so that any host can detect a stalled
grading and no stale worker's result overwrites another's.

Revision ID: 0002
Revises: 0001
"""

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    time = "REAL" if op.get_bind().dialect.name == "sqlite" else "DOUBLE PRECISION"
    op.execute(f"ALTER TABLE submissions ADD COLUMN heartbeat {time}")
    op.execute("ALTER TABLE submissions ADD COLUMN graded_by TEXT")


def downgrade() -> None:
    op.execute("ALTER TABLE submissions DROP COLUMN graded_by")
    op.execute("ALTER TABLE submissions DROP COLUMN heartbeat")

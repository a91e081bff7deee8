"""The store: telemetry tables (SQLAlchemy 2, Alembic) in SQLite or PostgreSQL.

Tables: ``series``, ``segments`` (compressed windows of frames), ``events``,
``int_paths`` and ``staged_frames`` (frames of windows not yet closed, so a
worker restart loses nothing). Every write is idempotent.
"""

from fabricops.store.records import (
    IntPathRecord,
    SegmentRecord,
    SeriesRecord,
    join_path,
    path_switches,
)
from fabricops.store.store import Store, StoreConfig, StoreError

__all__ = ["IntPathRecord", "SegmentRecord", "SeriesRecord", "Store", "StoreConfig",
           "StoreError", "join_path", "path_switches"]

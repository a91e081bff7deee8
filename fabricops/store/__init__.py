"""The store: telemetry tables (SQLAlchemy 2, Alembic) in SQLite or PostgreSQL.

Tables: ``series``, ``segments`` (compressed windows of frames), ``events``,
``int_paths``, ``stream_states`` (each stream's checkpoint, saved with its
written windows) and ``staged_frames`` (read once on start: earlier versions
kept open windows there; the bus is now the recovery log). Every write is
idempotent.
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

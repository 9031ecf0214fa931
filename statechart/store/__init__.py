"""Stores: the `Store` port and its in-memory and SQLite implementations."""

from statechart.records.run import Intent
from statechart.store.base import DEFAULT_LEASE_TTL, DEFAULT_SNAPSHOT_EVERY, Lease, Loaded, Store
from statechart.store.memory import MemoryStore
from statechart.store.sqlite import SQLiteStore

__all__ = [
    "DEFAULT_LEASE_TTL",
    "DEFAULT_SNAPSHOT_EVERY",
    "Intent",
    "Lease",
    "Loaded",
    "MemoryStore",
    "SQLiteStore",
    "Store",
]

"""Stores: the `Store` port and its in-memory and SQLite implementations."""

from ..run import Intent
from .base import DEFAULT_LEASE_TTL, Lease, Store
from .memory import MemoryStore
from .sqlite import SQLiteStore

__all__ = ["DEFAULT_LEASE_TTL", "Intent", "Lease", "MemoryStore", "SQLiteStore", "Store"]

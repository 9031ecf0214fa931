"""Stores: the `Store` port and its in-memory implementation."""

from .base import Intent, Store
from .memory import MemoryStore

__all__ = ["Intent", "MemoryStore", "Store"]

"""`statechart ui`: a run inspector in the browser over any store (the `ui` extra)."""

from statechart.ui.app import create_app

__all__ = ["create_app"]

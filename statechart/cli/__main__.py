"""`python -m statechart.cli`: the same as the `statechart` command."""

from statechart.cli import entry

entry()

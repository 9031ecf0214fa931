"""What a running tool may receive besides its arguments: who is calling, and a way to
report progress to whoever watches the run live."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Report = Callable[[str, dict[str, Any]], None]


class ToolContext:
    """Given to a tool that declares a parameter of this type (never shown to the model).

    `progress(...)` reaches observers of the run (`statechart.watch`, `on=`, the live
    CLI and inspector) as a `Progress` event; with nobody watching it does nothing. It
    is never stored: return what matters as the tool's result.

    Example:
        ```python
        from statechart import ToolContext, tool


        @tool(retry="safe")
        def crawl(site: str, ctx: ToolContext) -> str:
            "Crawl a site."
            for page in range(1, 4):
                ctx.progress(f"page {page} of 3", done=page)
            return f"3 pages of {site}"


        assert "ctx" not in crawl.schema["properties"]  # the runtime passes it
        ```
    """

    __slots__ = ("_report", "call_id", "run_id", "state", "tool")

    def __init__(
        self,
        *,
        run_id: str = "",
        state: str = "",
        tool: str = "",
        call_id: str = "",
        report: Report | None = None,
    ) -> None:
        self.run_id = run_id
        """The run the call belongs to ("" when the tool is invoked directly)."""
        self.state = state
        """The state path the call runs in."""
        self.tool = tool
        """The tool's name."""
        self.call_id = call_id
        """The model's id for this call."""
        self._report = report

    def progress(self, message: str = "", /, **data: Any) -> None:
        """Tell observers how the call is going: a line of text and JSON-able figures.

        Safe from a worker thread (a sync tool runs in one) and from the event loop."""
        if self._report is not None:
            self._report(message, data)

"""The relay from a driving process to inspectors on the same machine: what a listener
receives, wide text, quiet spells, and listeners that are gone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio

from statechart import CallStarted, MemoryStore, SQLiteStore, Token
from statechart.runtime.relay import TAIL, listening, relay_for, where


def began() -> CallStarted:
    return CallStarted(run_id="r", seq=1, path="s.think", call="model", name="m", call_id="r:1")


def said(text: str) -> Token:
    return Token(run_id="r", seq=1, path="s.think", call_id="r:1", text=text)


async def first_call(messages: Any) -> dict[str, Any]:
    async for message in messages:
        if message is not None and message.get("chars"):
            return dict(message)
    raise AssertionError("the stream ended")


def test_a_listener_gets_the_calls_text_so_far_even_in_wide_characters(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "runs.db"))
    wide = "\N{GRINNING FACE}" * (TAIL + 500)  # 4 bytes each in UTF-8

    async def main() -> dict[str, Any]:
        async with listening(store) as messages:
            relay = relay_for(store)
            assert relay is not None
            relay.emit(began())
            relay.emit(said(wide))
            relay.close()  # sends what is pending
            with anyio.fail_after(5):
                return await first_call(messages)

    try:
        message = anyio.run(main)
    finally:
        store.close()
    assert message["run_id"] == "r" and message["call_id"] == "r:1"
    assert message["chars"] == len(wide)
    assert message["text"] == wide[-TAIL:]  # the end of it, whole characters


def test_a_quiet_spell_yields_none_and_the_stream_goes_on(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "runs.db"))

    async def main() -> tuple[list[Any], dict[str, Any]]:
        async with listening(store, quiet=0.05) as messages:
            stream = aiter(messages)
            quiet = [await anext(stream), await anext(stream)]
            relay = relay_for(store)
            assert relay is not None
            relay.emit(began())
            relay.emit(said("after the quiet"))
            relay.close()
            with anyio.fail_after(5):
                return quiet, await first_call(stream)

    try:
        quiet, message = anyio.run(main)
    finally:
        store.close()
    assert quiet == [None, None]
    assert message["text"] == "after the quiet"


def test_a_store_in_one_process_has_nothing_to_relay() -> None:
    store = MemoryStore()
    assert where(store) is None and relay_for(store) is None

    async def main() -> list[Any]:
        async with listening(store, quiet=0.01) as messages:
            stream = aiter(messages)
            return [await anext(stream), await anext(stream)]

    assert anyio.run(main) == [None, None]


def test_a_listener_that_is_gone_is_forgotten_and_its_socket_removed(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "runs.db"))
    directory = where(store)
    assert directory is not None
    directory.mkdir(parents=True, exist_ok=True)
    dead = directory / "gone.sock"
    dead.touch()  # a socket file nobody listens on (a killed inspector's)
    try:
        relay = relay_for(store)
        assert relay is not None
        relay.emit(began())
        relay.close()
        assert not dead.exists()
    finally:
        store.close()

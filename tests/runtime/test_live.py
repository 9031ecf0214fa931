"""The live buffer a `watch` consumer reads (`LiveStream`) and the sinks of `on=`: order,
joining, back-pressure, closing, errors, and the token throttle."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statechart import CallStarted, LiveEvent, LiveStream, Progress, Token
from statechart.runtime.live import Callback, Tee


def began(seq: int) -> CallStarted:
    return CallStarted(run_id="r", seq=seq, path="s", call="model", name="m", call_id=f"r:{seq}")


def token(text: str, call: str = "r:1", tool_call: str = "") -> Token:
    return Token(run_id="r", seq=1, path="s", call_id=call, text=text, tool_call_id=tool_call)


def progress(n: int, call: str = "c1") -> Progress:
    return Progress(run_id="r", seq=1, path="s", call_id=call, tool="crawl", data={"n": n})


async def drained(stream: LiveStream) -> list[LiveEvent]:
    stream.finish()
    return [event async for event in stream]


def test_a_buffer_that_holds_nothing_is_refused() -> None:
    with pytest.raises(ValueError, match="holds nothing"):
        LiveStream(0)


def test_tokens_of_one_call_join_while_the_consumer_is_behind_and_others_do_not() -> None:
    async def main() -> list[LiveEvent]:
        stream = LiveStream(8)
        for event in (
            began(1),
            token("Hel"),
            token("lo"),
            token('{"a"', tool_call="t1"),
            token(": 1}", tool_call="t1"),
            token("x", call="r:2"),
            progress(1),
            progress(2),
            progress(1, call="c2"),
        ):
            stream.emit(event)
        return await drained(stream)

    seen = anyio.run(main)
    assert seen == [
        began(1),
        token("Hello"),
        token('{"a": 1}', tool_call="t1"),
        token("x", call="r:2"),
        progress(2),  # only a call's latest report is kept
        progress(1, call="c2"),
    ]


def test_a_full_buffer_holds_the_run_until_the_consumer_reads() -> None:
    async def main() -> tuple[list[int], list[LiveEvent]]:
        stream = LiveStream(2)
        handed: list[int] = []

        async def producer() -> None:
            for seq in range(1, 6):
                await stream.put(began(seq))
                handed.append(seq)
            stream.finish()

        async with anyio.create_task_group() as group:
            group.start_soon(producer)
            await anyio.sleep(0.05)
            held = list(handed)  # nobody read yet: two fit, the third waits
            read = [event async for event in stream]
        return held, read

    held, read = anyio.run(main)
    assert held == [1, 2]
    assert read == [began(n) for n in range(1, 6)]  # nothing dropped, in order


def test_closing_drops_what_is_held_and_never_holds_the_run_again() -> None:
    async def main() -> tuple[bool, list[LiveEvent]]:
        stream = LiveStream(1)
        done = anyio.Event()

        async def producer() -> None:
            for seq in range(1, 50):
                await stream.put(began(seq))
            done.set()

        async with anyio.create_task_group() as group:
            group.start_soon(producer)
            await anyio.sleep(0.02)
            assert not done.is_set()  # held by the full buffer
            await stream.aclose()
            with anyio.fail_after(5):
                await done.wait()
        stream.emit(token("late"))
        return stream.closed, [event async for event in stream]

    closed, after = anyio.run(main)
    assert closed and after == []


def test_a_failed_drive_raises_from_the_stream_once() -> None:
    async def main() -> None:
        stream = LiveStream()
        stream.emit(began(1))
        stream.finish(RuntimeError("the store is gone"))
        assert await stream.__anext__() == began(1)
        with pytest.raises(RuntimeError, match="the store is gone"):
            await stream.__anext__()
        with pytest.raises(StopAsyncIteration):
            await stream.__anext__()
        stream.raise_unseen()  # already seen: nothing to raise

        unread = LiveStream()
        unread.finish(KeyError("lost"))
        with pytest.raises(KeyError):
            unread.raise_unseen()

    anyio.run(main)


def test_flowing_tokens_wake_the_consumer_by_the_clock_and_anything_else_at_once() -> None:
    async def main() -> tuple[list[LiveEvent], float]:
        stream = LiveStream(interval=0.2)
        reads: list[LiveEvent] = []
        waited = 0.0

        async def producer() -> None:
            stream.emit(token("a"))
            await anyio.sleep(0.01)
            for piece in "bcde":  # the consumer is patient now: these do not wake it
                stream.emit(token(piece))
                await anyio.sleep(0.01)
            await anyio.sleep(0.3)
            stream.emit(token("f"))
            stream.emit(began(2))  # a new call wakes the consumer at once
            await anyio.sleep(0.5)
            stream.finish()

        async with anyio.create_task_group() as group:
            group.start_soon(producer)
            async for event in stream:
                reads.append(event)
                if event == began(2):
                    waited = anyio.current_time()
                    break
        return reads, waited

    reads, _ = anyio.run(main)
    assert reads[0] == token("a")
    assert reads[1] == token("bcde")  # read joined, not one wake-up per token
    assert reads[2:] == [token("f"), began(2)]


def test_an_interval_of_zero_wakes_the_consumer_for_each_token() -> None:
    async def main() -> list[LiveEvent]:
        stream = LiveStream(interval=0)
        reads: list[LiveEvent] = []

        async def producer() -> None:
            for piece in "abc":
                stream.emit(token(piece))
                await anyio.sleep(0.02)
            stream.finish()

        async with anyio.create_task_group() as group:
            group.start_soon(producer)
            reads = [event async for event in stream]
        return reads

    assert anyio.run(main) == [token("a"), token("b"), token("c")]


def test_callback_and_tee_hand_each_event_to_every_sink_in_order_and_await_it() -> None:
    async def main() -> tuple[list[Any], list[Any]]:
        plain: list[Any] = []
        awaited: list[Any] = []

        async def slow(event: LiveEvent) -> None:
            await anyio.sleep(0.01)
            awaited.append(event)

        both = Tee(Callback(plain.append), Callback(slow))
        await both.send(token("a"))
        both.emit(progress(1))  # from the event loop: awaited before the next event
        assert awaited == [token("a")]
        await both.put(began(1))
        return plain, awaited

    plain, awaited = anyio.run(main)
    assert plain == awaited == [token("a"), progress(1), began(1)]


Emitted = st.lists(
    st.one_of(
        st.tuples(st.just("token"), st.sampled_from(["r:1", "r:2"]), st.text(max_size=3)),
        st.tuples(st.just("progress"), st.sampled_from(["c1", "c2"]), st.integers(0, 9)),
        st.tuples(st.just("call"), st.integers(1, 99), st.just(0)),
        st.tuples(st.just("read"), st.just(""), st.integers(0, 3)),
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(script=Emitted, size=st.integers(1, 4))
def test_joining_never_loses_text_nor_reorders_calls(
    script: list[tuple[str, Any, Any]], size: int
) -> None:
    """Whatever the consumer's pace: every call (a `put`) arrives once and in order, each
    call's token text arrives whole and in order, a call's progress ends at its latest."""

    async def main() -> list[LiveEvent]:
        stream = LiveStream(size, interval=0)
        read: list[LiveEvent] = []
        for kind, key, value in script:
            if kind == "token":
                stream.emit(token(value, call=key))
            elif kind == "progress":
                stream.emit(progress(value, call=key))
            elif kind == "call":
                while len(stream._items) >= size:  # the run would wait: the consumer reads
                    read.append(await stream.__anext__())
                await stream.put(began(key))
            else:
                for _ in range(min(value, len(stream._items))):
                    read.append(await stream.__anext__())
        read += await drained(stream)
        return read

    read = anyio.run(main)
    calls = [k for kind, k, _ in script if kind == "call"]
    assert [e.seq for e in read if isinstance(e, CallStarted)] == calls
    for call in ("r:1", "r:2"):
        sent = "".join(v for kind, k, v in script if kind == "token" and k == call)
        got = "".join(e.text for e in read if isinstance(e, Token) and e.call_id == call)
        assert got == sent
    for call in ("c1", "c2"):
        sent_n = [v for kind, k, v in script if kind == "progress" and k == call]
        got_n = [e.data["n"] for e in read if isinstance(e, Progress) and e.call_id == call]
        assert got_n[-1:] == sent_n[-1:]
        assert len(got_n) <= len(sent_n)

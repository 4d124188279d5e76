"""The client against a hostile server (a real one on a loopback port): a reply too large or
nested too deep is a `TransportError` saying so, read within the client's `max_message_bytes`
(a 300 MiB `/schema` is never held), never a bare `RecursionError` or a memory blow-up."""

from __future__ import annotations

import asyncio
import json
import tracemalloc
from collections.abc import AsyncIterator, Iterator

import pytest
from fixtures.servers import serve
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from openenv_sdk.client import AsyncGenericEnvClient, GenericEnvClient
from openenv_sdk.errors import TransportError

MIB = 1024 * 1024
CHUNK = b" " * MIB
DEEP = "[" * 200_000 + "]" * 200_000


async def huge_schema(request: Request) -> Response:
    async def body() -> AsyncIterator[bytes]:
        for _ in range(300):  # 300 MiB of whitespace, no Content-Length: only reading tells
            yield CHUNK

    return StreamingResponse(body(), media_type="application/json")


async def deep_schema(request: Request) -> Response:
    return Response(DEEP, media_type="application/json")


async def deep_ws(websocket: WebSocket) -> None:
    await websocket.accept()
    async for text in websocket.iter_text():
        request = json.loads(text)
        if request["type"] == "session":  # the handshake goes well; the episode's replies do not
            data = {"session_id": "s" * 32, "mcp_token": "t" * 32}
            await websocket.send_text(json.dumps({"type": "session", "id": request.get("id"), "data": data}))
        else:
            await websocket.send_text(f'{{"type": "observation", "id": {request.get("id", 0)}, "data": {DEEP}}}')


def hostile_app(schema: str) -> Starlette:
    endpoint = {"huge": huge_schema, "deep": deep_schema}[schema]
    return Starlette(routes=[Route("/schema", endpoint), WebSocketRoute("/ws", deep_ws)])


@pytest.fixture(params=["huge", "deep"])
def hostile(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    with serve(hostile_app(request.param)) as url:
        yield request.param, url


def _peak_mib(call: object) -> float:
    tracemalloc.start()
    try:
        call()  # type: ignore[operator]
    finally:
        peak = tracemalloc.get_traced_memory()[1] / MIB
        tracemalloc.stop()
    return peak


def test_the_sync_client_refuses_a_hostile_schema(hostile: tuple[str, str]) -> None:
    """A 300 MiB or deeply nested `/schema` is a `TransportError` for the sync client, read within
    its bound (a 300 MiB body cost 905 MiB; a deep one raised a bare `RecursionError`)."""
    kind, url = hostile
    with GenericEnvClient(base_url=url, max_message_bytes=8 * MIB) as env:
        raised: list[BaseException] = []

        def fetch() -> None:
            try:
                env.schema()
            except BaseException as e:  # what it raises is the test
                raised.append(e)

        peak = _peak_mib(fetch)
    assert len(raised) == 1 and isinstance(raised[0], TransportError), raised
    assert ("over 8388608 bytes" if kind == "huge" else "nested too deep") in str(raised[0])
    assert peak < 40, f"{peak:.0f} MiB held to refuse it"


def test_the_async_client_refuses_a_hostile_schema(hostile: tuple[str, str]) -> None:
    """The same for the async client."""
    kind, url = hostile

    async def main() -> None:
        async with AsyncGenericEnvClient(base_url=url, max_message_bytes=8 * MIB) as env:
            with pytest.raises(TransportError, match="over 8388608 bytes" if kind == "huge" else "nested too deep"):
                await env.schema()

    asyncio.run(main())


def test_a_deeply_nested_websocket_reply_is_a_transport_error() -> None:
    """A deeply nested WebSocket reply is a `TransportError` (was a bare `RecursionError`), sync and async."""
    with serve(hostile_app("deep")) as url:
        with GenericEnvClient(base_url=url) as env, pytest.raises(TransportError, match="nested too deep"):
            env.reset()

        async def main() -> None:
            async with AsyncGenericEnvClient(base_url=url) as env:
                with pytest.raises(TransportError, match="nested too deep"):
                    await env.reset()

        asyncio.run(main())

"""The WebSocket replies of `openenv serve environments/echo`, byte for byte: a fixed exchange
(before and after reset, steps that pass and fail, tool calls in every spelling, bad envelopes,
ids of each kind) against the replies recorded in `data/ws_replies.json`.

The step path is tuned for speed (`_ws.py`, `_session.py`, `_wire.py`); this pins that no such
change alters a byte a client sees. The file was recorded before those changes (commit
848e865). A deliberate change of a reply re-records it: `python -m tests.server.test_ws_replies`.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from websockets.asyncio.client import connect

from .served import ECHO_DIR, serve_folder

RECORDED = Path(__file__).parent / "data" / "ws_replies.json"


async def _exchange(url: str, messages: list[str]) -> list[str]:
    replies = []
    async with connect(url, open_timeout=10, compression=None) as ws:
        for message in messages:
            await ws.send(message)
            replies.append(str(await asyncio.wait_for(ws.recv(), 10)))
    return replies


def _replies(messages: list[str]) -> list[str]:
    with serve_folder(ECHO_DIR) as (_, url):
        return asyncio.run(_exchange(url.replace("http://", "ws://") + "/ws", messages))


def test_replies_are_byte_identical_to_the_recorded_ones() -> None:
    recorded = json.loads(RECORDED.read_text())
    got = _replies(recorded["messages"])
    assert len(got) == len(recorded["replies"]) == 23
    for message, want, reply in zip(recorded["messages"], recorded["replies"], got, strict=True):
        assert reply == want, f"reply to {message[:80]!r} changed"


if __name__ == "__main__":  # re-record (a deliberate change of a reply)
    recorded = json.loads(RECORDED.read_text())
    recorded["replies"] = _replies(recorded["messages"])
    RECORDED.write_text(json.dumps(recorded, indent=1, ensure_ascii=False) + "\n")

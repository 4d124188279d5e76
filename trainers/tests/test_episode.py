"""`run_episode`: the token accounting runs beside the event loop, not on it."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from openenv_trainers.echo_task import echo_messages
from openenv_trainers.episode import EpisodeConfig, run_episode
from openenv_trainers.generation import SamplingParams, TransformersBackend
from openenv_trainers.tiny_model import ECHO_TOOL

from openenv_sdk.client import AsyncGenericEnvClient

from .conftest import echo_rubric


class _ThreadRecordingTokenizer:
    """The real tokenizer; records which threads render and tokenize."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.threads: set[str] = set()

    def apply_chat_template(self, *args: Any, **kwargs: Any) -> Any:
        self.threads.add(threading.current_thread().name)
        return self._inner.apply_chat_template(*args, **kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.threads.add(threading.current_thread().name)
        return self._inner(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_accounting_runs_on_its_own_thread_not_the_event_loop(model: Any, tokenizer: Any, echo_url: str) -> None:
    recording = _ThreadRecordingTokenizer(tokenizer)
    backend = TransformersBackend(model, pad_token_id=tokenizer.pad_token_id)
    config = EpisodeConfig(sampling=SamplingParams(max_tokens=32, temperature=0.8), max_turns=2, max_completion_tokens=96)
    async def run() -> list[Any]:
        sessions = [AsyncGenericEnvClient(base_url=echo_url, tool_transport="websocket") for _ in range(4)]
        try:
            return await asyncio.gather(
                *(
                    run_episode(
                        session,
                        backend,
                        recording,
                        prompt=echo_messages(f"word {i}"),
                        task={"text": f"word {i}"},
                        tools=[ECHO_TOOL],
                        rubric=echo_rubric(),
                        config=config,
                        seed=i,
                    )
                    for i, session in enumerate(sessions)
                )
            )
        finally:
            for session in sessions:
                await session.aclose()

    results = asyncio.run(run())
    assert all(r.turns >= 1 and len(r.completion_ids) == len(r.completion_mask) for r in results)
    assert recording.threads and all(name.startswith("openenv-accounting") for name in recording.threads), recording.threads

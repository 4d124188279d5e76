"""Branching rollouts and a greedy tree-search step over forks of a live wordle episode, on a real server."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from openenv_trainers.branching import branch, expand, fork_concurrently, greedy_step

from openenv_sdk import create_app
from openenv_sdk.client import AsyncEnvClient, AsyncGenericEnvClient
from openenv_sdk.loader import import_ref, load_environment
from openenv_sdk.rubric import agrade
from openenv_sdk.server import ServerConfig

from .conftest import WORDLE_DIR, serve


def _server(tmp_path: Path) -> Any:
    env_cls = load_environment(WORDLE_DIR).env_cls
    assert env_cls is not None
    return serve(create_app(env_cls, config=ServerConfig(checkpoint_dir=str(tmp_path))))


def test_branch_continues_one_prefix_n_ways(tmp_path: Path) -> None:
    async def main(url: str) -> None:
        async with AsyncGenericEnvClient(url) as env:
            await env.reset(task_id=17)
            await env.step({"guess": "crane"})

            async def play(copy: AsyncEnvClient[Any, Any, Any], i: int) -> list[str]:
                result = await copy.step({"guess": ["slate", "pious", "fight"][i]})
                return list(result.observation["board"])

            boards = await branch(env, 3, play, max_concurrency=2)
            assert [b[0] for b in boards] == [boards[0][0]] * 3 and boards[0][0].startswith("CRANE")
            assert [b[1][:5] for b in boards] == ["SLATE", "PIOUS", "FIGHT"]
            assert (await env.state())["guesses"] == ["crane"]  # the node itself did not move

    with _server(tmp_path) as url:
        asyncio.run(main(url))
    assert list(tmp_path.iterdir()) == []  # the forks' checkpoints were dropped


def test_a_failing_branch_raises_and_every_copy_is_closed(tmp_path: Path) -> None:
    async def main(url: str) -> None:
        async with AsyncGenericEnvClient(url) as env:
            await env.reset(task_id=3)
            seen: list[AsyncEnvClient[Any, Any, Any]] = []

            async def play(copy: AsyncEnvClient[Any, Any, Any], i: int) -> None:
                seen.append(copy)
                if i == 1:
                    raise RuntimeError("branch 1 failed")
                await copy.step({"guess": "crane"})

            with pytest.raises(RuntimeError, match="branch 1 failed"):
                await branch(env, 3, play)
            assert len(seen) == 3 and all(c.is_closed for c in seen)

    with _server(tmp_path) as url:
        asyncio.run(main(url))


def test_greedy_step_takes_the_action_whose_child_grades_best(tmp_path: Path) -> None:
    grader = import_ref(WORDLE_DIR, "grader:WordleGrader", what="grader")()

    async def main(url: str) -> None:
        async with AsyncGenericEnvClient(url) as env:
            await env.reset(task_id=17)
            answer = await env.call("reveal")
            candidates = [{"guess": w} for w in ("zzzzz", "slate", answer, "pious")]
            best, scored = await greedy_step(env, candidates, lambda child: agrade(grader, child))
            assert best == {"guess": answer}
            assert [a for a, _ in scored] == candidates and max(s for _, s in scored) == scored[2][1]
            state = await env.state()
            assert state["solved"] and state["guesses"] == [answer]  # taken in the node itself
            children = await expand(env, [{"guess": "crane"}])
            try:
                assert children[0].result.observation["message"] == "The game is over."
            finally:
                await children[0].client.aclose()

    with _server(tmp_path) as url:
        asyncio.run(main(url))


def test_fork_concurrently_restores_n_copies_at_once(tmp_path: Path) -> None:
    async def main(url: str) -> None:
        async with AsyncGenericEnvClient(url) as env:
            await env.reset(task_id=9)
            await env.step({"guess": "crane"})
            copies = await fork_concurrently(env, 4)
            try:
                states = [await c.state() for c in copies]
                assert states == [await env.state()] * 4
                ids = {(await c.session()).session_id for c in copies}
                assert len(ids) == 4 and (await env.session()).session_id not in ids
                assert all(c.trajectory.steps == env.trajectory.steps for c in copies)
            finally:
                for copy in copies:
                    await copy.aclose()

    with _server(tmp_path) as url:
        asyncio.run(main(url))
    assert list(tmp_path.iterdir()) == []

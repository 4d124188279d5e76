"""Branching rollouts and tree search over live episodes: fork a session at a prefix, play each branch.

`AsyncEnvClient.fork(n)` gives `n` sessions that continue the episode exactly where it stands
(environment state and workspace, see docs/fork.md). On it:

- `fork_concurrently(env, n)`: `fork(n)` with the `n` restores made at once;
- `branch(env, n, play)`: `n` continuations of one shared prefix, played concurrently (a GRPO
  group whose members share their first turns, or rollouts from a tree node);
- `expand(env, actions)`: one child per candidate action, each a fork that took it (a tree
  search's expansion step);
- `greedy_step(env, actions, score)`: expand, score each child (a grader over the child's
  episode, a value model), take the best action in `env` itself, close the children.

Example (wordle: pick the next guess by the grade each would give):

    >>> async with AsyncEnvClient(url) as env:  # doctest: +SKIP
    ...     await env.reset(task_id=17)
    ...     await env.step({"guess": "crane"})
    ...     best, results = await greedy_step(env, [{"guess": w} for w in ("slate", "pious", "mould")],
    ...                                       lambda child: agrade(WordleGrader(), child))

Every copy is closed when its branch ends, whatever the branch raised; the checkpoint behind a
fork is dropped once its copies are restored, so a search leaves nothing in the server's store.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from openenv_sdk.client import AsyncEnvClient
from openenv_sdk.errors import ServerError, TransportError

__all__ = ["Child", "branch", "expand", "fork_concurrently", "greedy_step"]

R = TypeVar("R")
C = TypeVar("C", bound=AsyncEnvClient[Any, Any, Any])


async def fork_concurrently(env: C, n: int) -> list[C]:
    """`env.fork(n)` with the `n` restores made at once rather than one after the other (one
    checkpoint, `n` new sessions restoring it concurrently, then the checkpoint dropped): what a
    tree search wants when it expands a node many ways. The copies start with `env`'s trajectory.

    Raises:
        ValueError: `n` is below 1.
        CheckpointError: the episode could not be kept or restored (no copy is left open).
    """
    if n < 1:
        raise ValueError(f"fork needs n >= 1 copies, got {n}")
    info = await env.checkpoint()
    copies = [env.sibling() for _ in range(n)]
    try:
        await asyncio.gather(*(copy.restore(info.handle) for copy in copies))
        for copy in copies:
            copy.trajectory = env.trajectory.model_copy(deep=True)
    except BaseException:
        for copy in copies:
            await copy.aclose()
        raise
    finally:
        with contextlib.suppress(ServerError, TransportError):
            await env.drop_checkpoint(info.handle)
    return copies


async def branch(env: C, n: int, play: Callable[[C, int], Awaitable[R]], *, max_concurrency: int | None = None) -> list[R]:
    """Fork `env` `n` ways and run `play(copy, i)` on each copy (at most `max_concurrency` at
    once); returns the results in order. `env`'s own episode goes on unchanged.

    Raises:
        ValueError: `n` or `max_concurrency` is below 1.
        CheckpointError: the episode could not be forked.
        Exception: the first exception a branch raised (the other branches still run to their end).
    """
    if max_concurrency is not None and max_concurrency < 1:
        raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
    copies = await fork_concurrently(env, n)
    gate = asyncio.Semaphore(max_concurrency or n)

    async def one(i: int, copy: C) -> R:
        async with gate:
            try:
                return await play(copy, i)
            finally:
                await copy.aclose()

    try:
        outcomes = await asyncio.gather(*(one(i, c) for i, c in enumerate(copies)), return_exceptions=True)
    finally:
        for copy in copies:  # a cancelled gather leaves some unclosed
            await copy.aclose()
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
    return [o for o in outcomes if not isinstance(o, BaseException)]


@dataclass
class Child(Generic[C]):
    """A fork of the node that took `action`: its client (open until closed) and the step's result."""

    action: Any
    client: C
    result: Any


async def expand(env: C, actions: Sequence[Any]) -> list[Child[C]]:
    """One child per action: a fork of `env` that took it. Close each child's `client` when done
    (`greedy_step` does).

    Raises:
        ValueError: no actions.
    """
    if not actions:
        raise ValueError("expand needs at least one action")
    copies = await fork_concurrently(env, len(actions))
    try:
        results = await asyncio.gather(*(copy.step(action) for copy, action in zip(copies, actions, strict=True)))
    except BaseException:
        for copy in copies:
            await copy.aclose()
        raise
    return [Child(action=a, client=c, result=r) for a, c, r in zip(actions, copies, results, strict=True)]


async def greedy_step(
    env: C, actions: Sequence[Any], score: Callable[[C], Awaitable[Any]]
) -> tuple[Any, list[tuple[Any, float]]]:
    """Expand `env` by `actions`, score each child with `score(child_client)` (a number, or
    anything with a `.value`, such as a grader's `Score`), then take the best action in `env`
    itself (the first of the best, on a tie). Returns that action and every `(action, score)`.

    The children are closed before returning. Scoring a child is scoring the episode as it would
    be after that action, which the step in `env` then reproduces exactly.
    """
    children = await expand(env, actions)
    try:
        raw = await asyncio.gather(*(score(child.client) for child in children))
    finally:
        for child in children:
            await child.client.aclose()
    scored = [(child.action, float(getattr(s, "value", s))) for child, s in zip(children, raw, strict=True)]
    best = max(range(len(scored)), key=lambda i: scored[i][1])
    await env.step(scored[best][0])
    return scored[best][0], scored

"""Where episodes run (`EnvTarget`: a folder, an image, or a server URL) and what grades them.

A folder is served once by `LocalProcessProvider` and an image run once by `DockerProvider`
(the clients' own providers); every episode then opens its own session on that one server. The
grader is the folder's `grader:` (its `openenv.yaml`); an image or a URL names one with
`grader=` (a folder, or `module:attribute`).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

from ..client import AsyncGenericEnvClient
from ..errors import ClientStateError, ManifestError, ServerError, TransportError
from ..loader import load_grader
from ..tasks import ServedTask
from ._records import PlannedEpisode

__all__ = ["EnvTarget", "plan_episodes"]


def _looks_like_a_path(spec: str) -> bool:
    """`./x`, `/x`, `~/x`, or `dir/x` where `dir` is a folder here (an image is `[registry/]org/name[:tag]`)."""
    if spec.startswith((".", "/", "~")):
        return True
    head, sep, _ = spec.partition("/")
    return bool(sep) and Path(head).is_dir()


class EnvTarget:
    """An environment to run episodes in: started once, then shared by every episode's session.

    Args:
        spec: an environment folder, a server URL (`http(s)://...`), or an image name.
        grader: a folder or `module:attribute`; default the folder's own grader.
        orchestrator_token: a URL's orchestrator token (a folder's or image's server gets a new one).
        startup_timeout_s: the longest wait for a folder's or image's server to become healthy.
        timeout_s: each session's longest wait for one reply, in seconds.

    Raises:
        ManifestError: no grader can be found (a URL or image without `grader=`, a folder without one).
    """

    def __init__(
        self,
        spec: str,
        *,
        grader: str | None = None,
        orchestrator_token: str | None = None,
        startup_timeout_s: float = 120.0,
        timeout_s: float = 60.0,
    ) -> None:
        self.spec = spec
        self.timeout_s = timeout_s
        self._token = orchestrator_token
        self._url: str | None = None
        self._name: str | None = None
        self.provider: Any = None
        if spec.startswith(("http://", "https://")):
            self.kind = "url"
            self._url = spec.rstrip("/")
        elif Path(spec).is_dir() or _looks_like_a_path(spec):
            from ..providers.local import LocalProcessProvider

            self.kind = "folder"
            if not Path(spec).is_dir():
                raise ManifestError(f"{spec}: no such environment folder")
            self.provider = LocalProcessProvider(spec, startup_timeout_s=startup_timeout_s)
        else:
            from ..providers.docker import DockerProvider

            self.kind = "image"
            self.provider = DockerProvider(spec, startup_timeout_s=startup_timeout_s)
        if grader is None and self.kind != "folder":
            raise ManifestError(
                f"{spec} is {'a URL' if self.kind == 'url' else 'an image'}: the grader runs here, so name it "
                "with --grader (the environment's folder, or module:attribute)"
            )
        self.rubric = load_grader(grader if grader is not None else spec)

    def __repr__(self) -> str:
        return f"EnvTarget({self.spec!r}, kind={self.kind!r})"

    @property
    def name(self) -> str:
        """The environment's name (its `/metadata` name once started; until then the spec)."""
        return self._name or self.spec

    async def start(self) -> str:
        """Start the server (a folder or image) once, and read its name; returns its base URL.

        Raises:
            openenv_sdk.errors.ProviderError: it could not start or become healthy.
            openenv_sdk.errors.TransportError: a URL's server does not answer.
        """
        if self._url is None:
            self._url = str(await asyncio.to_thread(self.provider.start)).rstrip("/")
            self._token = getattr(self.provider, "orchestrator_token", None) or self._token
        if self._name is None:
            self._name = await self._metadata_name(self._url)
        return self._url

    async def _metadata_name(self, url: str) -> str:
        try:
            async with httpx.AsyncClient(timeout=self.timeout_s) as http:
                response = await http.get(f"{url}/metadata")
        except httpx.HTTPError as e:
            raise TransportError(f"GET {url}/metadata failed: {type(e).__name__}: {e}") from e
        body = response.json() if response.headers.get("content-type", "").startswith("application/json") else {}
        name = body.get("name") if isinstance(body, dict) else None
        return str(name) if name else self.spec

    def client(self) -> AsyncGenericEnvClient:
        """A new client (one session) of the started server."""
        if self._url is None:
            raise ClientStateError("start() the target first")
        # the runner calls tools on the agent's behalf: one round trip on the session's WebSocket
        return AsyncGenericEnvClient(
            self._url, orchestrator_token=self._token, timeout_s=self.timeout_s, tool_transport="websocket"
        )

    async def stop(self) -> None:
        if self.provider is not None:
            await asyncio.to_thread(self.provider.stop)


async def plan_episodes(
    client: AsyncGenericEnvClient,
    *,
    split: str | None,
    task_ids: list[str],
    num_tasks: int | None,
    rollouts: int,
    default_split: str,
) -> tuple[str | None, list[PlannedEpisode]]:
    """The episodes to play, from the server's Task API: `task_ids` when given, else the first
    `num_tasks` tasks (all when None) of `split` (default `default_split` when the server has
    it, else its first split). An environment without tasks gets `num_tasks` (default 1) tasks
    `seed-0`, `seed-1`, ... started with `reset(seed=i)`.

    Returns:
        The split used (None for ids or seeds) and the episodes, `rollouts` per task.

    Raises:
        openenv_sdk.errors.InvalidActionError: an unknown split or task id (the message says
            which exist).
    """
    tasks: list[ServedTask | PlannedEpisode]
    if task_ids:
        tasks = [await client.task(task_id) for task_id in task_ids]
        split = None
    else:
        try:
            splits = await client.splits()
        except ServerError as e:
            if e.code not in ("HTTP_404", "NOT_FOUND"):
                raise
            splits = []  # a server without the Task API (OpenEnv's older servers)
        if not splits:
            if split is not None:
                raise ValueError(f"{split!r}: the environment serves no tasks, so there are no splits to pick")
            count = num_tasks if num_tasks is not None else 1
            tasks = [PlannedEpisode(task_id=f"seed-{i}", attempt=0, reset_kwargs={"seed": i}) for i in range(count)]
        else:
            names = [s.name for s in splits]
            if split is None:
                split = default_split if default_split in names else names[0]
            stop = num_tasks if num_tasks is not None else None
            tasks = list(await client.tasks(split, start=0, stop=stop) if stop is not None else await client.tasks(split))
    episodes = []
    for task in tasks:
        for attempt in range(rollouts):
            if isinstance(task, PlannedEpisode):
                episodes.append(task.model_copy(update={"attempt": attempt}))
                continue
            public = {k: v for k, v in task.model_dump(mode="json").items() if k not in ("reset_kwargs",)}
            episodes.append(
                PlannedEpisode(task_id=task.id, split=task.split, attempt=attempt, reset_kwargs=task.reset_kwargs, task=public)
            )
    return split, episodes

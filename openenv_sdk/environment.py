"""The contract: an environment is one class.

Subclass `Environment[MyAction, MyObservation, MyState]`, implement `reset` and `step` (or only
mark tools with `@tool`: the default `step` then runs tool-call actions), and the SDK serves it.
"""

from __future__ import annotations

import inspect
import typing
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel

from .errors import EnvironmentDefinitionError
from .tasks import TaskRecord, records_from_task_provider
from .tools import RESERVED_NAMES, ToolSpec, collect_orchestrator_calls, collect_tools
from .types import Action, Observation, State

__all__ = ["Environment"]

ActT = TypeVar("ActT", bound=Action)
ObsT = TypeVar("ObsT", bound=Observation)
StateT = TypeVar("StateT", bound=State)


class Environment(Generic[ActT, ObsT, StateT]):
    """Base class of every environment.

    Type parameters give the action, observation and state models; they become the server's
    `/schema` and validate every action before `step` sees it.

    Methods (sync or `async def`, either works; OpenEnv's `reset_async`/`step_async` overrides
    are honoured too):

    - `reset(seed=None, episode_id=None, **task) -> Observation`: start an episode. Task fields
      (e.g. `task_id`) arrive as keyword arguments.
    - `step(action) -> Observation`: apply one action. The default runs tool-call actions
      (`{"tool": name, "arguments": {...}}`, or OpenEnv's `call_tool`/`list_tools`), so an
      environment made only of `@tool` methods is a complete gym-style environment.
    - `state -> State`: the episode's state (a property).
    - `close()`: free resources; called when the session ends, whatever the reason.
    - `tasks() -> Sequence[TaskRecord]` (a classmethod): the environment's tasks and their
      splits, public fields only, served by the Task API (`/{env}/splits`, `/{env}/tasks`, ...).
      The default has none, or reads OpenEnv's `TaskProvider` methods when the class has them.

    Class options:

    - `SUPPORTS_CONCURRENT_SESSIONS`: one server may hold many instances at once (default True).
      When False the server holds at most one session.
    - `THREAD_AFFINITY`: which thread runs a session's blocking sync calls (one at a time, in
      order, off the event loop, whichever it is):
      - `None` (the default): always the same thread for a session, so what a call leaves bound
        to its thread (a `sqlite3` connection opened in `reset`, a C library's or a game
        engine's thread-local state) works in the next call (open such things in `reset`, not
        `__init__`, which runs on the server's event loop). Up to 64 sessions at once each
        have a thread of their own; past that, sessions share threads (each session
        still on one), and a call that hangs can hold up the sessions on its thread.
      - `True`: a thread of its own for every session, however many (10,000 sessions hold
        10,000 threads).
      - `False`: the class is free-threaded: any thread of the server's shared pool, not always
        the same one, and a session between calls holds none; a call that hangs holds up its
        own session only. Set it only when nothing the environment holds is bound to a thread.
    - `BLOCKING`: sync methods may block, so run them off the event loop (default True). Set it
      False for environments whose sync methods are quick and never block; they then run on the
      event loop, saving a thread hop per call.
    """

    action_type: ClassVar[type[Action]] = Action
    observation_type: ClassVar[type[Observation]] = Observation
    state_type: ClassVar[type[State]] = State
    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    version: ClassVar[str | None] = None

    SUPPORTS_CONCURRENT_SESSIONS: ClassVar[bool] = True
    THREAD_AFFINITY: ClassVar[bool | None] = None
    BLOCKING: ClassVar[bool] = True

    tool_specs: ClassVar[dict[str, ToolSpec]] = {}
    orchestrator_calls: ClassVar[dict[str, str]] = {}

    _state: State | None = None
    episode_done: bool = False
    """Set it to True from a tool (e.g. `submit`) to end the episode; the default `step` reports it."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _infer_model_types(cls)
        for verb in RESERVED_NAMES:
            member = cls.__dict__.get(verb)
            if member is not None and getattr(member, "__openenv_tool__", None) is not None:
                raise EnvironmentDefinitionError(
                    f"{cls.__name__}.{verb}: a tool cannot be named {verb!r}: reset, step, state and "
                    f"close are the orchestrator's verbs and are never exposed to the agent. Rename the "
                    f"method (a tool method named {verb!r} would also replace the orchestrator's {verb})."
                )
        for hook in ("snapshot", "restore"):
            member = cls.__dict__.get(hook)
            if member is not None and getattr(member, "__openenv_tool__", None) is not None:
                raise EnvironmentDefinitionError(
                    f"{cls.__name__}.{hook}: a tool cannot be named {hook!r}: it is the checkpoint hook "
                    f"(orchestrator-only, never shown to the agent). Rename the method."
                )
        cls.tool_specs = collect_tools(cls)
        cls.orchestrator_calls = collect_orchestrator_calls(cls)
        clash = set(cls.orchestrator_calls) & RESERVED_NAMES
        if clash:
            raise EnvironmentDefinitionError(
                f"{cls.__name__}: orchestrator calls cannot be named {sorted(clash)}: reset, step, state and "
                f"close are the orchestrator's verbs already. Rename the method."
            )
        if not cls.name:
            cls.name = cls.__name__
        if not cls.description:
            cls.description = (inspect.getdoc(cls) or "").split("\n\n")[0].strip()

    # --- the contract --------------------------------------------------------------------

    def reset(self, seed: int | None = None, episode_id: str | None = None, **task: Any) -> ObsT:
        """Start a new episode and return its first observation."""
        self.state = typing.cast(StateT, self.state_type(episode_id=episode_id or uuid.uuid4().hex))
        self.episode_done = False
        return typing.cast(ObsT, self.observation_type())

    def step(self, action: ActT) -> ObsT:
        """Apply one action. The default handles tool calls only; the server runs them."""
        raise NotImplementedError(
            f"{type(self).__name__} has no step() for {type(action).__name__}: implement step(), "
            f"or send tool-call actions ({{'tool': name, 'arguments': {{...}}}})"
        )

    @property
    def state(self) -> StateT:
        """The current episode's state."""
        if self._state is None:
            self._state = self.state_type()
        return typing.cast(StateT, self._state)

    @state.setter
    def state(self, value: StateT) -> None:
        """Replace the episode's state (in `reset`, typically): an instance of `state_type`."""
        if not isinstance(value, self.state_type):
            raise TypeError(
                f"{type(self).__name__}.state must be a {self.state_type.__name__} (its state_type), "
                f"got {type(value).__name__}"
            )
        self._state = value

    def close(self) -> None:
        """Free what the environment holds. Called once when its session ends."""

    # --- checkpoint and restore (optional; orchestrator-only, never tools) -------------------

    def snapshot(self, folder: Path) -> dict[str, Any]:
        """The episode as it stands, for `checkpoint`: JSON data, plus any files it needs written
        into `folder` (an empty directory the server owns and keeps with the data).

        The default keeps `state`, `episode_done` and plain-data attributes (`default_snapshot`);
        an environment holding more (a sandbox, a process) overrides this and `restore`.

        Raises:
            SnapshotUnsupported: the episode cannot be kept (the message says why).
        """
        from .snapshots import default_snapshot

        return default_snapshot(self)

    def restore(self, data: dict[str, Any], folder: Path) -> None:
        """Continue the episode `snapshot` returned `data` (and wrote `folder`) for, in this
        instance: a fresh one, or one whose episode is discarded by this call. Afterwards every
        call must behave exactly as on the original at the moment of its snapshot.

        Raises:
            SnapshotUnsupported: `data` is not a snapshot this class can restore.
        """
        from .snapshots import default_restore

        default_restore(self, data)

    @classmethod
    def tasks(cls) -> Sequence[TaskRecord]:
        """The tasks this environment offers, each with an id, a split and its `reset` arguments.

        Called once per server, on the first Task API request, with no instance: read task files,
        never state. Put public fields only in a record (title, prompt, starting files): the Task
        API is the orchestrator's, but nothing hidden (answers, tests) belongs there.

        The default has none, unless the class has OpenEnv's `TaskProvider` methods
        (`list_splits`, `list_tasks`): then it reads them from a fresh instance.
        """
        if callable(getattr(cls, "list_splits", None)) and callable(getattr(cls, "list_tasks", None)):
            env = cls()
            try:
                return records_from_task_provider(env)
            finally:
                env.close()
        return ()

    # --- what the server asks of a class ------------------------------------------------

    @classmethod
    def handles_tool_calls_in_step(cls) -> bool:
        """True when `step` is the default, so tool-call actions are run by the SDK."""
        return _defines(cls, "step") is Environment and _defines(cls, "step_async") is None

    @classmethod
    def tools_schema(cls) -> list[dict[str, Any]]:
        return [spec.schema().model_dump() for spec in cls.tool_specs.values()]


def _defines(cls: type, attr: str) -> type | None:
    for klass in cls.__mro__:
        if attr in vars(klass):
            return klass
    return None


def _infer_model_types(cls: type) -> None:
    """Read `Environment[A, O, S]` from the class's bases into action/observation/state types."""
    for base in getattr(cls, "__orig_bases__", ()):
        origin = typing.get_origin(base)
        if origin is None or not (isinstance(origin, type) and issubclass(origin, Environment)):
            continue
        args = typing.get_args(base)
        for name, arg, expected in zip(
            ("action_type", "observation_type", "state_type"), args, (Action, Observation, State), strict=False
        ):
            if isinstance(arg, TypeVar):
                continue
            if not (isinstance(arg, type) and issubclass(arg, BaseModel) and issubclass(arg, expected)):
                raise EnvironmentDefinitionError(
                    f"{cls.__name__}: type parameter {name.removesuffix('_type')} must subclass "
                    f"openenv_sdk.{expected.__name__}, got {arg!r}"
                )
            if name not in vars(cls):
                setattr(cls, name, arg)

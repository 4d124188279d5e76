"""Fixtures of the trainer adapters' tests: a scripted chat model and the echo environment, each
served over real HTTP in process. No torch here: each trainer's tests run in that trainer's venv
(`scripts/setup_trainer_adapters.sh`), which has the SDK and `openenv_trainers` but not TRL.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import mcp  # noqa: F401 - at collection, in the main thread: a first import racing a server thread's deadlocks
import pytest

from openenv_sdk.testing import labelled_builds, serve_app

# ART imports litellm, which otherwise fetches a price list from the internet at import.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from .scripted_chat import ChatServer, ScriptedChat, TinyModelReply

REPO = Path(__file__).resolve().parents[2]
ECHO_DIR = REPO / "environments" / "echo"
WORDLE_DIR = REPO / "environments" / "wordle"
ECHO_GRADER = "openenv_trainers.echo_task:ExactEchoGrader"

serve = functools.partial(serve_app, timeout_s=20.0)


@pytest.fixture(scope="session", autouse=True)
def _remove_the_images_this_session_built() -> Iterator[None]:
    """Every image this session builds (in process, or by `openenv build` in a child process)
    carries a label of the session's own, and it and its containers are removed at the end,
    never another run's: as the main suite does (tests/conftest.py)."""
    with labelled_builds(remove=os.environ.get("OPENENV_TEST_CONTAINERS") == "1"):
        yield


@pytest.fixture
def scripted() -> Iterator[tuple[ScriptedChat, str]]:
    """The scripted model and its OpenAI base URL (`.../v1`)."""
    chat = ScriptedChat()
    with serve(chat.app) as url:
        yield chat, f"{url}/v1"


@pytest.fixture
def echo_url() -> Iterator[str]:
    """The shipped echo environment, served in process (one server per test)."""
    from openenv_sdk import ServerConfig, create_app
    from openenv_sdk.loader import load_environment

    with serve(create_app(load_environment(ECHO_DIR).env_cls, config=ServerConfig())) as url:
        yield url


def health(url: str) -> dict[str, Any]:
    """The server's `/health` (its `active_sessions` and `mcp_sessions` counts)."""
    return httpx.get(f"{url}/health", timeout=10).json()


def echo_grade(url: str, text: str, said: str | None) -> float:
    """The echo grader's reward for an episode of `text` whose agent sent `said` to `echo` (None:
    made no call), graded on a fresh session of its own (not through any adapter)."""
    from openenv_trainers.echo_task import ExactEchoGrader

    from openenv_sdk import GenericEnvClient, grade

    with GenericEnvClient(url) as env:
        env.reset(text=text)
        if said is not None:
            env.call_tool("echo", message=said)
        return grade(ExactEchoGrader(), env).value


@pytest.fixture(scope="session", autouse=True)
def transformers_unpatched() -> Iterator[None]:
    """Undo what importing `art` does to transformers (`art/transformers/patches.py` swaps in a
    mask function that transformers 5.10, verl's pin, calls with other arguments, so generation
    fails): ART and the tiny model never share a process in a run, but they share this session."""
    patches = sys.modules.get("art.transformers.patches")
    with pytest.MonkeyPatch.context() as mp:
        if patches is not None:
            from transformers import masking_utils

            mp.setattr(masking_utils, "_preprocess_mask_arguments", patches._preprocess_mask_arguments)
        yield


@pytest.fixture(scope="session")
def tiny_model_dir(transformers_unpatched: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model taught the echo tool call (built once per session, ~30 s; reuse one with
    `OPENENV_TRAINERS_TINY_MODEL=/folder`)."""
    import torch
    from openenv_trainers.tiny_model import build_tiny_model

    torch.set_num_threads(1)
    folder = os.environ.get("OPENENV_TRAINERS_TINY_MODEL")
    return build_tiny_model(Path(folder) if folder else tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture
def tiny_chat(tiny_model_dir: Path) -> Iterator[tuple[ChatServer, str]]:
    """The tiny model behind an OpenAI chat-completions endpoint, and its base URL (`.../v1`)."""
    chat = ChatServer(TinyModelReply(tiny_model_dir), model="tiny")
    with serve(chat.app) as url:
        yield chat, f"{url}/v1"

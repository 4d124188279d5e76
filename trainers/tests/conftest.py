"""Shared fixtures: a tiny tool-calling model, real environment servers, a real completions server.

Everything runs on CPU with one torch thread (on a small shared machine, more threads are slower).
Set `OPENENV_TRAINERS_TINY_MODEL=/some/folder` to reuse a built tiny model between runs.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest
import torch

from openenv_sdk.testing import labelled_builds, serve_app

torch.set_num_threads(1)

REPO = Path(__file__).resolve().parents[2]
ECHO_DIR = REPO / "environments" / "echo"
WORDLE_DIR = REPO / "environments" / "wordle"


serve = functools.partial(serve_app, timeout_s=20.0)
"""`openenv_sdk.testing.serve_app`, waiting longer: a loaded machine starts uvicorn slowly."""


@pytest.fixture(scope="session", autouse=True)
def _remove_the_images_this_session_built() -> Iterator[None]:
    """Every image this session builds (in process, or by `openenv build` in a child process)
    carries a label of the session's own, and it and its containers are removed at the end,
    never another run's: as the main suite does (tests/conftest.py)."""
    with labelled_builds(remove=os.environ.get("OPENENV_TEST_CONTAINERS") == "1"):
        yield


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Qwen2 model taught the tool-call format (built once per session, ~30 s)."""
    from openenv_trainers.tiny_model import build_tiny_model

    folder = os.environ.get("OPENENV_TRAINERS_TINY_MODEL")
    return build_tiny_model(Path(folder) if folder else tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="session")
def tokenizer(tiny_model_dir: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.fixture
def model(tiny_model_dir: Path) -> Any:
    """A fresh copy of the tiny model (tests may train it)."""
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()


@pytest.fixture(scope="session")
def echo_url() -> Iterator[str]:
    """The shipped echo environment, served in process (one server for the session)."""
    from openenv_sdk import ServerConfig, create_app
    from openenv_sdk.loader import load_environment

    env_cls = load_environment(ECHO_DIR).env_cls
    with serve(create_app(env_cls, config=ServerConfig())) as url:
        yield url


@pytest.fixture
def completions_server(model: Any, tokenizer: Any) -> Iterator[str]:
    """The tiny model behind the OpenAI-compatible completions server, over real HTTP."""
    from openenv_trainers.generation import TransformersBackend
    from openenv_trainers.generation.server import create_completions_app

    backend = TransformersBackend(model, pad_token_id=tokenizer.pad_token_id)
    with serve(create_completions_app(backend, tokenizer, model_name="tiny")) as url:
        yield url


def echo_rubric() -> Any:
    from openenv_trainers.echo_task import ExactEchoGrader

    return ExactEchoGrader()


def cpu_grpo_args(name: str, **settings: Any) -> Any:
    """A `GRPOConfig` for a short CPU run: no bf16, no reports or checkpoints, seed 0, a log line
    every step; `settings` are the test's own (batch, lengths, steps, optimizer, temperature)."""
    from trl import GRPOConfig

    defaults = {"use_cpu": True, "bf16": False, "logging_steps": 1, "report_to": [], "save_strategy": "no", "seed": 0}
    return GRPOConfig(output_dir=f"/tmp/openenv-trainers-test-{name}", **{**defaults, **settings})

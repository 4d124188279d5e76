"""Shared fixtures: a tiny tool-calling model, real environment servers, a real completions server.

Everything runs on CPU with one torch thread (on a small shared machine, more threads are slower).
Set `OPENENV_TRAINERS_TINY_MODEL=/some/folder` to reuse a built tiny model between runs.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest
import torch

torch.set_num_threads(1)

REPO = Path(__file__).resolve().parents[2]
ECHO_DIR = REPO / "environments" / "echo"
WORDLE_DIR = REPO / "environments" / "wordle"


@contextlib.contextmanager
def serve(app: Any, *, timeout_s: float = 20.0) -> Iterator[str]:
    """Run an ASGI app with uvicorn on a free loopback port, in a thread; yields its base URL."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", ws_max_size=16 * 1024 * 1024))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name=f"uvicorn-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"uvicorn did not start on port {port} within {timeout_s} s")
        time.sleep(0.005)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout_s)
        sock.close()


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

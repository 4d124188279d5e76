"""mini-swe-agent, installed from the package registry as its `AgentSpec` says, run through interception.

Runs `examples/agents/mini_swe_agent_intercepted.py`: the spec's install (cached in `.cache/agents/`
at the repository root, so only the first run pays for it: about a minute), then real episodes
in which the agent's every model call is answered by a scripted policy on the interception server
and the agent executes the commands itself: as a subprocess, and in the terminal environment's
sandbox through the orchestrator's `run_agent` call.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from openenv_sdk.agents import known

from .conftest import REPO

DEMO_PATH = REPO / "examples" / "agents" / "mini_swe_agent_intercepted.py"
CACHE = REPO / ".cache" / "agents"


def _load_demo() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mini_swe_agent_intercepted", DEMO_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


demo = _load_demo()


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> float:
    """Install the agent once, or find it in the cache; the seconds the install command took."""
    return demo.install_agent(known.MINI_SWE_AGENT, home=tmp_path_factory.mktemp("home"), cache_dir=CACHE)


@pytest.mark.timeout(900)
def test_install_from_the_registry_is_idempotent(installed: float, tmp_path: Path) -> None:
    venv = CACHE / f"mini-swe-agent-{known.MINI_SWE_AGENT_VERSION}"
    assert (venv / ".installed").is_file() and (venv / "bin" / "mini").is_file()
    assert demo.install_agent(known.MINI_SWE_AGENT, home=tmp_path, cache_dir=CACHE) < 5.0, "a second install is a no-op"
    assert demo.install_agent(known.MINI_SWE_AGENT_TEXT, home=tmp_path, cache_dir=CACHE) < 5.0, "both specs share it"


@pytest.mark.timeout(900)
def test_tool_call_episode_is_intercepted_end_to_end(installed: float, tmp_path: Path) -> None:
    episode = demo.run_episode(known.MINI_SWE_AGENT, scratch=tmp_path, cache_dir=CACHE, timeout_s=120)

    assert episode.exit_code == 0 and not episode.timed_out, episode.output[-3000:]
    assert episode.file_text == "written by mini-swe-agent\n"  # the agent ran the command itself
    assert len(episode.requests) == 2, episode.requests  # write the file, then submit: every call intercepted
    first, second = episode.requests
    assert first["roles"] == ["system", "user"] and first["tools"] == ["bash"]
    assert "hello.txt" in first["last"] and not first["stream"] and first["model"] == "policy"
    assert second["roles"] == ["system", "user", "assistant", "tool"]
    assert '"returncode": 0' in second["last"] and "written by mini-swe-agent" in second["last"]


@pytest.mark.timeout(900)
def test_text_based_episode_is_intercepted_end_to_end(installed: float, tmp_path: Path) -> None:
    episode = demo.run_episode(known.MINI_SWE_AGENT_TEXT, scratch=tmp_path, cache_dir=CACHE, timeout_s=120)

    assert episode.exit_code == 0 and not episode.timed_out, episode.output[-3000:]
    assert episode.file_text == "written by mini-swe-agent\n"
    assert [r["roles"] for r in episode.requests] == [["system", "user"], ["system", "user", "assistant", "user"]]
    assert all(r["tools"] == [] for r in episode.requests)
    assert "<returncode>0</returncode>" in episode.requests[1]["last"]


@pytest.mark.timeout(900)
def test_a_wrong_secret_makes_the_agent_fail_fast(installed: float, tmp_path: Path) -> None:
    episode = demo.run_episode(
        known.MINI_SWE_AGENT, scratch=tmp_path, cache_dir=CACHE, wrong_secret=True, timeout_s=120
    )

    assert episode.exit_code == 1 and not episode.timed_out
    assert episode.duration_s < 60
    assert episode.requests == []  # refused (401) before it reached the trainer
    assert "AuthenticationError" in episode.output
    assert episode.file_text is None


@pytest.mark.timeout(900)
def test_a_rollout_the_trainer_closes_ends_the_agent_without_retries(installed: float, tmp_path: Path) -> None:
    def give_up(request: Any) -> None:
        return None  # the trainer closes the rollout: the waiting call gets 410

    episode = demo.run_episode(known.MINI_SWE_AGENT, scratch=tmp_path, cache_dir=CACHE, policy=give_up, timeout_s=120)

    assert episode.exit_code == 1 and not episode.timed_out
    assert episode.duration_s < 60  # one attempt (MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT=1), no back-off
    assert len(episode.requests) == 1
    assert "410" in episode.output or "has ended" in episode.output


@pytest.mark.timeout(900)
def test_the_terminal_environment_runs_it_in_its_sandbox(installed: float) -> None:
    episode = demo.run_in_terminal_environment(known.MINI_SWE_AGENT, cache_dir=CACHE, timeout_s=120)

    assert episode.exit_code == 0 and not episode.timed_out, episode.output[-3000:]
    assert episode.file_text == "written by mini-swe-agent\n"  # in the episode's workspace
    assert [r["roles"][-1] for r in episode.requests] == ["user", "tool"]

"""`openenv collect`: teacher rollouts to JSONL and a `datasets.Dataset`, with token ids and logprobs
when the policy gives them (a server that returns them as vLLM does, or a local scripted policy),
and a rerun that resumes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import datasets
import pytest
from typer.testing import CliRunner

from openenv_sdk.cli.main import app
from openenv_sdk.evaluation import EpisodeLog, chat_messages
from tests.evaluation import scripted_policy
from tests.evaluation.policy_server import WORDLE_DIR, answer

HERE = Path(__file__).resolve().parent


def run_collect(*args: str) -> Any:
    return CliRunner().invoke(app, ["collect", *args], env={"COLUMNS": "200"})


def test_rollouts_become_a_dataset_with_the_servers_token_ids_and_logprobs(
    policy_server: Any, wordle_url: str, tmp_path: Path
) -> None:
    url, seen = policy_server
    out = tmp_path / "sft"
    result = run_collect(wordle_url, "--grader", str(WORDLE_DIR), "--base-url", url, "--model", "tokens",
                         "--logprobs", "--token-ids", "--split", "train", "-n", "3", "-o", str(out))  # fmt: skip
    assert result.exit_code == 0, result.output
    assert all(s["body"]["logprobs"] is True and s["body"]["return_token_ids"] is True for s in seen)
    rows = datasets.load_from_disk(str(out / "dataset"))
    assert len(rows) == 3
    row = sorted(rows, key=lambda r: r["key"])[1]
    assert (row["key"], row["task_id"], row["split"], row["reward"], row["passed"]) == ("1#0", "1", "train", pytest.approx(1.7), True)
    assert [m["role"] for m in row["messages"]] == ["system", "user", "assistant", "tool", "assistant"]
    call = row["messages"][2]["tool_calls"][0]
    assert (call["id"], call["function"]["name"], json.loads(call["function"]["arguments"])) == ("call_0", "guess", {"word": answer("1")})
    assert row["messages"][3]["tool_call_id"] == "call_0" and row["messages"][3]["content"].endswith("GGGGG")
    assert json.loads(row["tools"])[0]["function"]["name"] == "guess"
    assert json.loads(row["reward_components"]) == {"solved": 1.0, "speed": 1.0, "greens": 1.0}
    assert row["tokens"] == [
        {"turn": 0, "prompt_token_ids": [100, 101, 102, 103], "token_ids": [7, 8, 9], "logprobs": [-0.25, -0.5, -0.75]},
        {"turn": 1, "prompt_token_ids": [100, 101, 102, 103, 104], "token_ids": [7, 8, 10], "logprobs": [-0.25, -0.5, -0.75]},
    ]
    assert "dataset: 3 row(s)" in result.output
    # Ready for a tool-calling chat template: arguments as a dict, no Arrow-filled None fields.
    ready = chat_messages(row["messages"])
    assert ready[2] == {"role": "assistant", "tool_calls": [
        {"id": "call_0", "type": "function", "function": {"name": "guess", "arguments": {"word": answer("1")}}}]}  # fmt: skip
    assert ready[3] == {"role": "tool", "content": row["messages"][3]["content"], "tool_call_id": "call_0"}


def test_a_local_scripted_policy_gives_tokens_and_min_reward_filters_the_dataset(
    wordle_url: str, tmp_path: Path
) -> None:
    out = tmp_path / "scripted"
    policy = f"scripted:{HERE / 'scripted_policy.py'}:act"
    result = run_collect(wordle_url, "--grader", str(WORDLE_DIR), "--policy", policy, "--split", "train",
                         "-n", "2", "-r", "2", "--min-reward", "1", "-o", str(out))  # fmt: skip
    assert result.exit_code == 0, result.output
    records = EpisodeLog(out / "episodes.jsonl").load()
    assert sorted(records) == ["0#0", "0#1", "1#0", "1#1"]
    assert {k: r.reward for k, r in records.items()} == {"0#0": pytest.approx(1.7), "0#1": 0.0, "1#0": pytest.approx(1.7), "1#1": 0.0}
    rows = datasets.load_from_disk(str(out / "dataset"))
    assert sorted(rows["key"]) == ["0#0", "1#0"]  # the losing attempts are in the JSONL only
    assert rows[0]["tokens"][0] == {"turn": 0, "prompt_token_ids": [1, 1, 1], "token_ids": [5, 6], "logprobs": [-1.0, -0.5]}
    assert rows[0]["tokens"][1]["token_ids"] == [2] and rows[0]["model"] == policy
    summary = json.loads((out / "summary.json").read_text())
    assert summary["command"] == "collect" and summary["pass_at_k"] == {"1": 0.5, "2": 1.0}


def test_a_rerun_skips_the_episodes_already_collected(wordle_url: str, tmp_path: Path) -> None:
    out = tmp_path / "resume"
    args = [wordle_url, "--grader", str(WORDLE_DIR), "--policy", "scripted:tests.evaluation.scripted_policy:act",
            "--split", "train", "-o", str(out)]  # fmt: skip
    scripted_policy.calls.clear()
    assert run_collect(*args, "-n", "2").exit_code == 0
    assert sorted(set(scripted_policy.calls)) == ["0#0", "1#0"]
    scripted_policy.calls.clear()
    result = run_collect(*args, "-n", "3")
    assert result.exit_code == 0, result.output
    assert set(scripted_policy.calls) == {"2#0"}
    assert len(datasets.load_from_disk(str(out / "dataset"))) == 3
    assert len((out / "episodes.jsonl").read_text().splitlines()) == 3

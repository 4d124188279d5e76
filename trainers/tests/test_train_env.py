"""Train your environment: a freshly scaffolded tools-only environment (`openenv init`, the `guess`
template), its oracle's episodes, an SFT warm-up and GRPO steps, on the CPU with the tiny model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from openenv_trainers import train_env
from openenv_trainers.warmup import assistant_labels

from openenv_sdk.cli.init import scaffold
from openenv_sdk.evaluation import chat_messages
from openenv_sdk.manifest import load_manifest

# A bisecting oracle for the scaffold's number game, for scaffolds that name none yet: it reads
# the feedback ("higher"/"lower") of its own earlier guesses, as an agent would.
BISECT_ORACLE = """
import json


def act(messages, tools, context=None):
    low, high, last = 1, 100, None
    for message in messages:
        if message["role"] == "assistant" and message.get("tool_calls"):
            arguments = message["tool_calls"][0]["function"]["arguments"]
            last = int((json.loads(arguments) if isinstance(arguments, str) else arguments)["number"])
        elif message["role"] == "tool" and last is not None:
            if message["content"].startswith("higher"):
                low = last + 1
            elif message["content"].startswith("lower"):
                high = last - 1
            else:
                return "Found it."
    return {"content": None, "tool_calls": [{"name": "guess", "arguments": {"number": (low + high) // 2}}]}
"""


def _scaffold_with_oracle(parent: Path) -> Path:
    scaffold("my_env", parent)
    folder = parent / "my_env"
    if load_manifest(folder).oracle is None:  # the template's own oracle, where it has one
        (folder / "oracle.py").write_text(BISECT_ORACLE)
        manifest = folder / "openenv.yaml"
        manifest.write_text(manifest.read_text() + "oracle: oracle.py:act\n")
    return folder


@pytest.mark.timeout(900)  # ~3 min on a busy 2-core machine, plus the tiny model's first build
def test_a_scaffolded_environment_trains_to_tool_calls_and_a_moving_reward(
    tiny_model_dir: Path, tmp_path: Path, capsys: Any
) -> None:
    env_dir = _scaffold_with_oracle(tmp_path)
    out = tmp_path / "out"
    report = train_env.main(
        [str(env_dir), "--model", str(tiny_model_dir), "--out", str(out), "--cpu",
         "--oracle-episodes", "100", "--eval-episodes", "32", "--grpo-steps", "6"]
    )  # fmt: skip

    before, warm, trained = (report.stage(s) for s in ("before", "after warm-up", "after GRPO"))
    assert report.oracle.startswith("oracle:") and report.oracle_mean_reward == 1.0
    # The tiny model knows the tool-call format from the echo tool only: it calls no tool of this environment.
    assert before.tool_call_rate <= 0.1 and before.mean_reward == 0.0
    assert warm.tool_call_rate >= 0.9, report
    assert warm.tool_calls_per_episode >= 3, report  # it plays the game on, turn after turn
    assert report.warmup_losses[-1] < report.warmup_losses[0] / 5
    # GRPO saw tool calls and samples that differ: a group whose rewards differ, so it had a gradient.
    assert len(report.grpo_steps) == 6 and all(step["tool_call_rate"] >= 0.5 for step in report.grpo_steps), report.grpo_steps
    assert any(step["reward_std"] > 0 for step in report.grpo_steps), report.grpo_steps
    # The reward moved off the untrained policy's 0 (the tiny model guesses about as well as chance: see the docs).
    assert max(trained.mean_reward, *(step["reward"] for step in report.grpo_steps)) > before.mean_reward, report
    summary = json.loads((out / "summary.json").read_text())
    assert [m["stage"] for m in summary["measurements"]] == ["before", "after warm-up", "after GRPO"]
    assert (out / "model" / "config.json").is_file() and (out / "oracle" / "episodes.jsonl").is_file()
    printed = capsys.readouterr().out
    assert "after warm-up: tool-call rate" in printed and "4/4 saved" in printed


def test_labels_are_the_sampled_tokens_only(tokenizer: Any, tmp_path: Path) -> None:
    from openenv_trainers.chat import use_tool_chat_template

    tok = use_tool_chat_template(tokenizer)
    messages = chat_messages(
        [
            {"role": "system", "content": "Play."},
            {"role": "user", "content": "Guess a number between 1 and 100."},
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": "c0", "type": "function", "function": {"name": "guess", "arguments": '{"number": 50}'}}]},
            {"role": "tool", "tool_call_id": "c0", "content": "higher"},
            {"role": "assistant", "content": "Found it."},
        ]
    )  # fmt: skip
    ids, labels = assistant_labels(tok, messages)
    trained = [i for i, label in zip(ids, labels, strict=True) if label != -100]
    text = tok.decode(trained)
    # Exactly the two turns as sampled after `<|im_start|>assistant\n`, each with its end-of-turn token.
    assert text == '<tool_call>\n{"name": "guess", "arguments": {"number": 50}}\n</tool_call><|im_end|>Found it.<|im_end|>'


def test_a_string_arguments_episode_would_train_a_quoted_call(tokenizer: Any) -> None:
    """Why collected rows go through `chat_messages`: arguments left as a JSON string render quoted."""
    from openenv_trainers.chat import use_tool_chat_template

    tok = use_tool_chat_template(tokenizer)
    raw: list[dict[str, Any]] = [{"role": "user", "content": "Go."},
           {"role": "assistant", "content": None,
            "tool_calls": [{"type": "function", "function": {"name": "guess", "arguments": '{"number": 50}'}}]}]  # fmt: skip
    assert '"arguments": "{\\"number\\": 50}"' in tok.apply_chat_template(raw, tokenize=False)
    assert '"arguments": {"number": 50}' in tok.apply_chat_template(chat_messages(raw), tokenize=False)


def test_bad_configurations_are_refused_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="holds no openenv.yaml"):
        train_env.TrainEnvConfig(env_dir=tmp_path)
    scaffold("plain", tmp_path)
    with pytest.raises(ValueError, match="multiple of generations"):
        train_env.TrainEnvConfig(env_dir=tmp_path / "plain", batch=6, generations=4)
    manifest = tmp_path / "plain" / "openenv.yaml"  # without the oracle the template may name
    manifest.write_text("".join(line for line in manifest.read_text().splitlines(True) if not line.startswith("oracle:")))
    assert load_manifest(tmp_path / "plain").oracle is None
    with pytest.raises(ValueError, match="names no oracle: add `oracle: oracle.py:act`"):
        train_env.train_env(train_env.TrainEnvConfig(env_dir=tmp_path / "plain", out=tmp_path / "o"))


def test_the_three_command_form_warms_up_on_an_openenv_collect_output(tiny_model_dir: Path, tmp_path: Path) -> None:
    """`openenv collect --policy scripted:...` then `train_env --episodes DIR`: the same records, no collecting."""
    env_dir = _scaffold_with_oracle(tmp_path)
    collected = tmp_path / "data"
    openenv = Path(sys.executable).parent / "openenv"
    subprocess.run(
        [str(openenv), "collect", str(env_dir), "--policy", f"scripted:{env_dir / 'oracle.py'}:act", "-n", "12", "-o", str(collected),
         "--format", "quiet"],
        check=True, timeout=300, capture_output=True,
    )  # fmt: skip
    out = tmp_path / "out"
    report = train_env.main(
        [str(env_dir), "--episodes", str(collected), "--model", str(tiny_model_dir), "--out", str(out), "--cpu",
         "--eval-episodes", "4", "--warmup-steps", "2", "--grpo-steps", "0"]
    )  # fmt: skip
    assert report.oracle == f"episodes:{collected}" and report.oracle_episodes == 8
    assert len(report.warmup_losses) == 2 and report.grpo_steps == []
    assert [m.episodes for m in report.measurements] == [4, 4, 4]
    assert not (out / "oracle").exists()  # nothing collected again

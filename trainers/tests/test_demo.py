"""The demo command: trains, prints the reward per step, saves the curve (tiny model on CPU; SmolLM2 on a GPU)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from openenv_trainers import demo

from .conftest import ECHO_DIR


@pytest.mark.parametrize("adapter", ["factory", "rollout"])
def test_the_demo_trains_and_saves_its_reward_curve(adapter: str, tiny_model_dir: Path, tmp_path: Path, capsys: Any) -> None:
    demo.main(
        [
            "--model", str(tiny_model_dir), "--adapter", adapter, "--steps", "2", "--batch", "4", "--generations", "4",
            "--lr", "1e-3", "--max-completion-length", "64", "--tasks", "16", "--env-dir", str(ECHO_DIR),
            "--out", str(tmp_path), "--cpu",
        ]
    )  # fmt: skip
    summary = json.loads((tmp_path / "reward_curve.json").read_text())
    assert [r["step"] for r in summary["records"]] == [1.0, 2.0]
    assert all(0.0 <= r["reward"] <= 1.0 for r in summary["records"])
    assert (tmp_path / "reward_curve.png").stat().st_size > 1000
    printed = capsys.readouterr().out
    assert "step    1  reward" in printed and "reward per step (0 to 1):" in printed


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the SmolLM2 GRPO run needs a GPU (see docs/training.md)")
def test_on_a_gpu_smollm2_reward_rises(tmp_path: Path) -> None:  # pragma: no cover - GPU only
    records = demo.run(demo.build_parser().parse_args(["--steps", "40", "--out", str(tmp_path), "--env-dir", str(ECHO_DIR)]))
    k = len(records) // 4
    assert sum(r["reward"] for r in records[-k:]) > sum(r["reward"] for r in records[:k])

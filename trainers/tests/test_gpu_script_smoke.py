"""scripts/gpu/async_grpo_guess.py --smoke on the CPU (tiny model, no vLLM): the run.json fields the GPU
runs are read for (generation against stale drops, pacing, the per-step mismatch) are there and agree."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO

SCRIPT = REPO / "scripts" / "gpu" / "async_grpo_guess.py"


@pytest.mark.timeout(420)
def test_the_smoke_run_records_pacing_and_the_mismatch(tiny_model_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    argv = [
        sys.executable,
        str(SCRIPT),
        "--smoke",
        "--model-dir",
        str(tiny_model_dir),
        "--out",
        str(out),
        "--work",
        str(tmp_path / "work"),
        "--steps",
        "2",
        "--warmup-steps",
        "1",
        "--num-generations",
        "4",
        "--inflight",
        "8",
        "--grad-accum",
        "1",
        "--token-budget",
        "2048",
        "--max-staleness",
        "1",
        "--keep-zero-variance",
        "--is-mode",
        "token_truncate",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=400, env=env, cwd=REPO)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run = json.loads((out / "run.json").read_text())
    assert run["error"] is None
    assert run["generated"] >= run["worker_counters"]["samples"] > 0
    assert run["dropped_stale"] == run["dropped_stale_worker"] + run["dropped_stale_trainer"]
    assert run["stale_fraction"] == pytest.approx(run["dropped_stale"] / run["generated"])
    assert run["admitted_groups"] >= run["worker_counters"]["groups"] > 0
    assert run["paused_s"] >= 0 and run["trainer_wait_s"] >= 0
    assert run["args"]["pacing"] == "on" and run["args"]["is_correction"] == "on"
    steps = [m["step"] for m in run["logprob_diff"]]
    assert steps == [1, 2]
    # generation by an in-process copy of the same weights: the mismatch is float32 noise
    assert 0 <= run["logprob_diff_mean"] < 1e-4 and 0 <= run["logprob_diff_max"] < 1e-3
    assert all(m["is_ratio_mean"] == pytest.approx(1.0, abs=1e-3) for m in run["logprob_diff"])

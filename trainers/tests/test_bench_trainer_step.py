"""benchmarks/bench_trainer_step.py on the CPU: TRL's trainer and the bare step over the same packed rows."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

from .conftest import REPO

BENCH = REPO / "benchmarks" / "bench_trainer_step.py"


def _bench() -> Any:
    sys.path.insert(0, str(BENCH.parent))
    spec = importlib.util.spec_from_file_location("bench_trainer_step", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_trainer_and_the_bare_step_forward_the_same_rows_and_the_mask_is_built_once_a_row(tmp_path: Path) -> None:
    out = tmp_path / "step.json"
    result = _bench().main([
        "--token-budget", "768", "--rows-per-step", "2", "--steps", "2", "--warmup-steps", "1", "--group-size", "4",
        "--accounting", "incremental", "--accounting-turns-per-s", "50", "--torch-threads", "1", "--json", str(out),
    ])
    assert json.loads(out.read_text()) == json.loads(json.dumps(result))
    trainer, bare = result["trainer"], result["bare"]
    # main() already checks the trainer's logged tokens against the planned rows; the bare step takes the same rows.
    assert trainer["forwarded_tokens"] == bare["forwarded_tokens"]
    assert all(300 < t <= 2 * 768 for t in trainer["forwarded_tokens"])
    assert trainer["mask_builds_per_step"] == 2  # one mask per packed row, for all layers
    assert trainer["accounting"]["turns_per_s"] > 0
    assert result["bare_over_trainer"] == bare["forwarded_tokens_per_s"] / trainer["forwarded_tokens_per_s"] > 0

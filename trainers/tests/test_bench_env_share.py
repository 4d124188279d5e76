"""benchmarks/bench_env_share.py in its smallest setting: real GRPO steps against the echo and guess
servers, and figures that agree with each other (the table, the JSON, episode.py's own timing)."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import REPO

BENCH = REPO / "benchmarks" / "bench_env_share.py"


def _load_bench() -> Any:
    sys.path.insert(0, str(BENCH.parent))  # its sibling modules, as when it runs as a script
    spec = importlib.util.spec_from_file_location("bench_env_share", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.timeout(180)
def test_the_benchmark_times_the_environment_inside_grpo_steps(
    tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = _load_bench()
    # the interval arithmetic behind "env s" (a union) and "exposed" (env minus generation)
    assert bench.length([(0.0, 2.0), (1.0, 3.0), (5.0, 6.0)]) == 4.0
    assert bench.minus([(0.0, 10.0)], [(2.0, 3.0), (5.0, 12.0)]) == 4.0
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "tiny-tool-model").symlink_to(tiny_model_dir)  # `--model tiny` reuses the session's tiny model
    out = tmp_path / "env_share.json"
    bench.main(
        [
            "--cache-dir", str(cache), "--out-dir", str(tmp_path / "trainer"),
            "--steps", "2", "--discard", "1", "--batch", "4", "--generations", "2",
            "--alone-episodes", "3", "--json", str(out),
        ]
    )  # fmt: skip
    printed = capsys.readouterr().out
    data = json.loads(out.read_text())
    assert data["machine"]["device"].startswith("cpu")
    assert [(r["env"], r["model"]) for r in data["runs"]] == [("echo", "tiny"), ("guess", "tiny")]
    for run in data["runs"]:
        s = run["summary"]
        assert s["steps_measured"] == 1 and len(run["steps"]) == 2
        assert 0 < s["env_share_pct"] < 100
        assert 0 <= s["env_exposed_share_pct"] <= s["env_share_pct"]
        assert 0 < s["generation_share_pct"] < 100
        assert s["env_s_per_step"] > 0 and s["median_step_s"] > 0
        assert set(s["env_call_median_ms"]) == set(s["env_call_alone_median_ms"]) == {"reset", "tool", "grade"}
        assert all(v > 0 for v in s["env_call_alone_median_ms"].values())
        for step in run["steps"]:
            # every episode is reset and graded once; its env time lies inside the step
            assert step["episodes"] == 4 and step["resets"] == 4 and step["grades"] == 4
            assert 0 < step["env_s"] <= step["env_calls_s"] + 1e-9
            assert step["env_s"] < step["step_s"] and step["generation_s"] < step["step_s"]
            assert step["rollout_s"] <= step["step_s"]
            # the wrapped calls and episode.py's own accounting time the same calls
            assert math.isclose(step["env_calls_s"], step["env_episode_s"], rel_tol=0.1, abs_tol=0.01)
        # the printed row carries the JSON's figures
        row = next(line for line in printed.splitlines() if line.strip("│┃ ").startswith(run["env"]))
        assert [cell.strip() for cell in row.split("│")[1:-1]] == bench.table_rows([run])[0]
    assert "The environment's share of a GRPO step" in printed

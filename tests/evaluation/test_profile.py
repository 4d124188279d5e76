"""`openenv eval --profile`: each task's pass rate, written for a training curriculum to read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from openenv_sdk.evaluation import PROFILE_FILE, PassRateProfile, ProfileError
from tests.evaluation.policy_server import WORDLE_DIR
from tests.evaluation.test_eval_cli import run_eval


def test_profile_holds_each_tasks_pass_rate_and_reset_arguments(wordle_url: str, tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = run_eval(wordle_url, "--grader", str(WORDLE_DIR), "--policy", "scripted:tests.evaluation.profile_policy:act",
                      "--task", "1000", "--task", "1001", "--task", "1002", "-r", "4", "-o", str(out), "--profile")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "profile.json" in result.output
    profile = PassRateProfile.load(out / PROFILE_FILE)
    assert profile.pass_threshold == 1.0 and profile.env == "wordle"
    assert [(t.task_id, t.reset_kwargs, t.graded, t.passed, t.pass_rate) for t in profile.tasks] == [
        ("1000", {"task_id": 1000}, 4, 0, 0.0),
        ("1001", {"task_id": 1001}, 4, 2, 0.5),
        ("1002", {"task_id": 1002}, 4, 4, 1.0),
    ]

    # A higher threshold than a win's reward: nothing passes, and the profile says at which threshold.
    out2 = tmp_path / "strict"
    result = run_eval(wordle_url, "--grader", str(WORDLE_DIR), "--policy", "scripted:tests.evaluation.profile_policy:act",
                      "--task", "1002", "-r", "2", "-o", str(out2), "--profile", "--pass-threshold", "2")  # fmt: skip
    assert result.exit_code == 0, result.output
    strict = PassRateProfile.load(out2 / PROFILE_FILE)
    assert strict.pass_threshold == 2.0 and [t.pass_rate for t in strict.tasks] == [0.0]
    # Without --profile, no file.
    result = run_eval(wordle_url, "--grader", str(WORDLE_DIR), "--policy", "scripted:tests.evaluation.profile_policy:act",
                      "--task", "1002", "-o", str(tmp_path / "plain"))  # fmt: skip
    assert result.exit_code == 0 and not (tmp_path / "plain" / PROFILE_FILE).exists()


def test_an_unreadable_profile_is_a_typed_error_naming_the_problem(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="cannot read the profile .* make one with openenv eval --profile"):
        PassRateProfile.load(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ProfileError, match=r"bad.json: not a pass-rate profile"):
        PassRateProfile.load(tmp_path / "bad.json")
    (tmp_path / "summary.json").write_text(json.dumps({"env": "wordle", "mean_reward": 1.0}))
    with pytest.raises(ProfileError, match=r"not a pass-rate profile \(model: Field required\)"):
        PassRateProfile.load(tmp_path / "summary.json")
    assert isinstance(ProfileError("x"), ValueError)

"""The shipped sandboxed environments pass `openenv validate --deep` (wordle and echo: test_deep.py):
their oracles score 1.0 and doing nothing 0.0, grading repeats, sessions play at once without a
tool error, and every attack of the battery scores 0 with no hidden file read."""

from __future__ import annotations

from pathlib import Path

import pytest

import openenv_sdk.checks as checks
from openenv_sdk.checks._attacks import ATTACKS

ENVIRONMENTS = Path(__file__).resolve().parents[2] / "environments"


@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", ["coding", "mini_swe", "terminal"])
def test_a_sandboxed_environment_passes_every_deep_check(name: str) -> None:
    results, card = checks.run_deep_checks(ENVIRONMENTS / name, options=checks.DeepOptions(tasks=2, sessions=16))
    failed = [r.line() for r in results if r.status != "pass"]
    assert failed == [], failed
    assert len(card.tasks) == 2 and set(card.oracle.values()) == {1.0} and set(card.do_nothing.values()) == {0.0}
    assert card.repeats == {"do-nothing": [0.0, 0.0, 0.0], "oracle": [1.0, 1.0, 1.0]}
    assert [a.name for a in card.attacks] == [a.name for a in ATTACKS]  # a shell and files: every attack applies
    assert all(a.reward == 0.0 and a.error is None and not a.leaked for a in card.attacks), card.attacks
    assert card.load is not None and card.load.tool_errors == 0 and card.load.failed_episodes == 0
    assert card.load.tool_calls >= card.load.sessions and card.load.memory_per_session_mib is not None


def test_the_oracle_loader_is_public_and_names_the_manifest_key() -> None:
    policy = checks.load_oracle(ENVIRONMENTS / "terminal")
    assert policy is not None and policy.name == "oracle:oracle.py:act"
    assert checks.do_nothing_policy().name == "do-nothing"

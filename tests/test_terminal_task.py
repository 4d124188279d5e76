"""The terminal task format has one owner: the environment reads `task.yaml` through it and the
Harbor importer writes through it."""

import sys
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from openenv_sdk.terminal_task import CATEGORIES, TerminalTaskSpec, task_yaml

TERMINAL = Path(__file__).resolve().parents[1] / "environments" / "terminal"


def test_a_written_task_reads_back_as_the_same_spec() -> None:
    spec = TerminalTaskSpec(title="Fix it", category="git", difficulty="easy", workdir="/app", harbor=True, prompt="Do\nthis.\n")
    text = task_yaml(spec, header="# generated\n")
    assert text.startswith("# generated\ntitle: Fix it\n") and "prompt: |\n  Do\n  this.\n" in text
    assert TerminalTaskSpec.model_validate(yaml.safe_load(text)) == spec


def test_defaults_are_left_out_and_a_bad_field_is_refused() -> None:
    spec = TerminalTaskSpec(title="t", category="files", difficulty="hard", prompt="p")
    assert "workdir" not in task_yaml(spec) and "harbor" not in task_yaml(spec)
    with pytest.raises(ValidationError, match="category"):
        TerminalTaskSpec(title="t", category="cooking", difficulty="hard", prompt="p")  # type: ignore[arg-type]


def test_the_terminal_environment_reads_its_tasks_through_it() -> None:
    sys.path.insert(0, str(TERMINAL))
    try:
        import terminal_env
    finally:
        sys.path.remove(str(TERMINAL))
    assert issubclass(terminal_env.TerminalTask, TerminalTaskSpec)
    tasks = terminal_env.load_tasks()
    assert {t.category for t in tasks.values()} <= set(CATEGORIES)
    assert tasks["fix_fibonacci"].harbor and tasks["fix_fibonacci"].workdir == "/app"

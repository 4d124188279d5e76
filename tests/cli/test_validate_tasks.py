"""`environment.tasks`: the rule over an environment's `tasks()` (docs/tasks.md)."""

from __future__ import annotations

from pathlib import Path

from tests.cli.test_validate import GOOD_ENV, MANIFEST, make_env, static

WITH_TASKS = GOOD_ENV + '''

    @classmethod
    def tasks(cls):
        from openenv_sdk.tasks import TaskRecord

        return [TaskRecord(id="a"), TaskRecord(id="b"), TaskRecord(id="c", split="test")]
'''

VALIDATION = """\
validation:
  reward: {range: [0.0, 1.0], oracle_tolerance: 0.0, floor_margin: 0.1}
  resources: {cpu: 1.0, memory_mb: 512, disk_mb: 512, episode_timeout_s: 60.0}
  capabilities:
    verifier: {kind: reward_channel}
    task_api: true
    declared_task_count: COUNTS
  types: {tags: [demo]}
"""


def test_tasks_are_counted(tmp_path: Path) -> None:
    result = static(make_env(tmp_path / "e", source=WITH_TASKS))["environment.tasks"]
    assert (result.status, result.message) == ("pass", "train: 2 tasks, test: 1 tasks")


def test_no_tasks_passes(tmp_path: Path) -> None:
    result = static(make_env(tmp_path / "e"))["environment.tasks"]
    assert (result.status, result.message) == ("pass", "no tasks declared (optional: the Task API then lists no splits)")


def test_duplicate_ids_fail(tmp_path: Path) -> None:
    source = WITH_TASKS.replace('TaskRecord(id="b")', 'TaskRecord(id="a", split="test")')
    result = static(make_env(tmp_path / "e", source=source))["environment.tasks"]
    assert result.status == "fail"
    assert result.message == "ProbeEnvironment.tasks(): two tasks have the id 'a': ids must be unique across splits"


def test_declared_task_count_is_checked(tmp_path: Path) -> None:
    right = MANIFEST + VALIDATION.replace("COUNTS", "{train: 2, test: 1}")
    assert static(make_env(tmp_path / "ok", source=WITH_TASKS, manifest=right))["environment.tasks"].status == "pass"
    wrong = MANIFEST + VALIDATION.replace("COUNTS", "{train: 3}")
    result = static(make_env(tmp_path / "bad", source=WITH_TASKS, manifest=wrong))["environment.tasks"]
    assert result.status == "fail"
    assert result.message == "validation.capabilities.declared_task_count is {'train': 3}, tasks() gives {'train': 2, 'test': 1}"
    assert result.fix == "Set declared_task_count in openenv.yaml to {'train': 2, 'test': 1}, or fix tasks()"


def test_declared_tools_are_checked(tmp_path: Path) -> None:
    """`validation.capabilities.declared_tools` is held to the class's tools, as declared_task_count is to tasks()."""
    tools_validation = VALIDATION.replace("    declared_task_count: COUNTS\n", "    declared_tools: TOOLS\n")
    right = MANIFEST + tools_validation.replace("TOOLS", "[say]")
    result = static(make_env(tmp_path / "ok", manifest=right))["tools.declared"]
    assert (result.status, result.message) == ("pass", "declared_tools match the 1 served tool(s)")
    wrong = MANIFEST + tools_validation.replace("TOOLS", "[shout]")
    result = static(make_env(tmp_path / "bad", manifest=wrong))["tools.declared"]
    assert result.status == "fail"
    assert result.message == (
        "validation.capabilities.declared_tools does not match the class's tools "
        "(declared but not served: shout; served but not declared: say)"
    )
    assert result.fix == "Set declared_tools in openenv.yaml to ['say'], or fix the class's @tool methods"
    assert static(make_env(tmp_path / "none"))["tools.declared"].status == "pass"

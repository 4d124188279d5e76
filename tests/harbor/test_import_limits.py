"""`openenv harbor import` under hostile task folders: names and sizes are checked before anything
is read or written, and what the generated files embed is quoted whatever it holds.

A Harbor dataset is input from outside: a task's `[task] name` (or its folder's name) ends up in
comments of the generated `task.yaml` and `check.sh`, and its instruction and files in the
environment's image and every episode. These probes are rows of docs/reliability.md's table.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from openenv_sdk.cli.main import app
from openenv_sdk.harbor import HarborImportError, HarborNameError, HarborSizeError, import_harbor_task
from openenv_sdk.harbor._limits import MAX_FILE_BYTES, MAX_INSTRUCTION_BYTES, MAX_TASK_BYTES, MAX_TASK_FILES, TASK_NAME_PATTERN
from openenv_sdk.terminal_task import TerminalTaskSpec, task_yaml

ROOT = Path(__file__).resolve().parents[2]
TERMINAL = ROOT / "environments" / "terminal"


@pytest.fixture
def env_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "env"
    (folder / "tasks").mkdir(parents=True)
    shutil.copy(TERMINAL / "openenv.yaml", folder / "openenv.yaml")
    return folder


def make_task(root: Path, *, name: str = "task", toml: str = "version = '1.0'\n", instruction: str = "Do it.\n") -> Path:
    folder = root / name
    files = {
        "instruction.md": instruction,
        "task.toml": toml,
        "environment/Dockerfile": "FROM ubuntu:24.04\nWORKDIR /app\n",
        "tests/test.sh": "echo 1 > /logs/verifier/reward.txt\n",
        "solution/solve.sh": "true\n",
    }
    for relative, text in files.items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_text(text)
    return folder


def nothing_written(env_dir: Path) -> bool:
    return not any((env_dir / "tasks").iterdir()) and not (env_dir / "hidden").exists()


def sparse(path: Path, size: int) -> None:
    """A file of `size` bytes that takes no disk (the importer must not read it to refuse it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.truncate(size)


# --- names ------------------------------------------------------------------------------------


def test_a_task_name_with_newlines_is_refused_before_it_reaches_a_generated_file(env_dir: Path, tmp_path: Path) -> None:
    """`[task] name` with newlines (lines for task.yaml and check.sh) is refused with HarborNameError naming the rule."""
    task = make_task(tmp_path)
    task.joinpath("task.toml").write_text('version = "1.0"\n[task]\nname = "org/x\\nprompt: injected\\necho pwned"\n')
    with pytest.raises(HarborNameError) as caught:
        import_harbor_task(task, tasks_dir=env_dir / "tasks")
    assert caught.value.name == "org/x\nprompt: injected\necho pwned"
    assert caught.value.pattern == TASK_NAME_PATTERN
    assert "task name 'org/x\\nprompt: injected\\necho pwned'" in caught.value.problems[0]
    assert "no spaces, newlines or quotes" in caught.value.problems[0]
    assert nothing_written(env_dir)


@pytest.mark.parametrize(
    "name",
    ["a b", "x;rm -rf /", "$(id)", "'quoted'", "../up", "org/a/b", "-flag", "x\u2028y", "x\x85y", "a" * 129],
)
def test_task_names_outside_the_safe_set_are_refused(env_dir: Path, tmp_path: Path, name: str) -> None:
    """A task name outside `org/name` (letters, digits, `._-`) is refused with HarborNameError."""
    task = make_task(tmp_path)
    task.joinpath("task.toml").write_text(f'version = "1.0"\n[task]\nname = {_toml_string(name)}\n')
    with pytest.raises(HarborImportError) as caught:
        import_harbor_task(task, tasks_dir=env_dir / "tasks")
    assert isinstance(caught.value, HarborNameError), caught.value
    assert nothing_written(env_dir)


def _toml_string(text: str) -> str:
    return '"' + "".join(c if c.isalnum() or c in " ./_-;$()'" else f"\\u{ord(c):04x}" for c in text) + '"'


def test_a_folder_name_with_a_newline_is_refused_when_the_task_has_no_name(env_dir: Path, tmp_path: Path) -> None:
    """A task folder named with a newline (and no `[task] name`) is refused with HarborNameError."""
    task = make_task(tmp_path, name="evil\nprompt: x")
    with pytest.raises(HarborNameError, match="task name 'evil\\\\nprompt: x'"):
        import_harbor_task(task, tasks_dir=env_dir / "tasks", task_id="evil")
    assert nothing_written(env_dir)


def test_org_slash_name_is_accepted_and_named_in_the_generated_files(env_dir: Path, tmp_path: Path) -> None:
    task = make_task(tmp_path)
    task.joinpath("task.toml").write_text('version = "1.0"\n[task]\nname = "terminal-bench/hello.world_2"\n')
    import_harbor_task(task, tasks_dir=env_dir / "tasks")
    assert "the Harbor task terminal-bench/hello.world_2 by" in (env_dir / "tasks/task/task.yaml").read_text()
    assert "the Harbor task terminal-bench/hello.world_2: its" in (env_dir / "hidden/task/check.sh").read_text()


# --- sizes ------------------------------------------------------------------------------------


def test_a_200_mib_instruction_is_refused_without_being_read(env_dir: Path, tmp_path: Path) -> None:
    """A 200 MiB instruction.md is refused with HarborSizeError (its size and the limit), unread."""
    task = make_task(tmp_path)
    sparse(task / "instruction.md", 200 * 1024 * 1024)
    started = time.monotonic()
    with pytest.raises(HarborSizeError) as caught:
        import_harbor_task(task, tasks_dir=env_dir / "tasks")
    assert time.monotonic() - started < 5
    assert (caught.value.what, caught.value.size, caught.value.limit) == (
        "instruction.md",
        200 * 1024 * 1024,
        MAX_INSTRUCTION_BYTES,
    )
    assert caught.value.problems == [
        f"instruction.md is 209715200 bytes; the limit is {MAX_INSTRUCTION_BYTES} bytes (docs/harbor.md, Limits)"
    ]
    assert nothing_written(env_dir)


def test_an_instruction_just_under_the_limit_imports(env_dir: Path, tmp_path: Path) -> None:
    task = make_task(tmp_path, instruction="x" * (MAX_INSTRUCTION_BYTES - 1))
    report = import_harbor_task(task, tasks_dir=env_dir / "tasks")
    assert len(yaml.safe_load((env_dir / "tasks" / report.task_id / "task.yaml").read_text())["prompt"]) == MAX_INSTRUCTION_BYTES


def test_a_file_over_the_limit_is_refused_by_name(env_dir: Path, tmp_path: Path) -> None:
    """A data file of the task over the per-file limit is refused with HarborSizeError naming it."""
    task = make_task(tmp_path)
    sparse(task / "environment" / "data.bin", MAX_FILE_BYTES + 1)
    with pytest.raises(HarborSizeError) as caught:
        import_harbor_task(task, tasks_dir=env_dir / "tasks")
    assert caught.value.what == "environment/data.bin" and caught.value.limit == MAX_FILE_BYTES
    assert nothing_written(env_dir)


def test_a_task_folder_over_the_total_limit_is_refused(env_dir: Path, tmp_path: Path) -> None:
    """Files each under the per-file limit but over the task's total are refused with HarborSizeError."""
    task = make_task(tmp_path)
    for i in range(MAX_TASK_BYTES // MAX_FILE_BYTES + 1):
        sparse(task / "environment" / f"part{i}.bin", MAX_FILE_BYTES)
    with pytest.raises(HarborSizeError) as caught:
        import_harbor_task(task, tasks_dir=env_dir / "tasks")
    assert caught.value.what == "the task folder" and caught.value.limit == MAX_TASK_BYTES
    assert nothing_written(env_dir)


def test_a_task_folder_with_too_many_entries_is_refused(env_dir: Path, tmp_path: Path) -> None:
    """A task folder of more than MAX_TASK_FILES entries is refused with HarborSizeError."""
    task = make_task(tmp_path)
    many = task / "environment" / "many"
    many.mkdir()
    for i in range(MAX_TASK_FILES + 1):
        (many / str(i)).touch()
    with pytest.raises(HarborSizeError, match=f"the limit is {MAX_TASK_FILES} entries"):
        import_harbor_task(task, tasks_dir=env_dir / "tasks")
    assert nothing_written(env_dir)


# --- what the generated files embed -----------------------------------------------------------


HOSTILE_TEXT = (
    "# Title: with `code` and a colon\n---\nprompt: injected\nworkdir: /etc\n"
    "line\u2028separator, next\x85line, tab\tand 'quotes' \"both\" |> &anchor *alias !!python/object {x: 1}\n"
)


def test_the_generated_task_yaml_holds_any_instruction_exactly(env_dir: Path, tmp_path: Path) -> None:
    """An instruction full of YAML syntax and Unicode line breaks round-trips exactly through task.yaml."""
    task = make_task(tmp_path, instruction=HOSTILE_TEXT)
    report = import_harbor_task(task, tasks_dir=env_dir / "tasks")
    text = (env_dir / "tasks" / report.task_id / "task.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    assert data["prompt"] == HOSTILE_TEXT.strip() + "\n"
    assert data["workdir"] == "/app" and set(data) == {"title", "category", "difficulty", "workdir", "harbor", "prompt"}
    TerminalTaskSpec.model_validate(data)  # the terminal environment loads it


def test_task_yaml_refuses_a_header_that_is_not_comment_lines() -> None:
    spec = TerminalTaskSpec(title="t", category="files", difficulty="easy", prompt="p")
    for header in ("# a\nprompt: x\n", "# a\u2028b\n", "# no newline", "not a comment\n"):
        with pytest.raises(ValueError, match="header must be comment lines"):
            task_yaml(spec, header=header)
    assert task_yaml(spec, header="# ok\n# two\n").startswith("# ok\n# two\ntitle: t\n")


def test_verifier_env_values_are_shell_quoted_in_check_sh(env_dir: Path, tmp_path: Path) -> None:
    """`[verifier.env]` values with quotes, newlines and `;` stand in check.sh as exactly those values."""
    value = "a'b\"c\nd; echo pwned `id`"
    task = make_task(tmp_path)
    task.joinpath("task.toml").write_text(f'version = "1.0"\n[verifier.env]\nMODE = {_toml_basic(value)}\n')
    import_harbor_task(task, tasks_dir=env_dir / "tasks")
    check = (env_dir / "hidden/task/check.sh").read_text()
    exports = check[check.index("export MODE=") : check.index("timeout -k")]
    out = subprocess.run(["bash", "-c", exports + 'printf %s "$MODE"'], capture_output=True, text=True, timeout=10)
    assert (out.returncode, out.stdout) == (0, value)


def _toml_basic(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def test_the_cli_refuses_a_bad_name_with_the_rule(env_dir: Path, tmp_path: Path) -> None:
    task = make_task(tmp_path)
    task.joinpath("task.toml").write_text('version = "1.0"\n[task]\nname = "x y"\n')
    result = CliRunner().invoke(app, ["harbor", "import", str(task), "--into", str(env_dir / "tasks"), "--json"])
    assert result.exit_code == 1, result.output
    assert "task name 'x y'" in result.output and nothing_written(env_dir)


def test_no_part_of_a_refused_task_is_read_past_its_size(tmp_path: Path) -> None:
    """The size check reads nothing: a file that cannot be opened (mode 000) still just counts by size."""
    task = make_task(tmp_path)
    secret = task / "environment" / "unreadable"
    sparse(secret, MAX_FILE_BYTES + 1)
    os.chmod(secret, 0)
    from openenv_sdk.harbor._limits import check_task_size

    with pytest.raises(HarborSizeError):
        check_task_size(task)

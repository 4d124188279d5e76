"""`openenv init`: the scaffold's exact files, refusals, and that it passes `openenv validate`
(static and runtime) and its own generated test at once."""

from __future__ import annotations

import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import yaml
from openenv_reference import OPENENV_CLI, require
from typer.testing import CliRunner

from openenv_sdk.checks import validate_path
from openenv_sdk.cli.init import ScaffoldError, scaffold, validate_name
from openenv_sdk.cli.main import app
from openenv_sdk.manifest import load_manifest

runner = CliRunner()

FILES = ["README.md", "grader.py", "my_game_env.py", "openenv.yaml", "tests/test_my_game.py"]


def flat(text: str) -> str:
    return " ".join(text.split())


def test_init_writes_the_scaffold(tmp_path: Path) -> None:
    result = runner.invoke(app, ["init", "my_game", "--dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    folder = tmp_path / "my_game"
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) == FILES
    assert f"Next: openenv validate {folder}" in flat(result.stdout)
    source = (folder / "my_game_env.py").read_text()
    for line in ("class MyGameAction(Action):", "class MyGameObservation(Observation):", "class MyGameState(State):",
                 "class MyGameEnvironment(Environment[MyGameAction, MyGameObservation, MyGameState]):",
                 "    @tool", "    def reset(", "    def step(self, action: MyGameAction) -> MyGameObservation:"):
        assert line in source
    assert "class MyGameGrader(Grader):" in (folder / "grader.py").read_text()
    leftovers = [p.name for p in folder.rglob("*") if p.is_file() and re.search(r"__[A-Z]+__", p.read_text())]
    assert leftovers == []


def test_scaffold_manifest_has_openenv_and_sdk_keys_and_no_warnings(tmp_path: Path) -> None:
    scaffold("my_game", tmp_path)
    raw = yaml.safe_load((tmp_path / "my_game" / "openenv.yaml").read_text())
    assert {"spec_version", "name", "type", "runtime", "port", "variables"} <= set(raw)
    assert {"environment", "grader", "resources", "network", "server", "validation"} <= set(raw)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        manifest = load_manifest(tmp_path / "my_game")
    assert (manifest.name, manifest.environment, manifest.grader) == (
        "my_game", "my_game_env:MyGameEnvironment", "grader:MyGameGrader")


def test_init_json_lists_the_files(tmp_path: Path) -> None:
    result = runner.invoke(app, ["init", "my_game", "--dir", str(tmp_path), "--json"])
    assert result.exit_code == 0
    assert '"files": [' in result.stdout and '"tests/test_my_game.py"' in result.stdout


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("My-Game", "invalid name 'My-Game': use lower snake_case starting with a letter"),
        ("1game", "invalid name '1game': use lower snake_case starting with a letter"),
        ("class", "invalid name 'class': not a keyword, no double or trailing underscores"),
        ("my__game", "invalid name 'my__game': not a keyword, no double or trailing underscores"),
    ],
)
def test_invalid_names_are_refused(tmp_path: Path, name: str, message: str) -> None:
    with pytest.raises(ScaffoldError, match="^" + message.replace("(", r"\(")):
        validate_name(name)
    result = runner.invoke(app, ["init", name, "--dir", str(tmp_path)])
    assert result.exit_code == 2
    assert f"Error: {message}" in flat(result.stderr)
    assert list(tmp_path.iterdir()) == []


def test_an_existing_non_empty_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "my_game").mkdir()
    (tmp_path / "my_game" / "notes.txt").write_text("mine")
    result = runner.invoke(app, ["init", "my_game", "--dir", str(tmp_path)])
    assert result.exit_code == 2
    assert f"Error: {tmp_path / 'my_game'} already exists and is not an empty folder" in flat(result.stderr)
    assert [p.name for p in (tmp_path / "my_game").iterdir()] == ["notes.txt"]


def test_an_existing_empty_folder_is_filled(tmp_path: Path) -> None:
    (tmp_path / "my_game").mkdir()
    assert len(scaffold("my_game", tmp_path)) == len(FILES)


def test_a_name_ending_in_env_is_not_doubled(tmp_path: Path) -> None:
    scaffold("maze_env", tmp_path)
    assert (tmp_path / "maze_env" / "maze_env.py").is_file()
    assert "class MazeEnvironment(" in (tmp_path / "maze_env" / "maze_env.py").read_text()


def test_scaffold_passes_validate_static_and_runtime(tmp_path: Path) -> None:
    scaffold("my_game", tmp_path)
    report = validate_path(tmp_path / "my_game", startup_timeout_s=60)
    assert report.passed
    assert {c.name: c.status for c in report.checks if c.status != "pass"} == {}
    result = runner.invoke(app, ["validate", str(tmp_path / "my_game"), "--static-only"])
    assert result.exit_code == 0 and "PASS" in result.stdout


def test_scaffold_test_passes_under_pytest(tmp_path: Path) -> None:
    scaffold("my_game", tmp_path)
    process = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error",
         "-W", "ignore::pytest.PytestDeprecationWarning", "tests"],
        cwd=tmp_path / "my_game", capture_output=True, text=True, timeout=100, check=False,
    )
    assert process.returncode == 0, process.stdout + process.stderr
    assert "2 passed" in process.stdout


def test_scaffold_passes_openenv_own_static_validation(tmp_path: Path) -> None:
    openenv_cli = require(OPENENV_CLI)
    scaffold("my_game", tmp_path)
    process = subprocess.run([str(openenv_cli), "validate", ".", "--level", "static", "--skip-build"],
                             cwd=tmp_path / "my_game", capture_output=True, text=True, timeout=100, check=False)
    assert process.returncode == 0, process.stdout + process.stderr
    assert "PASS  static.manifest" in process.stdout


def test_the_scaffold_episode_id_does_not_carry_the_answer(tmp_path: Path) -> None:
    """A template is copied by everyone: its public episode id must not leak the hidden number."""
    scaffold("leaky", tmp_path)
    from openenv_sdk.loader import load_environment

    env = load_environment(tmp_path / "leaky").env_cls()
    ids = []
    for target in (7, 7, 7, 42, 42, 42):
        env.reset(target=target)
        # a random token (a hex digit may still equal a target's digit by chance, so no substring test)
        assert re.fullmatch(r"leaky-[0-9a-f]{8}", env.state.episode_id), env.state.episode_id
        assert env.state.episode_id != f"leaky-{target}"
        ids.append(env.state.episode_id)
    assert len(set(ids)) == len(ids), "the same target gives the same id: it is derived from the answer"

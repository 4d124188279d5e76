"""The `openenv` command itself: its version, shell completion, its one output sink (which prints
square brackets as they are), and `serve`'s refusal of a port already taken, on a real socket."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

import openenv_sdk
from openenv_sdk.cli._output import fail, say
from openenv_sdk.cli.main import app

runner = CliRunner()
ECHO_DIR = Path(__file__).resolve().parents[2] / "environments" / "echo"
OPENENV = [sys.executable, "-m", "openenv_sdk.cli.main"]


def flat(text: str) -> str:
    return " ".join(text.split())


def test_version_comes_from_the_package_metadata() -> None:
    assert openenv_sdk.__version__ == version("openenv-sdk")
    result = runner.invoke(app, ["--version"])
    assert (result.exit_code, result.stdout) == (0, f"openenv-sdk {openenv_sdk.__version__}\n")


def test_shell_completion_completes_commands_and_options() -> None:
    """Typer's own completion: the shell calls `openenv` with _OPENENV_COMPLETE set."""
    def complete(words: str) -> str:
        env = {**os.environ, "_OPENENV_COMPLETE": "complete_bash", "COMP_WORDS": words,
               "COMP_CWORD": str(len(words.split()) - (0 if words.endswith(" ") else 1))}
        # the installed `openenv` script: completion is keyed on the program's name
        return subprocess.run([str(Path(sys.executable).parent / "openenv")], env=env, capture_output=True, text=True, timeout=60, check=True).stdout

    assert complete("openenv va").split() == ["validate"]
    assert "--max-sessions" in complete("openenv serve --max").split()
    script = subprocess.run([str(Path(sys.executable).parent / "openenv"), "--show-completion", "bash"],
                            capture_output=True, text=True, timeout=60, check=True).stdout
    assert "_OPENENV_COMPLETE=complete_bash" in script  # what `--install-completion bash` adds to ~/.bashrc


@pytest.mark.parametrize("width", [40, 200])
def test_fail_prints_square_brackets_as_they_are(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                                 width: int) -> None:
    from openenv_sdk.cli import _output

    monkeypatch.setattr(_output.err_console, "width", width)
    with pytest.raises(typer.Exit) as exited:
        fail("the build needs the [docker] extra; [bold]not markup[/]", hint="pip install 'openenv-sdk[docker]'")
    assert exited.value.exit_code == 1
    err = flat(capsys.readouterr().err)
    assert "the build needs the [docker] extra; [bold]not markup[/]" in err
    assert "pip install 'openenv-sdk[docker]'" in err


def test_say_prints_square_brackets_as_they_are(capsys: pytest.CaptureFixture[str]) -> None:
    say("pip install 'openenv-sdk[datasets]'", style="dim")
    assert capsys.readouterr().out == "pip install 'openenv-sdk[datasets]'\n"


def test_serve_refuses_a_port_in_use_in_one_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [*OPENENV, "serve", str(ECHO_DIR), "--port", str(port), "--no-auth"],
            capture_output=True, text=True, timeout=60, env={**os.environ, "COLUMNS": "200"},
        )
    assert result.returncode == 1
    assert "Serving" not in result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert f"Error: port {port} on 127.0.0.1 is already in use" in result.stderr
    assert "choose another port: --port N" in result.stderr

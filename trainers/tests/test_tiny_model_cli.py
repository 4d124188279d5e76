"""`python -m openenv_trainers.tiny_model`: a real argument parser (`--help` is help, not a folder
name) and a progress bar while the model is taught the tool-call format."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from openenv_trainers.tiny_model import main


def test_help_prints_usage_and_builds_nothing(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "openenv_trainers.tiny_model", "--help"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: python -m openenv_trainers.tiny_model")
    assert "--sft-steps" in result.stdout
    assert list(tmp_path.iterdir()) == []


def test_an_unknown_option_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--sft-stesp", "3", str(tmp_path / "m")])
    assert exited.value.code == 2
    assert "unrecognized arguments: --sft-stesp" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()


def test_the_build_shows_its_sft_steps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main([str(tmp_path / "m"), "--sft-steps", "2"])
    out, err = capsys.readouterr()
    assert out == f"{tmp_path / 'm'}\n"
    assert "building the tiny model: SFT" in err and "2/2" in err
    assert (tmp_path / "m" / "config.json").is_file()

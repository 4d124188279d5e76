"""docs/reliability.md's table names every reliability probe (`scripts/gen_reliability_table.py`)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_reliability_table_names_every_probe(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("openenv_gen_reliability_table", ROOT / "scripts" / "gen_reliability_table.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(sys, "argv", ["gen_reliability_table", "--check"])
    assert module.main() == 0, capsys.readouterr().out
    assert len(module.probes()) >= 29

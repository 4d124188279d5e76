"""Every generated-doc script writes or checks its files through the one helper, scripts/_gendoc.py,
loaded by file path as the other tests load them (scripts/ is then not on the path)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from .test_generated_docs import _script

SCRIPTS = {  # script: the module attribute naming where it writes
    "gen_api_docs": "DOCS_PATH",
    "gen_cli_docs": "DOCS_PATH",
    "gen_errors_doc": "DOCS_PATH",
    "gen_manifest_docs": "DOCS_PATH",
    "gen_protocol_schema": "DOCS_DIR",
}


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_a_script_checks_writes_and_checks_again_through_the_helper(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Pointed at an empty folder: --check fails naming each missing file on stderr, a run writes
    them, --check then passes; the script's `main` is the shared helper's, not a copy."""
    script = _script(name)
    gendoc = sys.modules["_gendoc"]
    assert script.write_or_check is gendoc.write_or_check
    where = tmp_path / "docs" / ("protocol" if SCRIPTS[name] == "DOCS_DIR" else "page.md")
    monkeypatch.setattr(script, SCRIPTS[name], where)

    monkeypatch.setattr(sys, "argv", [name, "--check"])
    assert script.main() == 1
    err = capsys.readouterr().err
    assert f"is stale: run python scripts/{name}.py" in err and str(tmp_path) in err

    monkeypatch.setattr(sys, "argv", [name])
    assert script.main() == 0
    written = sorted(p for p in tmp_path.rglob("*") if p.is_file())
    assert written and all(p.read_text(encoding="utf-8") for p in written)
    assert f"wrote {written[0]}" in capsys.readouterr().out

    monkeypatch.setattr(sys, "argv", [name, "--check"])
    assert script.main() == 0, capsys.readouterr()

    written[0].write_text(written[0].read_text(encoding="utf-8") + "edited by hand\n", encoding="utf-8")
    assert script.main() == 1
    assert str(written[0]) in capsys.readouterr().err

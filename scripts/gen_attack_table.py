"""The attack table of docs/security.md, from the tests in tests/security/.

    python scripts/gen_attack_table.py          # run the attacks, rewrite the table
    python scripts/gen_attack_table.py --check  # exit 1 if an attack test is missing from the table
    python scripts/gen_attack_table.py --junit a.xml --junit b.xml  # results of earlier runs
    python scripts/gen_attack_table.py --junit a.xml --keep  # rows not in a.xml keep their last result

Each test in tests/security/ is one attack; its row says what it tries (the test's docstring, or
its name), where (the file), and how it ended in the last run: `blocked` when the test passed
(the attack failed), `WORKED` when it failed. The table sits between two markers in the page.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests" / "security"
PAGE = ROOT / "docs" / "security.md"
START, END = "<!-- attacks:start -->", "<!-- attacks:end -->"
AREAS = {
    "test_sandbox_isolation": "sandbox",
    "test_attack_coding": "coding",
    "test_attack_terminal": "terminal",
    "test_attack_mini_swe": "mini_swe",
    "test_attack_images": "images",
    "test_attack_harbor_image": "harbor (own image)",
    "test_attack_checkpoint": "checkpoint",
}


def attacks() -> list[tuple[str, str, str]]:
    """(file stem, test name, what it tries) for every test function in tests/security/."""
    rows = []
    for path in sorted(TESTS.glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test_"):
                doc = ast.get_docstring(node)
                what = doc.strip().splitlines()[0] if doc else node.name[5:].replace("_", " ")
                rows.append((path.stem, node.name, what))
    return rows


def area(stem: str) -> str:
    if stem in AREAS:
        return AREAS[stem]
    if stem.startswith("test_server_"):
        return f"server ({stem.removeprefix('test_server_').replace('_', ' ')})"
    return stem.removeprefix("test_")


def run_results() -> dict[tuple[str, str], str]:
    """Run tests/security; the outcome of each attack."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.xml"
        subprocess.run(
            [sys.executable, "-m", "pytest", str(TESTS), "-q", "-p", "no:cacheprovider", f"--junitxml={report}"],
            cwd=ROOT, check=False, env={**os.environ},
        )  # fmt: skip
        return read_results([report])


def read_results(reports: list[Path]) -> dict[tuple[str, str], str]:
    """Outcome per (file stem, test name, without parameters): blocked / WORKED / skipped."""
    outcomes: dict[tuple[str, str], str] = {}
    for report in reports:
        for case in ET.parse(report).getroot().iter("testcase"):
            stem = case.get("classname", "").rsplit(".", 1)[-1]
            name = case.get("name", "").split("[", 1)[0]
            if case.find("failure") is not None or case.find("error") is not None:
                outcome = "WORKED"
            elif case.find("skipped") is not None:
                outcome = "skipped"
            else:
                outcome = "blocked"
            previous = outcomes.get((stem, name))
            if previous != "WORKED":  # one failing parameter is enough
                outcomes[(stem, name)] = outcome if previous in (None, "blocked", "skipped") else previous
    return outcomes


_ROW = re.compile(r"^\| \d+ \| .*? \| (?P<outcome>[^|]+?) \| `(?P<stem>\w+)::(?P<name>\w+)` \|$", re.M)
_CONTROL_OUTCOMES = {"control holds": "blocked", "CONTROL FAILED": "WORKED"}


def previous_results(text: str) -> dict[tuple[str, str], str]:
    """The outcomes the page's table shows now (for `--keep`)."""
    return {
        (m["stem"], m["name"]): _CONTROL_OUTCOMES.get(m["outcome"], m["outcome"]) for m in _ROW.finditer(text)
    }


def table(rows: list[tuple[str, str, str]], outcomes: dict[tuple[str, str], str], *, kept: bool = False) -> str:
    attacks_only = [(s, n) for s, n, _ in rows if not n.startswith("test_control")]
    blocked = sum(outcomes.get(key) == "blocked" for key in attacks_only)
    lines = [
        START,
        f"{len(attacks_only)} attacks, {blocked} blocked, and {len(rows) - len(attacks_only)} controls, "
        f"as run on {datetime.date.today()}{' (rows not in that run: as last run)' if kept else ''} "
        f"(`python scripts/gen_attack_table.py`; each is a test in `tests/security/`, run in CI).",
        "",
        "| # | where | attack | result | test |",
        "|---|---|---|---|---|",
    ]
    for i, (stem, name, what) in enumerate(rows, 1):
        outcome = outcomes.get((stem, name), "not run")
        if name.startswith("test_control"):  # a control is not an attack: it checks grading still works
            outcome = {"blocked": "control holds", "WORKED": "CONTROL FAILED"}.get(outcome, outcome)
        lines.append(f"| {i} | {area(stem)} | {what} | {outcome} | `{stem}::{name}` |")
    lines.append(END)
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check that every attack is in the table")
    parser.add_argument("--junit", type=Path, action="append", help="take results from these junit files")
    parser.add_argument("--keep", action="store_true", help="with --junit: rows not in them keep the page's result")
    args = parser.parse_args()
    rows = attacks()
    text = PAGE.read_text(encoding="utf-8")
    if args.check:
        missing = [f"{stem}::{name}" for stem, name, _ in rows if f"`{stem}::{name}`" not in text]
        for item in missing:
            print(f"not in docs/security.md: {item} (run python scripts/gen_attack_table.py)")
        return 1 if missing else 0
    before, _, rest = text.partition(START)
    _, _, after = rest.partition(END)
    results = read_results(args.junit) if args.junit else run_results()
    kept = bool(args.junit and args.keep)
    if kept:
        results = {**previous_results(rest), **results}
    PAGE.write_text(before + table(rows, results, kept=kept) + after, encoding="utf-8")
    print(f"wrote {len(rows)} attacks to {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

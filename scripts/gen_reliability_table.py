"""The reliability table of docs/reliability.md, from the tests that probe the server, the client
and resumed runs under churn and abuse.

    python scripts/gen_reliability_table.py          # run the probes, rewrite the table
    python scripts/gen_reliability_table.py --check  # exit 1 if a probe is missing from the table
    python scripts/gen_reliability_table.py --junit a.xml  # results of an earlier run
    python scripts/gen_reliability_table.py --junit-out r.xml  # also keep this run's results

Each probe is a test (every test of the files in `PROBES`, or the named ones): a real server on
a real port, real clients. Its row says what it tries (the test's docstring, or its name), where,
and how it ended: `holds` when the test passed, `FAILS` when it failed. The table sits between
two markers in the page.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "reliability.md"
START, END = "<!-- reliability:start -->", "<!-- reliability:end -->"

PROBES: dict[str, tuple[str, list[str] | None]] = {
    # file: (area, the tests that are probes; None: every test of the file)
    "tests/server/test_churn.py": ("server: memory", None),
    "tests/server/test_drain.py": ("server: shutdown", None),
    "tests/security/test_server_robustness.py": ("server: bad input, hostile code", None),
    "tests/server/test_ws_oversized.py": ("server: oversized fragmented messages", None),
    "tests/client/test_hostile_server.py": ("client: hostile server", None),
    "tests/evaluation/test_eval_cli.py": (
        "eval / collect: resume",
        [
            "test_a_rerun_resumes_and_replays_only_what_failed",
            "test_a_rerun_skips_damaged_or_ill_formed_lines_and_replays_their_episodes",
        ],
    ),
    "tests/harbor/test_import_limits.py": (
        "harbor import: names, sizes",
        [
            "test_a_task_name_with_newlines_is_refused_before_it_reaches_a_generated_file",
            "test_task_names_outside_the_safe_set_are_refused",
            "test_a_folder_name_with_a_newline_is_refused_when_the_task_has_no_name",
            "test_a_200_mib_instruction_is_refused_without_being_read",
            "test_a_file_over_the_limit_is_refused_by_name",
            "test_a_task_folder_over_the_total_limit_is_refused",
            "test_a_task_folder_with_too_many_entries_is_refused",
            "test_the_generated_task_yaml_holds_any_instruction_exactly",
            "test_verifier_env_values_are_shell_quoted_in_check_sh",
        ],
    ),
    "tests/sandbox/test_proxy_lifetime.py": ("sandbox: egress proxy lifetime", None),
}


def probes() -> list[tuple[str, str, str, str]]:
    """(file, area, test name, what it tries) for every probe."""
    rows = []
    for file, (where, names) in PROBES.items():
        tree = ast.parse((ROOT / file).read_text(encoding="utf-8"))
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or not node.name.startswith("test_"):
                continue
            if names is not None and node.name not in names:
                continue
            doc = ast.get_docstring(node)
            what = " ".join(doc.strip().split("\n\n")[0].split()) if doc else node.name[5:].replace("_", " ")
            rows.append((file, where, node.name, what))
    return rows


def run_results(junit_out: Path | None) -> dict[tuple[str, str], str]:
    """Run the probes; the outcome of each."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.xml"
        targets = [f"{file}::{name}" for file, (_, names) in PROBES.items() for name in names or [""]]
        targets = [t.removesuffix("::") for t in targets]
        subprocess.run(
            [sys.executable, "-m", "pytest", *targets, "-q", "-p", "no:cacheprovider", f"--junitxml={report}"],
            cwd=ROOT, check=False, env={**os.environ},
        )  # fmt: skip
        if junit_out is not None:
            shutil.copyfile(report, junit_out)
        return read_results([report])


def read_results(reports: list[Path]) -> dict[tuple[str, str], str]:
    """Outcome per (file stem, test name without parameters): holds / FAILS / skipped."""
    outcomes: dict[tuple[str, str], str] = {}
    for report in reports:
        for case in ET.parse(report).getroot().iter("testcase"):
            stem = case.get("classname", "").rsplit(".", 1)[-1]
            name = case.get("name", "").split("[", 1)[0]
            if case.find("failure") is not None or case.find("error") is not None:
                outcome = "FAILS"
            elif case.find("skipped") is not None:
                outcome = "skipped"
            else:
                outcome = "holds"
            if outcomes.get((stem, name)) != "FAILS":  # one failing parameter is enough
                outcomes[(stem, name)] = outcome
    return outcomes


def table(rows: list[tuple[str, str, str, str]], outcomes: dict[tuple[str, str], str]) -> str:
    held = sum(outcomes.get((Path(file).stem, name)) == "holds" for file, _, name, _ in rows)
    lines = [
        START,
        f"{len(rows)} probes, {held} hold, as run on {datetime.date.today()} "
        "(`python scripts/gen_reliability_table.py`; each is a test, run in CI).",
        "",
        "| # | where | probe | result | test |",
        "|---|---|---|---|---|",
    ]
    for i, (file, where, name, what) in enumerate(rows, 1):
        outcome = outcomes.get((Path(file).stem, name), "not run")
        lines.append(f"| {i} | {where} | {what.replace('|', '/')} | {outcome} | `{Path(file).stem}::{name}` |")
    lines.append(END)
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check that every probe is in the table")
    parser.add_argument("--junit", type=Path, action="append", help="take results from these junit files")
    parser.add_argument("--junit-out", type=Path, help="keep this run's junit file here")
    args = parser.parse_args()
    rows = probes()
    text = PAGE.read_text(encoding="utf-8")
    if args.check:
        missing = [f"{Path(file).stem}::{name}" for file, _, name, _ in rows if f"`{Path(file).stem}::{name}`" not in text]
        for item in missing:
            print(f"not in docs/reliability.md: {item} (run python scripts/gen_reliability_table.py)")
        return 1 if missing else 0
    before, _, rest = text.partition(START)
    _, _, after = rest.partition(END)
    results = read_results(args.junit) if args.junit else run_results(args.junit_out)
    PAGE.write_text(before + table(rows, results) + after, encoding="utf-8")
    print(f"wrote {len(rows)} probes to {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

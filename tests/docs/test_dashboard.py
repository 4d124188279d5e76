"""docs/grafana/openenv-dashboard.json queries only what a real server serves at /metrics, with the
labels it serves them with, and is a well-formed Grafana dashboard."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from openenv_sdk import create_app
from openenv_sdk.client import GenericEnvClient
from openenv_sdk.loader import load_environment
from openenv_sdk.testing import serve_app

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = json.loads((ROOT / "docs" / "grafana" / "openenv-dashboard.json").read_text(encoding="utf-8"))
_METRIC = re.compile(r"\b(openenv_[a-z_]+)")
_LABELS = re.compile(r"(?:by \(([^)]*)\)|\{([^}]*)\})")


def _served() -> dict[str, set[str]]:
    """Every sample name a server exposes after an episode, with the labels it carries."""
    with serve_app(create_app(load_environment(ROOT / "environments" / "echo").env_cls)) as url:
        with GenericEnvClient(url) as env:
            env.reset()
            env.step({"message": "hi"})
            env.call_tool("echo", message="hi")
        text = httpx.get(f"{url}/metrics").text
    served: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            served.setdefault(sample.name, set()).update(sample.labels)
    return served


def test_every_query_names_metrics_and_labels_the_server_serves() -> None:
    served = _served()
    queried = set()
    for panel in DASHBOARD["panels"]:
        for target in panel["targets"]:
            expr = target["expr"]
            for name in _METRIC.findall(expr):
                assert name in served, f"{panel['title']}: {name} is not served"
                queried.add(name)
                labels = {
                    label.split("=")[0].strip().rstrip("!")
                    for group in _LABELS.findall(expr)
                    for part in group
                    for label in part.split(",")
                    if label.strip()
                } - {"le"}
                allowed = set().union(*(served[n] for n in _METRIC.findall(expr)))
                assert labels <= allowed, f"{panel['title']}: labels {labels - allowed} are not served"
    # every family of docs/metrics.md's table has a panel
    assert {re.sub(r"_(bucket|count|sum|total)$", "", n) for n in queried} >= {
        "openenv_sessions_active", "openenv_sessions_max", "openenv_sessions_unreset", "openenv_mcp_sessions_active",
        "openenv_abandoned_threads", "openenv_sessions_opened", "openenv_sessions_closed", "openenv_resets",
        "openenv_steps", "openenv_tool_calls", "openenv_call_duration_seconds", "openenv_tool_call_duration_seconds",
    }  # fmt: skip


def test_the_dashboard_is_well_formed() -> None:
    panels = DASHBOARD["panels"]
    assert DASHBOARD["uid"] and DASHBOARD["schemaVersion"] >= 36
    assert [p["id"] for p in panels] == list(range(1, len(panels) + 1))
    assert DASHBOARD["templating"]["list"][0] == {
        "name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus"
    }  # fmt: skip
    cells = set()
    for panel in panels:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs)) and refs
        grid = panel["gridPos"]
        cell = (grid["x"], grid["y"])
        assert cell not in cells and grid["x"] + grid["w"] <= 24
        cells.add(cell)

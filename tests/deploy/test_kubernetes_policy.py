"""The objects `openenv deploy` prints pass checkov, an existing Kubernetes policy linter, with
only the waivers bubblewrap makes inherent (each named, with its reason, on the Deployment).

checkov lives in a venv of its own (scripts/setup_kube_lint.sh; scripts/test.sh runs it):
`OPENENV_CHECKOV` names another binary.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from openenv_sdk.deploy import kubernetes_objects
from openenv_sdk.deploy._kubernetes import _PlainDumper
from openenv_sdk.deploy._pod_security import CHECKOV_WAIVERS

ROOT = Path(__file__).resolve().parents[2]
CHECKOV = Path(os.environ.get("OPENENV_CHECKOV", ROOT / ".cache" / "kubelint-venv" / "bin" / "checkov"))
IMAGE = "registry.example/openenv-env@sha256:" + "0" * 64  # pinned by digest, as checkov asks (CKV_K8S_43)


def checkov(objects: list[dict[str, Any]], folder: Path) -> dict[str, list[str]]:
    """checkov's check ids over `objects`, by outcome (`passed`, `failed`, `skipped`)."""
    assert CHECKOV.exists(), f"{CHECKOV} is missing: run scripts/setup_kube_lint.sh"
    path = folder / "objects.yaml"
    path.write_text(yaml.dump_all(objects, Dumper=_PlainDumper, sort_keys=False))
    # --skip-download: no call home for the guidelines (CI has no route out)
    result = subprocess.run(
        [str(CHECKOV), "-f", str(path), "--framework", "kubernetes", "--skip-download", "-o", "json"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode in (0, 1), result.stderr[-3000:]
    report = json.loads(result.stdout)
    results = report["results"]
    return {
        outcome: sorted(check["check_id"] for check in results[f"{outcome}_checks"]) for outcome in ("passed", "failed", "skipped")
    }


@pytest.mark.timeout(600)
@pytest.mark.parametrize("env", ["terminal", "coding"])
def test_a_sandboxed_environment_passes_with_only_the_bubblewrap_waivers(env: str, tmp_path: Path) -> None:
    objects = kubernetes_objects(ROOT / "environments" / env, image=IMAGE, namespace="rl")
    found = checkov(objects, tmp_path)
    assert found["failed"] == []
    assert found["skipped"] == sorted(CHECKOV_WAIVERS)  # each waiver used, none beyond them
    assert {"CKV_K8S_20", "CKV_K8S_22", "CKV_K8S_28", "CKV_K8S_31", "CKV_K8S_35", "CKV_K8S_38", "CKV2_K8S_6"} <= set(found["passed"])
    # the waivers are written on the Deployment, each with its reason
    annotations = objects[1]["metadata"]["annotations"]
    assert sorted(v.split("=", 1)[0] for v in annotations.values()) == sorted(CHECKOV_WAIVERS)
    assert all(v.split("=", 1)[1] for v in annotations.values())


@pytest.mark.timeout(600)
def test_an_environment_without_a_sandbox_passes_with_no_waiver(tmp_path: Path) -> None:
    objects = kubernetes_objects(ROOT / "environments" / "wordle", image=IMAGE, namespace="rl")
    assert "annotations" not in objects[1]["metadata"]
    found = checkov(objects, tmp_path)
    assert found["failed"] == [] and found["skipped"] == []
    assert {"CKV_K8S_23", "CKV_K8S_25", "CKV_K8S_39", "CKV_K8S_40"} <= set(found["passed"])


@pytest.mark.timeout(600)
def test_the_linter_catches_what_the_objects_avoid(tmp_path: Path) -> None:
    # not vacuous: the sandboxed objects without their waivers, their NetworkPolicy and their
    # file-mounted token fail exactly the checks those are there for
    secret, deployment, service, _ = kubernetes_objects(ROOT / "environments" / "terminal", image=IMAGE, namespace="rl")
    del deployment["metadata"]["annotations"]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["env"].append({"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "terminal-orchestrator", "key": "orchestrator-token"}}})
    found = checkov([secret, deployment, service], tmp_path)
    assert set(found["failed"]) == {*CHECKOV_WAIVERS, "CKV_K8S_35", "CKV2_K8S_6"}

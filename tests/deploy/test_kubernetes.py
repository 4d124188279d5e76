"""The Kubernetes objects for an environment image, validated offline against the Kubernetes API
schema (`kubernetes-validate`, strict: unknown fields are errors); what they allow (the pod's
security, the NetworkPolicy) for a sandboxed environment and for one without a sandbox."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from openenv_sdk.deploy import kubernetes_objects, kubernetes_yaml
from openenv_sdk.providers.docker import SANDBOX_CAPABILITIES
from openenv_sdk.types import ORCHESTRATOR_TOKEN_FILE_VAR

ENVIRONMENTS = Path(__file__).resolve().parents[2] / "environments"
ECHO = ENVIRONMENTS / "echo"
KUBERNETES_VERSION = "1.30"  # the first with the appArmorProfile field


@pytest.mark.parametrize(
    ("env", "options"),
    [
        ("echo", {"replicas": 3}),
        ("wordle", {}),
        ("terminal", {}),
        ("coding", {"apparmor": "localhost/openenv-bwrap", "ingress_namespaces": {"team": "rl"}}),
        ("mini_swe", {"user_namespace": True, "ingress_pods": {"app": "trainer"}}),
    ],
)
def test_the_objects_are_valid_kubernetes_objects(env: str, options: dict[str, object]) -> None:
    documents = list(yaml.safe_load_all(kubernetes_yaml(ENVIRONMENTS / env, image="openenv-env:0.1.0", **options)))
    assert [d["kind"] for d in documents] == ["Secret", "Deployment", "Service", "NetworkPolicy"]
    for document in documents:
        kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)


def test_the_validator_refuses_a_broken_object() -> None:
    deployment = kubernetes_objects(ECHO, image="openenv-echo:0.1.0")[1]
    deployment["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "eight thousand"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)


def test_manifest_resources_probes_and_the_token_secret() -> None:
    secret, deployment, service, _ = kubernetes_objects(ECHO, image="img:1", replicas=2, orchestrator_token="t0k")
    assert secret["stringData"] == {"orchestrator-token": "t0k"}
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert deployment["spec"]["replicas"] == 2
    assert container["resources"]["requests"] == {"cpu": "1", "memory": str(2 * 2**30)}  # manifest defaults
    assert container["readinessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
    # the token is a file from the Secret (`openenv serve --orchestrator-token-file`), never a variable
    assert container["env"] == [{"name": ORCHESTRATOR_TOKEN_FILE_VAR, "value": "/var/lib/openenv/orchestrator/token"}]
    [volume] = [v for v in pod["volumes"] if v["name"] == "orchestrator-token"]
    assert volume["secret"] == {
        "secretName": "echo-orchestrator", "items": [{"key": "orchestrator-token", "path": "token"}], "defaultMode": 0o440
    }
    assert {"name": "orchestrator-token", "mountPath": "/var/lib/openenv/orchestrator", "readOnly": True} in container["volumeMounts"]
    assert service["spec"]["ports"][0]["port"] == container["ports"][0]["containerPort"] == 8000
    assert kubernetes_objects(ECHO, image="img:1")[0]["stringData"] != kubernetes_objects(ECHO, image="img:1")[0]["stringData"]


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="replicas must be at least 1, got 0"):
        kubernetes_objects(ECHO, image="img:1", replicas=0)
    with pytest.raises(ValueError, match="cannot make a Kubernetes name of '!!!': pass name="):
        kubernetes_objects(ECHO, image="img:1", name="!!!")
    with pytest.raises(ValueError, match="apparmor must be one of unconfined, runtime/default, localhost/<profile>, got 'off'"):
        kubernetes_objects(ENVIRONMENTS / "terminal", image="img:1", apparmor="off")
    with pytest.raises(ValueError, match="user_namespace is for sandboxed environments"):
        kubernetes_objects(ECHO, image="img:1", user_namespace=True)


def _pod(env: str, **options: object) -> dict:
    deployment = kubernetes_objects(ENVIRONMENTS / env, image="img:1", **options)[1]  # type: ignore[arg-type]
    return deployment["spec"]["template"]["spec"]


def test_without_a_sandbox_the_pod_is_restricted() -> None:
    # Pod Security Standards `restricted`: non-root, no escalation, every capability dropped, RuntimeDefault seccomp
    pod = _pod("wordle")
    context = pod["containers"][0]["securityContext"]
    assert pod["securityContext"] == {
        "seccompProfile": {"type": "RuntimeDefault"}, "runAsNonRoot": True, "runAsUser": 10001, "runAsGroup": 10001, "fsGroup": 10001
    }
    assert pod["automountServiceAccountToken"] is False
    assert context == {
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "readOnlyRootFilesystem": True,
        "appArmorProfile": {"type": "RuntimeDefault"},
        "capabilities": {"drop": ["ALL"]},
    }
    assert [v["name"] for v in pod["volumes"]] == ["orchestrator-token", "tmp"]  # /tmp writable, nothing else
    assert "hostUsers" not in pod


def test_a_sandboxed_pod_gets_what_bubblewrap_needs_and_no_more() -> None:
    pod = _pod("terminal")
    container = pod["containers"][0]
    context = container["securityContext"]
    assert context["capabilities"] == {"drop": ["ALL"], "add": list(SANDBOX_CAPABILITIES)}  # DockerProvider's set
    assert (context["runAsUser"], context["runAsNonRoot"], context["privileged"]) == (0, False, False)
    assert context["allowPrivilegeEscalation"] is False and context["readOnlyRootFilesystem"] is True
    assert context["appArmorProfile"] == {"type": "Unconfined"}  # the runtimes' default profiles deny mount
    assert pod["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}  # allows mount/unshare with SYS_ADMIN
    assert pod["automountServiceAccountToken"] is False
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert mounts == {"/tmp", "/run", "/var/lib/openenv/orchestrator"}
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert 1_000_000 <= int(env["OPENENV_SANDBOX_UID_BASE"]) < 2_001_000_000 and env["OPENENV_SANDBOX_UID_COUNT"] == "2000"
    # in a user namespace of its own: bubblewrap's fresh /proc needs it unmasked; session uids are the pod's own
    userns = _pod("terminal", user_namespace=True, apparmor="localhost/openenv-bwrap")
    assert userns["hostUsers"] is False
    assert userns["containers"][0]["securityContext"]["procMount"] == "Unmasked"
    assert userns["containers"][0]["securityContext"]["appArmorProfile"] == {"type": "Localhost", "localhostProfile": "openenv-bwrap"}
    assert "OPENENV_SANDBOX_UID_BASE" not in {e["name"] for e in userns["containers"][0]["env"]}


def _write_env(root: Path, network: str) -> Path:
    folder = root / "netenv"
    folder.mkdir()
    (folder / "openenv.yaml").write_text(f"name: netenv\nport: 8123\nnetwork:\n{network}")
    return folder


def test_the_network_policy_denies_by_default(tmp_path: Path) -> None:
    policy = kubernetes_objects(ENVIRONMENTS / "terminal", image="img:1", namespace="rl")[3]
    spec = policy["spec"]
    assert spec["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": "terminal"}}
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    assert spec["egress"] == []  # network policy none: nothing out, not even DNS
    assert spec["ingress"] == [{"from": [{"podSelector": {"matchLabels": {"openenv.io/client": "true"}}}], "ports": [{"protocol": "TCP", "port": 8000}]}]
    # clients chosen by namespace and pod labels (both: one peer, so both must match)
    chosen = kubernetes_objects(ECHO, image="img:1", ingress_namespaces={"team": "rl"}, ingress_pods={"app": "trainer"})[3]
    assert chosen["spec"]["ingress"][0]["from"] == [
        {"namespaceSelector": {"matchLabels": {"team": "rl"}}, "podSelector": {"matchLabels": {"app": "trainer"}}}
    ]
    any_pod = kubernetes_objects(ECHO, image="img:1", ingress_namespaces={"team": "rl"})[3]
    assert any_pod["spec"]["ingress"][0]["from"] == [{"namespaceSelector": {"matchLabels": {"team": "rl"}}}]


def test_egress_follows_the_manifest_allowlist(tmp_path: Path) -> None:
    folder = _write_env(tmp_path, "  policy: allowlist\n  allow: [pypi.org, 'files.example:8443']\n")
    egress = kubernetes_objects(folder, image="img:1")[3]["spec"]["egress"]
    dns, out = egress
    assert dns["ports"] == [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]
    assert dns["to"][0]["podSelector"] == {"matchLabels": {"k8s-app": "kube-dns"}}
    assert out["ports"] == [{"protocol": "TCP", "port": p} for p in (80, 443, 8443)]  # pypi.org: 80 and 443 by default
    v4 = out["to"][0]["ipBlock"]
    assert v4["cidr"] == "0.0.0.0/0" and {"10.0.0.0/8", "169.254.0.0/16", "127.0.0.0/8"} <= set(v4["except"])
    assert out["to"][1]["ipBlock"]["cidr"] == "::/0"


def test_a_bridge_manifest_gets_public_egress_on_any_port(tmp_path: Path) -> None:
    folder = _write_env(tmp_path, "  policy: bridge\n")
    dns, out = kubernetes_objects(folder, image="img:1")[3]["spec"]["egress"]
    assert "ports" not in out and out["to"][0]["ipBlock"]["except"][0] == "10.0.0.0/8"


def test_the_module_prints_the_objects() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "openenv_sdk.deploy", str(ECHO), "--image", "img:1", "--name", "Echo Env"],
        capture_output=True, text=True, check=True,
    ).stdout
    assert [d["metadata"]["name"] for d in yaml.safe_load_all(out)] == ["echo-env-orchestrator", "echo-env", "echo-env", "echo-env"]

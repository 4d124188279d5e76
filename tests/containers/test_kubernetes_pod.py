"""The pod `openenv deploy` writes for a sandboxed environment runs its sandbox: the Deployment's
container securityContext, volumes and variables, applied by a real engine (runc, the engine's
default seccomp profile) to the terminal environment's image, and an agent command run through it.

What a kubelet would do is done here by hand: root with every capability dropped and
`SANDBOX_CAPABILITIES` added, no-new-privileges, a read-only root with tmpfs where the pod has
emptyDirs, the Secret as a read-only file. Not a cluster: no CNI, no kubelet, no AppArmor here.
"""

from __future__ import annotations

import re
import secrets
from pathlib import Path
from typing import Any

import httpx
import pytest

from openenv_sdk.build import build_image
from openenv_sdk.client import GenericEnvClient
from openenv_sdk.containers.labels import LABEL_MANAGED
from openenv_sdk.deploy import kubernetes_objects
from openenv_sdk.providers.health import wait_for_health

from .conftest import REPO, TEST_BASE_IMAGE, requires_engine

pytestmark = requires_engine
TERMINAL = REPO / "environments" / "terminal"


def _run_as_the_pod(engine: Any, image: str, token_dir: Path, objects: list[dict[str, Any]]) -> Any:
    """`engine.containers.run` with what the Deployment's pod template asks for."""
    pod = objects[1]["spec"]["template"]["spec"]
    [container] = pod["containers"]
    context = container["securityContext"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    tmpfs, binds = {}, {}
    for mount in container["volumeMounts"]:
        volume = volumes[mount["name"]]
        if "emptyDir" in volume:
            tmpfs[mount["mountPath"]] = "rw,size=" + str(volume["emptyDir"]["sizeLimit"]).replace("Mi", "m")
        else:  # the Secret
            binds[str(token_dir)] = {"bind": mount["mountPath"], "mode": "ro"}
    limits = container["resources"]["limits"]
    assert context["allowPrivilegeEscalation"] is False and context["readOnlyRootFilesystem"] is True
    return engine.containers.run(
        image,
        detach=True,
        name=f"openenv-k8s-pod-{secrets.token_hex(4)}",
        labels={LABEL_MANAGED: "1"},
        user=f"{context['runAsUser']}:{context['runAsGroup']}",
        cap_drop=context["capabilities"]["drop"],
        cap_add=context["capabilities"]["add"],
        security_opt=["no-new-privileges"],
        read_only=True,
        tmpfs=tmpfs,
        volumes=binds,
        environment={e["name"]: e["value"] for e in container["env"]},
        mem_limit=int(limits["memory"]),
        nano_cpus=int(float(limits["cpu"]) * 1e9),
        ports={f"{container['ports'][0]['containerPort']}/tcp": ("127.0.0.1", None)},
    )


@pytest.mark.timeout(900)
def test_the_sandboxed_pod_runs_agent_commands_in_the_sandbox(engine: Any, tmp_path: Path) -> None:
    image = build_image(TERMINAL, tag="openenv-test-k8s-terminal:latest", base_image=TEST_BASE_IMAGE, engine=engine, output="quiet")
    token = secrets.token_urlsafe(16)
    objects = kubernetes_objects(TERMINAL, image=image, namespace="rl", orchestrator_token=token)
    token_dir = tmp_path / "secret"
    token_dir.mkdir()
    (token_dir / "token").write_text(token)  # the Secret's key, as the volume's items put it
    (token_dir / "token").chmod(0o440)
    container = _run_as_the_pod(engine, image, token_dir, objects)
    try:
        container.reload()
        port = container.attrs["NetworkSettings"]["Ports"]["8000/tcp"][0]["HostPort"]
        url = f"http://127.0.0.1:{port}"

        def running() -> bool:
            container.reload()
            return bool(container.status == "running")

        assert wait_for_health(url, timeout_s=120, is_alive=running) == "healthy", container.logs().decode()[-3000:]
        isolation = httpx.get(f"{url}/health", timeout=10).json()["isolation"]
        assert (isolation["isolated"], isolation["mode"]) == (True, "bubblewrap"), isolation  # usable, not opted out
        # the session bounds too: a cgroup per session (the cgroupfs remounted with SYS_ADMIN), a bounded tmpfs workspace
        assert "one per session" in isolation["session_memory"] and isolation["workspace"].startswith("tmpfs"), isolation
        with GenericEnvClient(url, orchestrator_token=token) as env:
            env.reset(task_id="count_log_files")
            result = env.call_tool("bash", command="echo uid=$(id -u); grep CapEff /proc/self/status; echo written > probe && cat probe")
        text = " ".join(getattr(c, "text", "") for c in result.content)
        assert not result.is_error, text + container.logs().decode()[-3000:]
        env_vars = {e["name"]: e["value"] for e in objects[1]["spec"]["template"]["spec"]["containers"][0]["env"]}
        uid = int(text.split("uid=", 1)[1].split()[0])
        base = int(env_vars["OPENENV_SANDBOX_UID_BASE"])
        assert base <= uid < base + 2000, text  # the session's own uid, from the Deployment's range
        assert re.search(r"CapEff:\s+0{16}", text), text  # no capability reaches the command
        assert "written" in text  # its workspace is writable under the read-only root
    finally:
        container.remove(force=True, v=True)

"""Weight sync to a vLLM server on the same machine, for TRL's `AsyncGRPOTrainer` on ONE GPU.

TRL's default `WeightTransferClient` streams the weights over NCCL into a server started with
`--weight-transfer-config '{"backend":"nccl"}'`; NCCL needs the trainer and the server on two
different GPUs. With one GPU shared by both, `VLLMReloadWeightTransfer` (a
`WeightTransferProtocol`) goes through vLLM's own reload path instead:

1. `pause()`: `POST /pause?mode=keep` (requests in flight are frozen, not aborted, and go on after
   `resume()` with the new weights);
2. `send_weights(iterator)`: the trainer's parameters, cast to the server's dtype, are written as
   one safetensors file into a folder in shared memory (`/dev/shm`), then
   `POST /collective_rpc {"method": "reload_weights", "kwargs": {"weights_path": folder}}` makes
   every vLLM worker load them in place (`GPUModelRunner.reload_weights`: layerwise reload of
   checkpoint-format weights);
3. `resume()`: `POST /resume`.

The server must run with `VLLM_SERVER_DEV_MODE=1` (it exposes `/pause`, `/resume` and
`/collective_rpc`). vLLM 0.26 also has a CUDA-IPC engine (`--weight-transfer-config
'{"backend":"ipc"}'`) that would skip the file, but its module imports Ray at the top, and Ray is
not installed on the GPU machines here.

Each phase is timed in `timings` (seconds), and optional `before_sync`/`after_sync` hooks run while
the server still has the old weights and once it has the new ones (the logprob check uses them).
Needs httpx, torch and safetensors; never imports vllm.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["VLLMReloadWeightTransfer"]


class VLLMReloadWeightTransfer:
    """`WeightTransferProtocol` through vLLM's reload from a shared-memory folder (see the module docstring)."""

    def __init__(
        self,
        base_url: str,
        *,
        folder: str | Path = "/dev/shm/openenv-policy",
        dtype: str = "bfloat16",
        timeout_s: float = 300.0,
        before_sync: Callable[[], None] | None = None,
        after_sync: Callable[[], None] | None = None,
        client: Any | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.folder = Path(folder)
        self.dtype = dtype
        self.timeout_s = timeout_s
        self.before_sync = before_sync
        self.after_sync = after_sync
        self.timings: list[dict[str, float]] = []
        """One record per sync: pause_s, save_s, reload_s, resume_s, bytes."""
        self._current: dict[str, float] = {}
        self._client: Any = client
        """An `httpx.Client` (one is made at `init_weight_transfer` when none is given)."""

    def _post(self, path: str, **kwargs: Any) -> Any:
        response = self._client.post(self.base_url + path, timeout=self.timeout_s, **kwargs)
        if response.status_code != 200:
            raise RuntimeError(f"vLLM {path} answered {response.status_code}: {response.text[:500]}")
        return response.json() if response.content else None

    def init_weight_transfer(self) -> None:
        import httpx

        if self._client is None:
            self._client = httpx.Client()
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                if self._client.get(self.base_url + "/health", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the vLLM server at {self.base_url} did not become healthy")
            time.sleep(1)
        response = self._client.get(self.base_url + "/is_paused", timeout=10)
        if response.status_code == 404:
            raise RuntimeError("the vLLM server has no /is_paused: start it with VLLM_SERVER_DEV_MODE=1")
        self.folder.mkdir(parents=True, exist_ok=True)

    def pause(self) -> None:
        if self.before_sync is not None:
            self.before_sync()
        t = time.perf_counter()
        self._post("/pause", params={"mode": "keep"})
        self._current = {"pause_s": time.perf_counter() - t}

    def send_weights(self, iterator: Iterator[tuple[str, Any]]) -> None:
        import torch
        from safetensors.torch import save_file

        dtype = getattr(torch, self.dtype)
        t = time.perf_counter()
        tensors = {name: tensor.detach().to(dtype).contiguous().cpu() for name, tensor in iterator}
        tmp = self.folder / "model.safetensors.tmp"
        save_file(tensors, str(tmp), metadata={"format": "pt"})
        os.replace(tmp, self.folder / "model.safetensors")
        self._current["save_s"] = time.perf_counter() - t
        self._current["bytes"] = float(sum(v.numel() * v.element_size() for v in tensors.values()))
        t = time.perf_counter()
        self._post(
            "/collective_rpc",
            json={"method": "reload_weights", "kwargs": {"weights_path": str(self.folder)}, "timeout": self.timeout_s},
        )
        self._current["reload_s"] = time.perf_counter() - t

    def resume(self) -> None:
        t = time.perf_counter()
        self._post("/resume")
        self._current["resume_s"] = time.perf_counter() - t
        self.timings.append(self._current)
        self._current = {}
        if self.after_sync is not None:
            self.after_sync()

    def destroy(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

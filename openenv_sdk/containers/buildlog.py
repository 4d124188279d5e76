"""Run an engine build and stream its log: step lines with elapsed time, a spinner on the rest.

Works with both Docker Engine's (`Step 3/12 : ...`) and Podman's (`STEP 3/12: ...`) logs.
"""

from __future__ import annotations

import re
import time
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from rich.console import Console
from rich.markup import escape

from openenv_sdk.containers.errors import BuildError

if TYPE_CHECKING:
    import docker

__all__ = ["BuildOutput", "run_build"]

BuildOutput = Literal["progress", "full", "quiet"]
"""`progress`: step lines and a spinner; `full`: every log line; `quiet`: nothing."""

_STEP_RE = re.compile(r"^(?:STEP|Step) (\d+)/(\d+)\s?:\s*(.*)$")
_ID_RE = re.compile(r"^(?:Successfully built|COMMIT .*?-->)\s*([0-9a-f]{12,64})\s*$")
_TAIL_LINES = 40


def run_build(
    engine: docker.DockerClient,
    *,
    context_dir: Path,
    dockerfile: str,
    tag: str,
    labels: dict[str, str] | None = None,
    network_mode: str | None = None,
    no_cache: bool = False,
    output: BuildOutput = "progress",
    timeout_s: float,
    console: Console | None = None,
) -> str:
    """Build `context_dir` with `dockerfile` (relative to it) as `tag`; return the image id.

    Raises:
        BuildError: the engine reported an error, the build ran over `timeout_s`, or the
            connection failed; the message ends with the tail of the build log.
    """
    import docker.errors

    out = console or Console(stderr=True, highlight=False)
    tail: deque[str] = deque(maxlen=_TAIL_LINES)
    started = time.monotonic()
    image_id: str | None = None
    kwargs: dict[str, Any] = {"network_mode": network_mode} if network_mode else {}
    try:
        stream = engine.api.build(
            path=str(context_dir),
            dockerfile=dockerfile,
            tag=tag,
            labels=labels or None,
            rm=True,
            forcerm=True,
            nocache=no_cache,
            decode=True,
            timeout=max(1, round(timeout_s)),
            **kwargs,
        )
        error: str | None = None
        with out.status(f"building {tag}", spinner="dots") as status:
            for chunk in stream:
                # After an error keep reading to the end of the stream (the engine ends it at
                # once): a stream read to its end gives its connection back instead of leaking it.
                if "error" in chunk or "errorDetail" in chunk:
                    error = error or str(chunk.get("error") or chunk["errorDetail"].get("message", ""))
                    tail.extend(error.splitlines())
                    continue
                aux = chunk.get("aux")
                if isinstance(aux, dict) and aux.get("ID"):
                    image_id = str(aux["ID"])
                for line in str(chunk.get("stream", "")).splitlines():
                    line = line.rstrip()
                    if not line:
                        continue
                    tail.append(line)
                    match = _ID_RE.match(line)
                    if match and image_id is None:
                        image_id = match.group(1)
                    if error is None:
                        _show(out, status, line, started, output, tag)
                if time.monotonic() - started > timeout_s:
                    raise BuildError(
                        _failure(tag, f"ran over {timeout_s:.0f}s", tail, started), tag=tag, log_tail=list(tail)
                    )
        if error is not None:
            raise BuildError(_failure(tag, error, tail, started), tag=tag, log_tail=list(tail))
    except BuildError:
        raise
    except (docker.errors.DockerException, OSError) as e:
        raise BuildError(_failure(tag, f"{type(e).__name__}: {e}", tail, started), tag=tag, log_tail=list(tail)) from e
    except Exception as e:  # requests' errors (timeouts, dropped connection) are not OSError subclasses
        if type(e).__module__.startswith(("requests", "urllib3")):
            raise BuildError(
                _failure(tag, f"{type(e).__name__}: {e}", tail, started), tag=tag, log_tail=list(tail)
            ) from e
        raise
    if image_id is None:
        image_id = str(engine.images.get(tag).id)
    if output != "quiet":
        out.print(f"[green]built[/] {escape(tag)} in {time.monotonic() - started:.1f}s")
    return image_id


def _show(out: Console, status: Any, line: str, started: float, output: BuildOutput, tag: str) -> None:
    if output == "quiet":
        return
    elapsed = f"[dim]{time.monotonic() - started:6.1f}s[/]"
    step = _STEP_RE.match(line)
    if step:
        number, total, instruction = step.groups()
        instruction = " ".join(instruction.split())
        out.print(f"{elapsed} [cyan]step {number}/{total}[/] {escape(instruction)}", **_fit(out))
        status.update(f"building {escape(tag)}: step {number}/{total}")
    elif output == "full":
        out.print(f"{elapsed}   {escape(line)}", **_fit(out))
    else:
        status.update(f"building {escape(tag)}: {escape(line[:100])}")


def _fit(out: Console) -> dict[str, Any]:
    """On a terminal a log line is cut to the width (one line each); in a log file or a pipe it
    is kept whole, on one line (rich's 80 columns would cut it)."""
    return {"no_wrap": True, "overflow": "ellipsis"} if out.is_terminal else {"soft_wrap": True}


def _failure(tag: str, reason: str, tail: deque[str], started: float) -> str:
    body = "\n".join(f"  | {line}" for line in tail) or "  | (no log)"
    elapsed_s = time.monotonic() - started
    return f"building {tag} failed after {elapsed_s:.1f}s: {reason.strip()}\nlast build log lines:\n{body}"

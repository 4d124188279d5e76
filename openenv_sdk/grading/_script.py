"""The worker script: `_codec.py` and `_worker.py` as one standalone source.

The worker runs as `python3 -I -S -c WORKER_SCRIPT <config JSON>`, so nothing of the package has
to exist where it runs (e.g. inside a sandbox that mounts only the solution's directory).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

HERE = Path(__file__).resolve().parent
_CODEC_IMPORT = "from openenv_sdk.grading._codec import "


@cache
def worker_script() -> str:
    """The source of the worker: the codec, then the worker with its codec import removed."""
    codec = (HERE / "_codec.py").read_text(encoding="utf-8")
    worker = (HERE / "_worker.py").read_text(encoding="utf-8")
    lines = worker.splitlines(keepends=True)
    imports = [i for i, line in enumerate(lines) if line.startswith(_CODEC_IMPORT)]
    if len(imports) != 1:
        raise RuntimeError(f"_worker.py must import the codec on exactly one line starting {_CODEC_IMPORT!r}")
    del lines[imports[0]]
    return codec + "\n\n# --- worker ---\n\n" + "".join(lines)

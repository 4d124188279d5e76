"""The verl adapter through verl's own rollout entry point: `AgentLoopWorker.generate_sequences` on a
batch, with the agent loop named in an agent-loop config file (as a verl run names it), verl's
default PPO config, and the tiny tool-calling model (`openenv_trainers.tiny_model`) generating
token-in, token-out in process as verl's LLM server would. The PPO trainer itself (Ray workers,
FSDP, a vLLM or SGLang server) does not run on CPU."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from omegaconf import OmegaConf
from openenv_trainers.adapters.verl import OpenEnvTool, agent_loop_config
from verl import DataProto
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
from verl.workers.rollout.replica import TokenOutput

from .conftest import ECHO_GRADER, echo_grade, health
from .scripted_chat import echo_prompt

TEXTS = ["apple river", "stone cloud"]


class TinyServer:
    """verl's LLM server client (`generate(request_id, prompt_ids, sampling_params)`), answered
    by the tiny model in process with its sampling logprobs."""

    def __init__(self, model_dir: Path) -> None:
        from openenv_trainers.generation import TransformersBackend
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
        self.backend = TransformersBackend(model, pad_token_id=self.tokenizer.pad_token_id)
        self.calls: list[list[int]] = []

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **kwargs: Any) -> TokenOutput:
        from openenv_trainers.generation import SamplingParams

        self.calls.append(list(prompt_ids))
        stop = tuple(sampling_params.get("stop_token_ids") or ()) + (self.tokenizer.eos_token_id,)
        params = SamplingParams(max_tokens=48, temperature=1.0, stop_token_ids=stop, seed=len(self.calls))
        completion = await self.backend.agenerate(prompt_ids, params)
        return TokenOutput(token_ids=completion.token_ids, log_probs=completion.logprobs, stop_reason="completed")


def verl_config(model_dir: Path, loops: Path) -> Any:
    import verl.trainer.config as configs

    config = OmegaConf.load(Path(configs.__file__).parent / "_generated_ppo_trainer.yaml")
    overrides = {
        "actor_rollout_ref": {
            "model": {"path": str(model_dir)},
            "rollout": {
                "name": "vllm",
                "prompt_length": 512,
                "response_length": 256,
                "calculate_log_probs": True,
                "multi_turn": {"enable": True, "format": "hermes", "max_assistant_turns": 3},
                "agent": {"agent_loop_config_path": str(loops), "num_workers": 1},
            },
        },
    }
    return OmegaConf.merge(config, overrides)


def said_in(response_text: str) -> str | None:
    """The message of the first `echo` call in a decoded response, as the environment got it."""
    start = response_text.find("<tool_call>")
    end = response_text.find("</tool_call>", start)
    if start < 0 or end < 0:
        return None
    try:
        call = json.loads(response_text[start + len("<tool_call>") : end])
    except ValueError:
        return None
    arguments = call.get("arguments") if isinstance(call, dict) else None
    return arguments.get("message") if isinstance(arguments, dict) and call.get("name") == "echo" else None


def test_generate_sequences_plays_episodes_graded_by_the_grader(tiny_model_dir: Path, echo_url: str, tmp_path: Path) -> None:
    loops = tmp_path / "agent_loops.yaml"
    loops.write_text(yaml.safe_dump([agent_loop_config("openenv", base_url=echo_url, grader=ECHO_GRADER)]))
    server = TinyServer(tiny_model_dir)
    worker = AgentLoopWorker(verl_config(tiny_model_dir, loops), server)
    prompts = [[{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": echo_prompt(t)}] for t in TEXTS]
    batch = DataProto.from_dict(
        non_tensors={
            "raw_prompt": np.array(prompts, dtype=object),
            "agent_name": np.array(["openenv"] * len(TEXTS), dtype=object),
            "extra_info": np.array([{"reset": {"text": t}} for t in TEXTS], dtype=object),
        },
        meta_info={"global_steps": 1, "validate": False},
    )
    out = asyncio.run(worker.generate_sequences(batch))

    tokenizer = server.tokenizer
    responses, mask, scores = out.batch["responses"], out.batch["response_mask"], out.batch["rm_scores"]
    logprobs = out.batch["rollout_log_probs"]
    for i, text in enumerate(TEXTS):
        length = int(out.batch["attention_mask"][i, -responses.shape[1] :].sum())
        decoded = tokenizer.decode(responses[i, :length].tolist())
        # The reward, at the last response token, is the grader's for what the model sent.
        assert float(scores[i].sum()) == pytest.approx(echo_grade(echo_url, text, said_in(decoded)))
        assert float(scores[i, length - 1]) == float(scores[i].sum())
        sampled = mask[i, :length].bool()
        assert sampled.any() and all(math.isfinite(float(x)) for x in logprobs[i, :length][sampled])
        if said_in(decoded) is not None:
            # The tool ran in the episode: its result, rendered by the chat template, is in the
            # response with mask 0 (environment tokens).
            assert not sampled.all()
            assert f"<tool_response>\n{said_in(decoded)}\n</tool_response>" in decoded
    # The prompt showed the model the server's tool, exactly as `/schema` lists it.
    first_prompt = tokenizer.decode(server.calls[0])
    assert '"name": "echo"' in first_prompt and "the text to echo back." in first_prompt
    assert health(echo_url)["active_sessions"] == 0


def test_a_failed_reset_is_a_failed_row_with_its_cause_and_closes_the_session(tiny_model_dir: Path, tmp_path: Path) -> None:
    from openenv_sdk import ServerConfig, create_app
    from openenv_sdk.loader import load_environment

    from .conftest import WORDLE_DIR, serve

    with serve(create_app(load_environment(WORDLE_DIR).env_cls, config=ServerConfig())) as url:
        loops = tmp_path / "agent_loops.yaml"
        loops.write_text(yaml.safe_dump([agent_loop_config("openenv", base_url=url, grader=ECHO_GRADER)]))
        worker = AgentLoopWorker(verl_config(tiny_model_dir, loops), TinyServer(tiny_model_dir))
        batch = DataProto.from_dict(
            non_tensors={
                "raw_prompt": np.array([[{"role": "user", "content": "Guess."}]], dtype=object),
                "agent_name": np.array(["openenv"], dtype=object),
                "extra_info": np.array([{"reset": {"task_id": 99999}}], dtype=object),
            },
            meta_info={"global_steps": 1},
        )
        out = asyncio.run(worker.generate_sequences(batch))  # a failure is never a reward, nor a crash of the step
        assert list(out.non_tensor_batch["openenv_failure"]) == ["reset"]  # verl spreads extra_fields into columns
        assert not out.batch["response_mask"].any()  # nothing of it is trained on
        assert health(url)["active_sessions"] == 0


def test_the_tools_are_the_servers_and_refuse_to_run_outside_the_loop(echo_url: str) -> None:
    from openenv_trainers.adapters._common import shared_source
    from openenv_trainers.adapters.verl import _server_tools

    source, _ = shared_source({"base_url": echo_url, "grader": ECHO_GRADER})
    (schema,) = _server_tools(source)
    tool = OpenEnvTool(schema)
    assert tool.name == "echo" and tool.tool_schema.function.parameters.required == ["message"]
    with pytest.raises(RuntimeError, match="runs only inside OpenEnvAgentLoop"):
        asyncio.run(tool.execute("id", {"message": "hi"}))
    # An optional argument (pydantic writes `int | None` as anyOf, with no `type`) still loads.
    optional = {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None, "description": "how many"}
    parameters = {"type": "object", "properties": {"n": optional, "word": {"type": "string"}}, "required": ["word"]}
    tool = OpenEnvTool({"type": "function", "function": {"name": "count", "description": "Count.", "parameters": parameters}})
    props = tool.tool_schema.function.parameters.properties
    assert props["n"].type == ["integer", "null"] and props["n"].description == "how many" and props["word"].type == "string"

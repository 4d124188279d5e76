"""TRL's AsyncGRPOTrainer on ONE GPU with our EnvRolloutWorker, a vLLM server and the guessing game.

    python3 scripts/gpu/async_grpo_guess.py --model-dir /tmp/smollm2 --vllm-url http://127.0.0.1:8000 --out $OUT

The vLLM server (scripts/gpu/serve-vllm.sh: VLLM_SERVER_DEV_MODE=1, --logprobs-mode processed_logprobs,
a small --gpu-memory-utilization) runs on the same GPU. This script:

1. loads SmolLM2-135M-Instruct from --model-dir, gives it the tool-calling template and runs a short
   SFT warm-up on randomly played games (format only, see openenv_trainers.guess_task); saves it;
2. serves examples/guess in a local process (EnvSource(env_dir=...), i.e. `openenv serve`);
3. trains with ISAsyncGRPOTrainer (TRL's AsyncGRPOTrainer logging the sampler-trainer mismatch per step,
   `logprob_diff/{mean,max}`, and honouring TRL's importance-sampling correction, --is-correction) with
   rollout_worker=EnvRolloutWorker(... CompletionsClient(vLLM) ..., generation paced to training unless
   --pacing off), weight_transfer=VLLMReloadWeightTransfer(...)), tree attention on SDPA (no FA3 kernel here);
4. around every --probe-every-th weight sync, samples probe completions from vLLM and compares their
   logprobs with the trainer's forward pass at every sampled (mask-1) position, before the sync
   (server one version behind) and after it (same weights);
5. with --agent NAME (e.g. pi), plays the terminal environment's tasks instead: the agent program
   (`openenv_sdk.agents.known`) runs in the environment's sandbox and every model call it makes is
   intercepted and answered by vLLM (`openenv_trainers.intercept.AgentEpisodeRunner`); no warm-up;
   run.json then also holds per-episode agent figures (model calls, the agent's own seconds);
6. writes run.json (per-step logs, throughput, sync timings, probes; `generated`, `dropped_stale` (the worker's
   and TRL's), `stale_fraction`, the pacing counters, and the per-step mismatch `logprob_diff`) to --out.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "trainers")]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
warnings.filterwarnings("ignore")


def log(*a):
    print(f"[{time.strftime('%H:%M:%S')}]", *a, flush=True)


class CountingBackend:
    """Wraps a backend; counts requests, sampled tokens and generation seconds."""

    def __init__(self, inner):
        self.inner = inner
        self.requests = 0
        self.tokens = 0

    async def agenerate(self, prompt, params):
        c = await self.inner.agenerate(prompt, params)
        self.requests += 1
        self.tokens += len(c.token_ids)
        return c

    def generate(self, prompts, params):
        return self.inner.generate(prompts, params)

    def check_server(self):
        if hasattr(self.inner, "check_server"):
            self.inner.check_server()

    async def aclose(self):
        return await self.inner.aclose()


class TimedTransfer:
    """TRL's own NCCL `WeightTransferClient`, timed per sync, with the logprob probes around each sync
    (the same `before`/`after` hooks `VLLMReloadWeightTransfer` calls)."""

    def __init__(self, inner, before, after):
        self.inner, self.before, self.after = inner, before, after
        self.timings: list[dict] = []
        self._t0 = self._send_s = 0.0

    def init_weight_transfer(self):
        t0 = time.perf_counter()
        self.inner.init_weight_transfer()
        self.timings.append({"nccl_init_s": time.perf_counter() - t0})

    def pause(self):
        self.before()
        self._t0 = time.perf_counter()
        self.inner.pause()

    def send_weights(self, iterator):
        t0 = time.perf_counter()
        self.inner.send_weights(iterator)
        self._send_s = time.perf_counter() - t0

    def resume(self):
        self.inner.resume()
        self.timings.append({"send_s": self._send_s, "total_s": time.perf_counter() - self._t0})
        self.after()

    def destroy(self):
        self.inner.destroy()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model-dir", default="/tmp/smollm2")
    p.add_argument("--vllm-url", default="http://127.0.0.1:8000")
    p.add_argument("--out", default=os.environ.get("OUT", "async-grpo-out"))
    p.add_argument("--work", default="/tmp/agrpo")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--warmup-steps", type=int, default=30)
    p.add_argument("--warmup-lr", type=float, default=5e-5)
    p.add_argument("--lr", type=float, default=2e-5)
    p.add_argument("--num-generations", type=int, default=8)
    p.add_argument("--grad-accum", type=int, default=4)
    p.add_argument("--token-budget", type=int, default=4096)
    p.add_argument("--max-staleness", type=int, default=2)
    p.add_argument("--inflight", type=int, default=64)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--probe-every", type=int, default=5)
    p.add_argument("--pacing", choices=["on", "off"], default="on",
                   help="on: the worker starts a group only if the trainer will take it before it is stale "
                        "(openenv_trainers.pacing); off: only the static limits (--inflight, buffer 512)")
    p.add_argument("--is-correction", choices=["on", "off"], default="on",
                   help="TRL's vllm_importance_sampling_correction (GRPOConfig's default: on)")
    p.add_argument("--is-mode", default="sequence_mask",
                   choices=["token_truncate", "token_mask", "sequence_truncate", "sequence_mask"])
    p.add_argument("--is-cap", type=float, default=3.0, help="vllm_importance_sampling_clip_max")
    p.add_argument("--keep-zero-variance", action="store_true",
                   help="train on groups whose rewards are all equal (zero advantages); for the CPU smoke check, "
                        "whose tiny model never solves a game")
    p.add_argument("--time-limit-s", type=float, default=0, help="stop training after this many seconds (0: off)")
    p.add_argument("--gradient-checkpointing", action="store_true",
                   help="recompute activations in the backward (TRL's default); off by default: SmolLM2-135M at "
                        "4k-token rows needs ~7 GB without it, and it cost ~40 %% of the step (docs/training.md)")
    p.add_argument("--transfer", choices=["reload", "nccl"], default="reload",
                   help="reload: one GPU shared with vLLM, weights through /dev/shm (VLLMReloadWeightTransfer); "
                        "nccl: vLLM on another GPU (serve-vllm.sh with TRANSFER=nccl), TRL's own NCCL "
                        "WeightTransferClient (see train-2gpu.sh)")
    p.add_argument("--agent", default=None,
                   help="train a third-party agent intercepted on the terminal environment's tasks instead of the "
                        "guessing game: pi, claude-code, codex, opencode (examples/agents/agents_intercepted.py's names)")
    p.add_argument("--agent-cache", default=None, help="where the agent is installed (default .cache/agents)")
    p.add_argument("--agent-max-calls", type=int, default=6, help="model calls answered per agent episode")
    p.add_argument("--agent-max-tokens", type=int, default=256, help="max tokens sampled per agent model call")
    p.add_argument("--smoke", action="store_true",
                   help="CPU wiring check without vLLM: generation by a second in-process copy of the policy, "
                        "weights copied into it at each sync")
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    t_start = time.monotonic()

    import torch
    import transformers
    import trl
    from openenv_trainers import EnvRolloutWorker, EnvSource, WorkerConfig
    from openenv_trainers.advantages import GroupFilter
    from openenv_trainers.async_grpo import ISAsyncGRPOConfig, ISAsyncGRPOTrainer
    from openenv_trainers.chat import tool_schemas, use_tool_chat_template
    from openenv_trainers.episode import EpisodeConfig
    from openenv_trainers.generation import CompletionsClient
    from openenv_trainers.generation.base import SamplingParams
    from openenv_trainers.guess_task import ENV_DIR, guess_messages, guess_rows, warmup_conversations
    from openenv_trainers.pacing import PacingConfig
    from openenv_trainers.tree_attention import use_sdpa_tree_attention
    from openenv_trainers.vllm_sync import VLLMReloadWeightTransfer
    from openenv_trainers.warmup import assistant_labels, sft_warmup
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback

    cuda = not args.smoke
    versions = {"torch": torch.__version__, "cuda": torch.version.cuda, "transformers": transformers.__version__,
                "trl": trl.__version__, "gpu": torch.cuda.get_device_name(0) if cuda else "cpu",
                "python": sys.version.split()[0]}
    try:
        import importlib.metadata as md
        versions["vllm"] = md.version("vllm")
    except Exception:
        pass
    log("versions", versions)

    # 1. the environment (local process) and its tools
    agent_runner = None
    if args.agent:
        import importlib.util

        from openenv_trainers.intercept import AgentEpisodeConfig, AgentEpisodeRunner, InterceptionServer

        spec = importlib.util.spec_from_file_location("agents_intercepted", ROOT / "examples" / "agents" / "agents_intercepted.py")
        demo = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = demo
        spec.loader.exec_module(demo)
        cache = Path(args.agent_cache) if args.agent_cache else demo.DEFAULT_CACHE
        agent_spec = demo._cached(demo.AGENTS[args.agent].spec, cache)
        interception = InterceptionServer(request_timeout_s=300.0).start()
        agent_runner = AgentEpisodeRunner(interception, AgentEpisodeConfig(
            agent=agent_spec, max_model_calls=args.agent_max_calls, agent_timeout_s=120.0,
            sampling=SamplingParams(max_tokens=args.agent_max_tokens, temperature=args.temperature)))
        args.warmup_steps = 0  # the guessing game's format warm-up means nothing to the agent's tools
    source = EnvSource(env_dir=demo.TERMINAL_DIR if args.agent else ENV_DIR)
    source.start()
    tools = tool_schemas(source.tools())
    log("environment up:", source, [t["function"]["name"] for t in tools])

    # 2. tokenizer + SFT warm-up (format only), saved as the initial policy
    tokenizer = AutoTokenizer.from_pretrained(args.model_dir)
    # The folder gguf2hf.py writes with transformers 5.17 names <|im_start|> (1) as eos; ChatML turns end
    # with <|im_end|> (2), which is also what vLLM stops on (the model's generation_config).
    if "<|im_end|>" in tokenizer.get_vocab() and tokenizer.eos_token != "<|im_end|>":
        log(f"eos was {tokenizer.eos_token!r} ({tokenizer.eos_token_id}); set to '<|im_end|>'")
        tokenizer.eos_token = "<|im_end|>"
    tokenizer = use_tool_chat_template(tokenizer)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    init_dir = work / "policy-init"
    model = AutoModelForCausalLM.from_pretrained(args.model_dir, dtype=torch.float32, attn_implementation="eager")
    model = model.cuda() if cuda else model
    examples = [assistant_labels(tokenizer, conv, tools=tools) for conv in warmup_conversations(64)]
    t = time.monotonic()
    losses = sft_warmup(model, tokenizer, examples, steps=args.warmup_steps, lr=args.warmup_lr, batch_size=8) if args.warmup_steps else []
    warmup_s = time.monotonic() - t
    log(f"warm-up: {len(losses)} SFT steps in {warmup_s:.1f} s, loss {losses[0] if losses else 0:.3f} -> {losses[-1] if losses else 0:.3f}")
    model.config.use_cache = True
    model.save_pretrained(init_dir)
    tokenizer.save_pretrained(init_dir)
    del model
    if cuda:
        torch.cuda.empty_cache()

    # 3. worker, weight transfer, trainer
    if cuda:
        backend = CountingBackend(CompletionsClient(args.vllm_url, timeout_s=300))
    else:
        from openenv_trainers import TransformersBackend

        gen_model = AutoModelForCausalLM.from_pretrained(init_dir, dtype=torch.float32).eval()
        backend = CountingBackend(TransformersBackend(gen_model, pad_token_id=tokenizer.pad_token_id))
    if args.agent:
        task_ids = sorted(d.name for d in (demo.TERMINAL_DIR / "hidden").iterdir() if d.is_dir())
        rows = [{"prompt": [{"role": "user", "content": f"terminal task {t}"}], "task_id": t} for t in task_ids]
        log(f"agent {args.agent}: {len(task_ids)} terminal tasks")
    else:
        rows = guess_rows(4096, seed=0)
    worker = EnvRolloutWorker(
        sources=source, backend=backend, tokenizer=tokenizer, tasks=rows,
        config=WorkerConfig(
            num_generations=args.num_generations, max_inflight_episodes=args.inflight, buffer_size=512,
            max_staleness=args.max_staleness,
            episode=EpisodeConfig(sampling=SamplingParams(max_tokens=48, temperature=args.temperature),
                                  max_turns=7, max_completion_tokens=640),
            episode_timeout_s=120,
            pacing=PacingConfig(enabled=args.pacing == "on"),
            group_filter=GroupFilter(drop_zero_variance=not args.keep_zero_variance),
        ),
        episode_runner=agent_runner,
    )
    totals = {"episodes": 0, "env_s": 0.0, "episode_s": 0.0, "generation_s": 0.0, "reward_sum": 0.0}
    episode_log: list[dict] = []
    push = worker._push_episode_metrics

    def push_and_count(episodes):
        for e in episodes:
            totals["episodes"] += 1
            totals["env_s"] += e.env_latency_s
            totals["episode_s"] += e.duration_s
            totals["generation_s"] += e.generation_s
            totals["reward_sum"] += e.reward
            rec = {"t": time.monotonic() - t_train0[0] if t_train0 else 0.0, "reward": e.reward,
                   "turns": e.turns, "tool_calls": e.tool_calls, "solved": e.reward_components.get("solved", math.nan),
                   "duration_s": e.duration_s, "generation_s": e.generation_s}
            run = getattr(e, "agent_run", None)
            if run is not None:  # an intercepted agent's episode: what the agent program itself cost
                rec.update(agent=run.agent, agent_exit=run.exit_code, agent_s=run.duration_s,
                           model_calls=e.model_calls, refused_calls=e.refused_calls, rows=len(e.rows()))
            episode_log.append(rec)
        return push(episodes)

    worker._push_episode_metrics = push_and_count
    t_train0: list[float] = []

    probes: list[dict] = []
    probe_prompt = tokenizer.apply_chat_template(guess_messages(), tools=tools, add_generation_prompt=True,
                                                 tokenize=True, return_dict=False)
    holder: dict = {}
    sync_count = [0]

    pending: dict = {}

    def trainer_logprobs(seqs: list[list[int]], start: int) -> list:
        """The trainer's logprob of every token after `start` of each sequence (its own forward pass)."""
        m = trainer_model()
        dev = next(m.parameters()).device
        out = []
        autocast = torch.autocast("cuda", dtype=torch.bfloat16) if cuda else torch.autocast("cpu", enabled=False)
        with torch.no_grad(), autocast:
            for ids in seqs:
                n = len(ids)
                o = m(input_ids=torch.tensor([ids], device=dev), position_ids=torch.arange(n, device=dev)[None],
                      shift_labels=torch.tensor([ids[1:] + [-100]], device=dev), fused_lm_head=True,
                      tree_kv_index=torch.arange(n, device=dev),
                      tree_cu_seqlens_q=torch.tensor([0, n], dtype=torch.int32, device=dev),
                      tree_cu_seqlens_k=torch.tensor([0, n], dtype=torch.int32, device=dev),
                      tree_max_seqlen_q=n, tree_max_seqlen_k=n)
                out.append(o.log_probs.flatten().float()[start - 1 : n - 1].cpu())
        return out

    def trainer_model():
        trainer = holder["trainer"]
        return trainer.accelerator.unwrap_model(trainer.model)

    def vllm_scores(seqs: list[list[int]], start: int) -> list:
        """vLLM's logprob of the same tokens (prompt_logprobs of the whole sequence, temperature 1)."""
        import httpx

        out = []
        for ids in seqs:
            body = {"model": "smollm2", "prompt": ids, "max_tokens": 1, "temperature": 1.0, "prompt_logprobs": 1}
            choice = httpx.post(args.vllm_url + "/v1/completions", json=body, timeout=60).json()["choices"][0]
            plp = choice["prompt_logprobs"]
            out.append(torch.tensor([plp[i][str(ids[i])]["logprob"] for i in range(start, len(ids))]))
        return out

    def due() -> bool:
        n = sync_count[0]
        return "trainer" in holder and (n == 0 or n % args.probe_every == 0)

    def before():
        """vLLM still has the old weights: sample probe games' first turns; the trainer has the new ones."""
        if not due():
            return
        t0 = time.perf_counter()
        params = SamplingParams(max_tokens=48, temperature=args.temperature, stop_token_ids=(tokenizer.eos_token_id,))
        comps = backend.inner.generate([probe_prompt] * 8, params)
        seqs = [list(probe_prompt) + list(c.token_ids) for c in comps]
        old = [torch.tensor(c.logprobs) for c in comps]
        pending.update(seqs=seqs, old=old, mine=trainer_logprobs(seqs, len(probe_prompt)), t=time.perf_counter() - t0)

    def after():
        """The same tokens again, now that vLLM has the trainer's weights."""
        if pending:
            t0 = time.perf_counter()
            seqs, old, mine = pending.pop("seqs"), pending.pop("old"), pending.pop("mine")
            d_before = torch.cat([(a - b).abs() for a, b in zip(mine, old)])
            rec = {"sync": sync_count[0], "model_version": holder["trainer"].model_version, "tokens": int(d_before.numel()),
                   "before_mean": float(d_before.mean()), "before_max": float(d_before.max())}
            try:
                new = vllm_scores(seqs, len(probe_prompt)) if cuda else None
            except Exception as e:
                rec["after_error"] = repr(e)
                new = None
            if new is not None:
                d_after = torch.cat([(a - b).abs() for a, b in zip(mine, new)])
                d_change = torch.cat([(a - b).abs() for a, b in zip(old, new)])
                rec.update(after_mean=float(d_after.mean()), after_max=float(d_after.max()),
                           vllm_change_mean=float(d_change.mean()), vllm_change_max=float(d_change.max()))
            rec["seconds"] = pending.pop("t") + time.perf_counter() - t0
            probes.append(rec)
            log("logprob probe", rec)
        sync_count[0] += 1

    if cuda and args.transfer == "nccl":
        transfer = None  # TRL builds its NCCL WeightTransferClient; wrapped below once the trainer exists
    elif cuda:
        transfer = VLLMReloadWeightTransfer(args.vllm_url, folder="/dev/shm/openenv-policy", dtype="bfloat16",
                                            before_sync=before, after_sync=after)
    else:
        class InProcessTransfer:  # the smoke test's stand-in: copy the weights into the generating copy
            timings: list = []

            def init_weight_transfer(self):
                pass

            def pause(self):
                before()

            def send_weights(self, iterator):
                t0 = time.perf_counter()
                params = dict(gen_model.named_parameters())
                with torch.no_grad():
                    for name, tensor in iterator:
                        params[name].copy_(tensor)
                self.timings.append({"copy_s": time.perf_counter() - t0})

            def resume(self):
                after()

            def destroy(self):
                pass

        transfer = InProcessTransfer()

    step_log: list[dict] = []

    class Recorder(TrainerCallback):
        def __init__(self):
            self.t_last = None

        def on_train_begin(self, a, state, control, **kw):
            t_train0.append(time.monotonic())

        def on_step_end(self, a, state, control, **kw):
            now = time.monotonic()
            rec = {"step": state.global_step, "t": now - t_train0[0], "episodes": totals["episodes"],
                   "sampled_tokens": backend.tokens, "env_s": totals["env_s"], "episode_s": totals["episode_s"]}
            step_log.append(rec)
            if args.time_limit_s and now - t_train0[0] > args.time_limit_s:
                control.should_training_stop = True

        def on_log(self, a, state, control, logs=None, **kw):
            if logs:
                step_log.append({"step": state.global_step, "logs": {k: v for k, v in logs.items() if isinstance(v, (int, float))}})
                keys = ["reward", "worker/reward_mean", "perf/weight_sync_s", "kl", "ratio", "logprob_diff/mean",
                        "logprob_diff/max", "worker/stale_fraction", "perf/rollout_wait_s"]
                log(f"step {state.global_step}", {k: round(logs[k], 4) for k in keys if k in logs})

    use_sdpa_tree_attention()
    if not cuda:  # TRL reads the GPU's peak FLOP/s for its MFU metric; the CPU smoke check has none
        import trl.experimental.async_grpo.async_grpo_trainer as agt

        agt.get_peak_flops_per_device = lambda *a, **k: 1e12
    config = ISAsyncGRPOConfig(
        output_dir=str(work / "trainer"), max_steps=args.steps, learning_rate=args.lr,
        per_device_train_batch_size=8, gradient_accumulation_steps=args.grad_accum, token_budget=args.token_budget,
        num_generations=args.num_generations, max_completion_length=640, temperature=args.temperature,
        max_staleness=args.max_staleness, vllm_server_base_url=args.vllm_url, logging_steps=1, report_to=[],
        save_strategy="no", bf16=cuda, use_cpu=not cuda, dtype="float32", heartbeat_stale_after_s=300, lr_scheduler_type="constant",
        vllm_importance_sampling_correction=args.is_correction == "on", vllm_importance_sampling_mode=args.is_mode,
        vllm_importance_sampling_clip_max=args.is_cap, gradient_checkpointing=args.gradient_checkpointing,
    )
    from datasets import Dataset

    # The worker draws its own tasks (`rows`); TRL wants a dataset anyway (it only sizes epochs with it,
    # and max_steps > 0 turns that off), so it gets a placeholder.
    placeholder = Dataset.from_dict({"prompt": [guess_messages()] * 8})
    trainer = ISAsyncGRPOTrainer(model=str(init_dir), args=config, train_dataset=placeholder, processing_class=tokenizer,
                               rollout_worker=worker, weight_transfer=transfer, callbacks=[Recorder()])
    if transfer is None:
        transfer = TimedTransfer(trainer.weight_transfer, before, after)
        trainer.weight_transfer = transfer
    use_sdpa_tree_attention()
    holder["trainer"] = trainer
    log(f"trainer built ({time.monotonic() - t_start:.0f} s since start); attention:",
        trainer.model.config._attn_implementation)
    t = time.monotonic()
    error = None
    try:
        trainer.train()
    except Exception as e:
        import traceback
        traceback.print_exc()
        error = repr(e)
    train_s = time.monotonic() - t
    worker_counters = dict(worker.counters)
    pacing = worker.pacing.metrics()
    try:
        worker.stop()
    except Exception:
        pass
    logged = [s["logs"] for s in step_log if "logs" in s]
    trainer_dropped = sum(lg.get("sample/dropped_stale_total", 0.0) or 0.0 for lg in logged)
    dropped_stale = worker_counters["dropped_stale"] + trainer_dropped
    mismatch = [{"step": s["step"], "mean": s["logs"]["logprob_diff/mean"], "max": s["logs"].get("logprob_diff/max"),
                 "is_ratio_mean": s["logs"].get("sampling/importance_sampling_ratio/mean"),
                 "is_masked_frac": s["logs"].get("sampling/is_masked_frac"),
                 "staleness_mean": s["logs"].get("sample/staleness_mean")}
                for s in step_log if "logs" in s and "logprob_diff/mean" in s["logs"]]
    agent_eps = [e for e in episode_log if "agent_s" in e]
    agent_summary = None
    if agent_eps:
        episode_s = sum(e["duration_s"] for e in agent_eps)
        agent_s = sum(e["agent_s"] for e in agent_eps)
        generation_s = sum(e["generation_s"] for e in agent_eps)
        agent_summary = {
            "episodes": len(agent_eps), "episodes_per_s": len(agent_eps) / train_s if train_s else None,
            "model_calls": sum(e["model_calls"] for e in agent_eps), "refused_calls": sum(e["refused_calls"] for e in agent_eps),
            "agent_exit_nonzero": sum(1 for e in agent_eps if e["agent_exit"] != 0),
            "episode_s": episode_s, "agent_s": agent_s, "generation_s": generation_s,
            # the agent program's own time: its run minus the time it waited for the policy's answers
            "agent_own_share": (agent_s - generation_s) / episode_s if episode_s else None,
            "generation_share": generation_s / episode_s if episode_s else None,
            "accounting_errors": 0 if error is None or "Accounting" not in error else 1,
        }
    result = {
        "agent": agent_summary,
        "generated": worker_counters["generated"], "dropped_stale": dropped_stale,
        "dropped_stale_worker": worker_counters["dropped_stale"], "dropped_stale_trainer": trainer_dropped,
        "stale_fraction": dropped_stale / worker_counters["generated"] if worker_counters["generated"] else None,
        "admitted_groups": worker_counters["admitted"], "paused_s": pacing["worker/paused_s"], "pacing": pacing,
        "trainer_wait_s": sum(lg.get("perf/rollout_wait_s", 0.0) or 0.0 for lg in logged),
        "logprob_diff": mismatch,
        "logprob_diff_mean": (sum(m["mean"] for m in mismatch) / len(mismatch)) if mismatch else None,
        "logprob_diff_max": max((m["max"] for m in mismatch if m["max"] is not None), default=None),
        "versions": versions, "args": vars(args), "error": error, "train_s": train_s, "warmup_s": warmup_s,
        "warmup_losses": losses, "totals": totals, "sampled_tokens": backend.tokens, "requests": backend.requests,
        "worker_counters": worker_counters, "sync_timings": transfer.timings, "probes": probes, "steps": step_log,
        "episodes": episode_log, "gpu_mem_peak_trainer_gb": torch.cuda.max_memory_allocated() / 2**30 if cuda else 0.0,
    }
    (out / "run.json").write_text(json.dumps(result, indent=1, default=str))
    log("done; train_s", round(train_s, 1), "episodes", totals["episodes"], "sampled tokens", backend.tokens,
        "generated", result["generated"], "dropped_stale", dropped_stale, "stale_fraction", result["stale_fraction"],
        "logprob_diff mean/max", result["logprob_diff_mean"], result["logprob_diff_max"], "error", error)
    if agent_summary:
        log("agent", agent_summary)
    os._exit(0)


if __name__ == "__main__":
    main()

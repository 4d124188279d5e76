"""The SDPA tree attention (FlashAttention-3's stand-in for AsyncGRPOTrainer) against plain causal attention."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from openenv_trainers.tree_attention import sdpa_tree_attention, tree_mask


def _packing():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from trl.experimental.async_grpo.packing import TreeRow
    return TreeRow


def _samples(rng: np.random.Generator) -> list[dict]:
    prompt = rng.integers(0, 50, 7).tolist()
    out = []
    for g in range(2):  # two groups: shared prompts, branching completions, one shared mid-conversation
        p = prompt if g == 0 else rng.integers(0, 50, 5).tolist()
        shared = rng.integers(0, 50, 3).tolist()
        for _ in range(3):
            ids = p + shared + rng.integers(0, 50, int(rng.integers(1, 6))).tolist()
            mask = [0] * len(p) + [1] * (len(ids) - len(p))
            out.append({
                "input_ids": np.array(ids), "completion_mask": np.array(mask),
                "old_log_probs": np.zeros(len(ids), dtype=np.float32), "advantage": 0.0, "group_id": g,
            })
    return out


def test_tree_attention_equals_causal_attention_per_sample() -> None:
    TreeRow = _packing()
    rng = np.random.default_rng(0)
    samples = _samples(rng)
    row = TreeRow()
    for s in samples:
        row.add(s)
    packed = row.pack()
    n = len(packed["input_ids"])
    assert n < sum(len(s["input_ids"]) for s in samples)  # something is shared
    heads, kv_heads, dim = 4, 2, 8
    # per-token q/k/v depend only on the token and its position, as in a real first layer
    table = torch.randn(50, 64, 3, heads, dim, generator=torch.Generator().manual_seed(1), dtype=torch.float64)

    def qkv(ids: list[int], pos: list[int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        x = table[torch.tensor(ids), torch.tensor(pos)]  # (N, 3, H, D)
        q = x[:, 0].permute(1, 0, 2).unsqueeze(0)
        k = x[:, 1, :kv_heads].permute(1, 0, 2).unsqueeze(0)
        v = x[:, 2, :kv_heads].permute(1, 0, 2).unsqueeze(0)
        return q, k, v

    q, k, v = qkv(packed["input_ids"].tolist(), packed["position_ids"].tolist())
    out, _ = sdpa_tree_attention(
        None, q, k, v, None, tree_kv_index=packed["tree_kv_index"], tree_cu_seqlens_q=packed["tree_cu_seqlens_q"],
        tree_cu_seqlens_k=packed["tree_cu_seqlens_k"], scaling=dim**-0.5,
    )
    assert out.shape == (1, n, heads, dim)
    for s, nodes in zip(row.samples, row.sample_nodes, strict=True):
        ids = s["input_ids"].tolist()
        sq, sk, sv = qkv(ids, list(range(len(ids))))
        ref = F.scaled_dot_product_attention(sq, sk, sv, is_causal=True, scale=dim**-0.5, enable_gqa=True)
        ref = ref.transpose(1, 2)[0]
        pos = [row_pos for row_pos in (_packed_positions(row)[node] for node in nodes)]
        torch.testing.assert_close(out[0, pos], ref, rtol=1e-10, atol=1e-10)


def _packed_positions(row) -> dict[int, int]:
    """Trie node -> packed position, by replaying pack()'s DFS order on the tokens."""
    order, stack = [], list(reversed(row.roots.values()))
    while stack:
        node = stack.pop()
        order.append(node)
        stack.extend(reversed(row.children[node].values()))
    return {node: i for i, node in enumerate(order)}


def test_tree_mask_refuses_a_path_that_does_not_end_with_its_segment() -> None:
    with pytest.raises(ValueError, match="does not end with the segment"):
        tree_mask(3, [0, 2, 1], [0, 3], [0, 3])

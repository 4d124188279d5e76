"""Tree attention for TRL's `AsyncGRPOTrainer` without FlashAttention-3, on PyTorch's SDPA.

`AsyncGRPOTrainer` packs each micro-batch into a prefix trie (`trl.experimental.async_grpo.packing`)
and runs the model with the attention implementation `"tree_fa3"`: each segment of the trie attends
to the K/V of its root-to-segment path, through `flash_attn_varlen_func` of the FlashAttention-3
kernel that it downloads from the Hugging Face hub (`kernels.get_kernel("kernels-community/flash-attn3")`).
Where the hub cannot be reached (the GPU machines here have no network) and no FA3 build with a
backward pass can be installed (vLLM's bundled FA3 is forward-only), `use_sdpa_tree_attention()`
puts this implementation in its place: the same visibility rule written as one boolean mask over
the packed tokens and one `torch.nn.functional.scaled_dot_product_attention` call per layer.

Visibility (FlashAttention's varlen `causal=True`, aligned bottom-right): a query at offset `t` of a
segment whose K/V path has `Lk` entries, `Lq` of them the segment itself, sees the first
`Lk - Lq + t + 1` entries of its path: every ancestor segment, then its own segment up to itself.

It is exact, but dense: the mask is `N x N` for `N` unique packed tokens, so memory grows with the
square of the micro-batch's unique tokens (keep `token_budget` to a few thousand tokens). The mask
is built once per packed row, on the device of the packing's tensors (the GPU in training), with
tensor operations only (no Python loop over segments), and cached for every layer of the forward
and for the recomputation of a checkpointed backward: the cache is keyed on the packing tensors
themselves (identity, data pointer and version, so an in-place change is a miss), which TRL's
`compute_loss` makes once per micro-batch and hands unchanged to every layer.

Padding to a bucket. Every packed row has its own length, and on a GPU `scaled_dot_product_attention`
with a mask runs cuDNN's fused attention, which builds (and runtime-compiles) an execution plan per
new shape: about 75 ms each for the forward and the backward of SmolLM2-135M's rows, so a plan per
row cost half the step on an H100 (issue 23). The attention therefore runs on the row padded to a
multiple of `pad_multiple` tokens (256 by default; a 4,096-token budget gives at most 16 shapes in
a whole run): the padded keys are hidden from every real query, each padded query sees only
itself (so no row is all masked), and the padded outputs are dropped. Only the attention is
padded, not the rest of the model.
"""

from __future__ import annotations

from typing import Any

__all__ = ["mask_builds", "padded_length", "padded_tree_mask", "sdpa_tree_attention", "tree_mask", "use_sdpa_tree_attention"]

_cache: dict[str, Any] = {"key": None, "refs": None, "mask": None}
_builds = [0]
_settings = {"pad_multiple": 256}


def mask_builds() -> int:
    """How many tree masks this process has built (a cache miss builds one): for tests and benchmarks."""
    return _builds[0]


def tree_mask(n: int, kv_index: Any, cu_q: Any, cu_k: Any) -> Any:
    """The `n x n` boolean mask (True = may attend) of a packed trie, on `kv_index`'s device.

    Args:
        n: the packed (query) tokens.
        kv_index: the packed position of each K/V path entry, the segments' paths end to end (`K`).
        cu_q: segment boundaries in the packed row (`S + 1`).
        cu_k: path boundaries in `kv_index` (`S + 1`).
        All three are tensors or lists of ints.

    Each path entry `j` of segment `s` (offset `r` in its path) is one column `kv_index[j]` seen by
    a contiguous range of the segment's query rows: all of them for an ancestor entry, those at or
    after it for the segment's own. The ranges go in as +1/-1 at their ends and a cumulative sum
    down the rows fills them in: a few kernel launches, whatever the number of segments.

    Raises:
        ValueError: the boundaries are inconsistent, or a segment's K/V path does not end with the
            segment itself.
    """
    import torch

    kv = torch.as_tensor(kv_index, dtype=torch.long)
    device = kv.device
    cq = torch.as_tensor(cu_q, dtype=torch.long, device=device)
    ck = torch.as_tensor(cu_k, dtype=torch.long, device=device)
    if cq.ndim != 1 or ck.shape != cq.shape or cq.numel() < 2 or kv.ndim != 1:
        raise ValueError(f"cu_seqlens_q {tuple(cq.shape)} and cu_seqlens_k {tuple(ck.shape)} must be equal 1-D boundaries")
    lq, lk = cq.diff(), ck.diff()
    own = lk - lq  # where each segment's own entries start in its path
    j = torch.arange(kv.numel(), device=device)
    seg = torch.searchsorted(ck[1:], j, right=True).clamp(max=lq.numel() - 1)  # the segment whose path holds entry j
    t = j - ck[seg] - own[seg]  # >= 0: entry j is the segment's own token t
    live = lq[seg] > 0  # a segment without queries sees nothing (and is not checked)
    mine = live & (t >= 0)
    false = torch.zeros((), dtype=torch.bool, device=device)
    bad_bounds, bad_index, bad_path = torch.stack([
        (lq < 0).any() | (lk < 0).any() | (cq[0] != 0) | (cq[-1] > n) | (ck[0] != 0) | (ck[-1] != kv.numel()),
        ((kv < 0) | (kv >= n)).any() if kv.numel() else false,
        ((own < 0) & (lq > 0)).any() | (mine & (kv != cq[seg] + t)).any(),
    ]).tolist()  # the one device sync of a build
    if bad_bounds:
        raise ValueError(f"inconsistent tree boundaries for {n} tokens and {kv.numel()} K/V entries")
    if bad_index:
        raise ValueError(f"a K/V index lies outside the {n} packed tokens")
    if bad_path:
        raise ValueError("a segment's K/V path does not end with the segment itself")
    # Entry j is column kv[j] for the query rows [first, last) of its segment.
    first = torch.where(live, cq[seg] + t.clamp(min=0), cq[seg + 1])
    last = cq[seg + 1]
    ones = torch.ones_like(kv, dtype=torch.int32)
    counts = torch.zeros((n + 1, n), dtype=torch.int32, device=device)
    counts.index_put_((first, kv), ones, accumulate=True)
    counts.index_put_((last, kv), -ones, accumulate=True)
    _builds[0] += 1
    return counts[:n].cumsum(0, dtype=torch.int32) > 0


def padded_length(n: int, multiple: int) -> int:
    """`n` rounded up to a multiple of `multiple` (1 or less: `n`)."""
    return n if multiple <= 1 else -(-n // multiple) * multiple


def padded_tree_mask(n: int, kv_index: Any, cu_q: Any, cu_k: Any, *, padded: int) -> Any:
    """`tree_mask` grown to `padded x padded`: no real query sees a padded key, and each padded
    query sees only itself (a row with nothing to see would make the attention NaN)."""
    import torch

    mask = tree_mask(n, kv_index, cu_q, cu_k)
    if padded <= n:
        return mask
    full = torch.zeros((padded, padded), dtype=torch.bool, device=mask.device)
    full[:n, :n] = mask
    extra = torch.arange(n, padded, device=mask.device)
    full[extra, extra] = True
    return full


def _cached_mask(n: int, kv_index: Any, cu_q: Any, cu_k: Any, device: Any, padded: int) -> Any:
    """The tree mask of the packing, `padded x padded`, built once per packing."""
    refs = (kv_index, cu_q, cu_k)
    key = tuple((id(x), x.data_ptr(), x._version, x.numel()) for x in refs) + (n, padded, str(device))
    if _cache["key"] != key:
        if kv_index.device != device:  # packing handed over on the CPU: build where the attention runs
            kv_index, cu_q, cu_k = (x.to(device, non_blocking=True) for x in refs)
        mask = padded_tree_mask(n, kv_index, cu_q, cu_k, padded=padded)
        # The references keep the keyed tensors alive, so their ids cannot be reused by new ones.
        _cache["key"], _cache["refs"], _cache["mask"] = key, refs, mask
    return _cache["mask"]


def sdpa_tree_attention(
    module: Any,
    query: Any,
    key: Any,
    value: Any,
    attention_mask: Any,
    *,
    tree_kv_index: Any,
    tree_cu_seqlens_q: Any,
    tree_cu_seqlens_k: Any,
    tree_max_seqlen_q: int | None = None,
    tree_max_seqlen_k: int | None = None,
    scaling: float | None = None,
    sliding_window: int | None = None,
    softcap: float | None = None,
    **kwargs: Any,
) -> tuple[Any, None]:
    """A drop-in for `trl.experimental.async_grpo.packing.tree_attention` (same arguments and output)."""
    import torch
    import torch.nn.functional as F

    if sliding_window or softcap:
        raise NotImplementedError("sdpa_tree_attention supports neither sliding windows nor softcapping")
    if query.shape[0] != 1:
        raise ValueError(f"tree attention takes one packed row (batch 1), got a batch of {query.shape[0]}")
    n = query.shape[2]
    padded = padded_length(n, _settings["pad_multiple"])
    kv_index, cu_q, cu_k = (x if isinstance(x, torch.Tensor) else torch.tensor(x) for x in (tree_kv_index, tree_cu_seqlens_q, tree_cu_seqlens_k))
    mask = _cached_mask(n, kv_index, cu_q, cu_k, device=query.device, padded=padded)
    key, value = key.to(query.dtype), value.to(query.dtype)
    if key.shape[1] != query.shape[1]:  # grouped-query attention: repeat K/V (SDPA's GQA flag rules out its fused kernels)
        repeat = query.shape[1] // key.shape[1]
        key, value = key.repeat_interleave(repeat, dim=1), value.repeat_interleave(repeat, dim=1)
    if padded > n:
        query, key, value = (F.pad(x, (0, 0, 0, padded - n)) for x in (query, key, value))
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=scaling)
    return out[:, :, :n].transpose(1, 2).contiguous(), None


def use_sdpa_tree_attention(*, pad_multiple: int = 256) -> None:
    """Make TRL's `"tree_fa3"` attention this SDPA implementation (before or after the trainer is built).

    Args:
        pad_multiple: the attention runs on rows padded to a multiple of this many tokens, so that
            the GPU kernels' per-shape plans are reused (see the module docstring); 1 pads nothing.
    """
    if pad_multiple < 1:
        raise ValueError(f"pad_multiple must be at least 1, got {pad_multiple}")
    _settings["pad_multiple"] = pad_multiple
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface
    from trl.experimental.async_grpo import packing

    packing.tree_attention = sdpa_tree_attention  # what register_tree_attention() registers
    AttentionInterface.register(packing.TREE_ATTENTION, sdpa_tree_attention)
    AttentionMaskInterface.register(packing.TREE_ATTENTION, lambda **kwargs: None)

"""The tensor-parallel attention block and its KV cache (see the package docstring and docs/layers.md).

Heads are split over the ranks: rank r computes query heads ``[r * Hq/W, (r + 1) * Hq/W)`` and KV heads
``[r * Hkv/W, (r + 1) * Hkv/W)`` (grouped-query attention: query head h reads KV head ``h // (Hq / Hkv)``, so a
rank's query heads read only its own KV heads). Prefill is sequence-parallel (``ag_gemm`` for QKV, ``gemm_rs`` for
O); decode takes the replicated hidden state of the new tokens and reduces O with ``gemm_ar`` (or leaves the partial
sum to the caller's fused all-reduce + residual + RMSNorm: ``decode_partial``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional
from torch.nn.attention import SDPBackend, sdpa_kernel

from triton_dist import runtime as rt
from triton_dist.layers._kernels import fused_kernels, gather_rope, rope_rows, rope_scatter
from triton_dist.layers.linear import (
    ColumnParallelLinear,
    LayerError,
    RowParallelLinear,
    check_weight,
    shard_of,
    world_position,
)
from triton_dist.ops import all_gather, all_reduce, flash_decode, gemm_ar, skinny_matmul

KV_LAYOUTS = ("heads", "sequence")
"""How a KV cache is split over the ranks: by KV heads (each rank holds its own heads at every position) or by
sequence (each rank holds every KV head at its block of positions; decode attention is ``ops.flash_decode``)."""
DECODE_GATHERS = ("all_reduce", "all_gather", "fused")
"""How the sequence-split decode gathers every rank's new q, k, v (``TensorParallelAttention.decode_gather``)."""
DECODE_SDPA_BACKENDS = {
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "flash": SDPBackend.FLASH_ATTENTION,
    "math": SDPBackend.MATH,
}
"""The SDPA backends the head-split decode may be pinned to (``TensorParallelAttention.decode_sdpa_backend``), by
name."""
FLASH_DECODE_HEAD_DIM = 128
"""The head dim ``ops.flash_decode`` takes (the sequence-split cache needs it)."""
PREFILL_ROPE_KEPT = 4
"""How many prefill RoPE tables (one per sequence length, head dim, rope theta, dtype and device) are kept for
reuse (``TensorParallelAttention.prefill_rope``); 8 MiB each at 8k tokens and head dim 128."""
_prefill_rope: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}
"""The kept prefill RoPE tables, least recently used first."""


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None, eps: float) -> torch.Tensor:
    """``x * rsqrt(mean(x^2, -1) + eps) * weight`` over the last dim: torch's RMSNorm
    (``functional.rms_norm``), in x's dtype."""
    return functional.rms_norm(x, (x.shape[-1],), weight, eps)


def k_major_weight(
    kept: dict[str, tuple[tuple[int, int], torch.Tensor]], name: str, weight: torch.Tensor
) -> torch.Tensor:
    """``weight`` [K, N] as a view of a copy stored [N, K] (K contiguous, nn.Linear's layout: cuBLAS runs
    ``x @ view`` as its "TN" GEMM instead of "NN"), the values the same; for the decode options
    ``decode_k_major``. The copy is made on the first call (eagerly, before any CUDA-graph capture of the step) and
    kept in ``kept[name]``, made again when ``weight`` moved or was changed in place (its address or its
    ``_version``; an inference tensor's in-place changes are not seen); it doubles the memory of every weight it is
    made for."""
    key = (weight.data_ptr(), 0 if weight.is_inference() else weight._version)  # inference tensors have none
    entry = kept.get(name)
    if entry is None or entry[0] != key:
        entry = kept[name] = (key, weight.detach().t().contiguous())
    return entry[1].t()


SKINNY_MAX_ROWS = 64
"""The most rows ``ops.skinny_matmul`` takes (``decode_product`` gives larger batches to cuBLAS)."""


def decode_product(
    x: torch.Tensor, weight: torch.Tensor, skinny: bool, out: torch.Tensor | None = None
) -> torch.Tensor:
    """``x @ weight`` for a decode GEMM (into ``out`` when given): with ``skinny`` (the decode option
    ``decode_triton_gemm``) by ``ops.matmul.skinny_matmul`` wherever it takes the call (at most 64 rows, on a GPU or
    under the emulation, ``weight`` row-major), else by ``torch.matmul`` (cuBLAS)."""
    if skinny and x.shape[0] <= SKINNY_MAX_ROWS and fused_kernels(x) and weight.stride(1) == 1:
        return skinny_matmul(x, weight, out=out)
    return torch.matmul(x, weight) if out is None else torch.matmul(x, weight, out=out)


def rope_inv_freq(head_dim: int, theta: float, device: torch.device | str | None = None) -> torch.Tensor:
    """fp32 [head_dim/2]: the rotary frequencies ``theta^(-2i/head_dim)``."""
    return 1.0 / theta ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim)


def rope_cos_sin(positions: torch.Tensor, inv_freq: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """fp32 ``(cos, sin)`` of shape ``positions.shape + [head_dim]`` for the rotary embedding (the half-split
    convention of Llama and Qwen: dims ``i`` and ``i + head_dim/2`` rotate together at frequency ``inv_freq[i]``)."""
    freqs = positions.float().unsqueeze(-1) * inv_freq
    angles = torch.cat([freqs, freqs], dim=-1)
    return angles.cos(), angles.sin()


def rope_signed_frequencies(inv_freq: torch.Tensor) -> torch.Tensor:
    """fp32 [head_dim]: ``cat([-inv_freq, inv_freq])``, what ``rope_tables`` multiplies the positions by (cos is
    even and sin odd, so one product gives both tables, the first half of sin negated)."""
    return torch.cat([-inv_freq, inv_freq])


def rope_tables(
    positions: torch.Tensor, inv_freq: torch.Tensor, signed_freq: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(cos, signed_sin)`` for ``rotate``: ``rope_cos_sin`` with the first half of sin negated (computed once per
    forward pass and shared by every layer). Three launches given ``signed_freq`` (``rope_signed_frequencies`` of
    ``inv_freq``, which a module keeps): the angles ``positions * signed_freq`` (integer positions promote to
    fp32, as ``positions.float()``), their cosine and their sine."""
    angles = positions.unsqueeze(-1) * (rope_signed_frequencies(inv_freq) if signed_freq is None else signed_freq)
    return angles.cos(), angles.sin()


def rotate(
    x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor, out: torch.Tensor | None = None
) -> torch.Tensor:
    """The rotary embedding of ``x`` [..., heads, head_dim] with ``rope_tables`` [..., head_dim] (broadcast over
    heads): ``x * cos + roll(x, head_dim/2) * signed_sin`` in fp32, rounded to x's dtype (three launches: the roll,
    the product, and the fused multiply-add, which rounds as it stores). ``out`` (x's shape and dtype, any strides;
    may be ``x`` itself: x is read before the last launch writes) receives it; by default a new tensor."""
    turned = torch.roll(x, x.shape[-1] // 2, dims=-1)
    if out is None:
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    return torch.addcmul(x * cos.unsqueeze(-2), turned, signed_sin.unsqueeze(-2), out=out)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate ``x`` [..., heads, head_dim] by ``rope_cos_sin``'s ``cos``/``sin`` [..., head_dim] (broadcast over
    heads), in fp32, returned in x's dtype."""
    half = x.shape[-1] // 2
    return rotate(x, cos, torch.cat([-sin[..., :half], sin[..., half:]], dim=-1))


@dataclass
class KVCache:
    """One attention layer's KV cache on this rank: ``k`` and ``v`` [batch, kv_heads, local_len, head_dim].

    ``layout`` "heads": this rank's ``Hkv/W`` KV heads at every position (``local_len = max_len``). "sequence":
    every KV head at this rank's block of positions ``[rank * local_len, (rank + 1) * local_len)``
    (``local_len = max_len / W``); decode attention over it is ``ops.flash_decode`` (head dim 128). Made by
    ``TensorParallelAttention.new_cache``; ``forward``/``prefill``/``decode`` write the new tokens' keys and values.
    ``k_store`` / ``v_store`` are the tensors behind ``k`` / ``v``: a sequence-split cache has one spare position
    past its block, where a rank writes the new token of a sequence whose position another rank holds.
    """

    k_store: torch.Tensor
    v_store: torch.Tensor
    layout: str
    rank: int
    world_size: int

    @property
    def local_len(self) -> int:
        """Positions per rank: every position ("heads"), this rank's block ("sequence")."""
        return int(self.k_store.shape[2]) - (self.layout == "sequence")

    @property
    def k(self) -> torch.Tensor:
        """Keys [batch, kv_heads, local_len, head_dim] (a view of ``k_store``)."""
        return self.k_store[:, :, : self.local_len]

    @property
    def v(self) -> torch.Tensor:
        """Values [batch, kv_heads, local_len, head_dim] (a view of ``v_store``)."""
        return self.v_store[:, :, : self.local_len]

    @property
    def max_len(self) -> int:
        """The longest sequence the cache holds."""
        return self.local_len * (self.world_size if self.layout == "sequence" else 1)

    def clone(self) -> KVCache:
        """A copy with its own tensors."""
        return KVCache(self.k_store.clone(), self.v_store.clone(), self.layout, self.rank, self.world_size)


@dataclass(frozen=True)
class DecodePositions:
    """What every layer's decode step derives from the new tokens' positions, computed once per step
    (``TensorParallelAttention.decode_positions``) and passed to each layer in place of the positions tensor.

    ``positions`` integer [B] (as given); ``rows`` ``arange(B)``; ``cos`` / ``signed_sin`` fp32 [B, head_dim]
    (``rope_tables``); ``slots`` integer [B], where each new token goes in this rank's cache storage (a
    sequence-split cache's spare position when another rank holds it: int32 there, the positions themselves in a
    head-split cache); ``lengths`` int32 [B], this rank's valid tokens per sequence after the step
    (sequence-split), ``mask`` [B, 1, 1, local_len] in the cache's dtype, 0 where each sequence attends and -inf
    past its position (head-split).
    ``key``: the cache geometry and rotary frequencies they were made for (layout, local_len, rank, world size,
    head dim, rope theta). ``length``: with ``decode_positions(..., same_position=p)``, ``p + 1``: a head-split
    decode attends over the cache's first ``p + 1`` positions without a mask (``mask`` None); else None.
    """

    positions: torch.Tensor
    rows: torch.Tensor
    cos: torch.Tensor
    signed_sin: torch.Tensor
    slots: torch.Tensor
    lengths: torch.Tensor | None
    mask: torch.Tensor | None
    key: tuple
    length: int | None = None


class TensorParallelAttention(nn.Module):
    """Grouped-query self-attention with its heads split over the ranks: QKV column-parallel, RoPE, attention on
    this rank's heads, O row-parallel. No bias; optional per-head RMSNorm of q and k before RoPE (Qwen3).

    ``q_weight`` [H, Hq*D], ``k_weight`` and ``v_weight`` [H, Hkv*D], ``o_weight`` [Hq*D, H]: the full weights in the
    ops' [in_features, out_features] layout (``linear.weight.t()``), heads in order along the Hq*D / Hkv*D side.
    ``num_heads`` (Hq) and ``num_kv_heads`` (Hkv) must both be multiples of the world size W, and Hq of Hkv.
    ``q_norm_weight`` / ``k_norm_weight``: [D] each, or None (no QK norm). ``rope_theta``: the rotary base;
    ``rms_eps``: the QK norm's epsilon.

    The module keeps this rank's shards: ``qkv.weight`` [H, (Hq/W + 2*Hkv/W)*D] (its q heads' columns, then k's,
    then v's: one GEMM computes all three) and ``o.weight`` [Hq*D/W, H], plus the QK norm weights (replicated);
    ``state_dict`` holds exactly these. ``from_shards`` builds one from them. Bad weights raise LayerError naming
    the layer and the tensor.

    ``prefill_gqa`` (default True; an attribute of that name, which may be changed later): prefill passes this
    rank's Hkv/W KV heads to ``scaled_dot_product_attention`` as they are, with ``enable_gqa=True``, instead of
    first copying each of them once per query head of its group. False restores those copies
    (``repeat_interleave``: two copies of [B, Hq/W, S, D]) and SDPA without ``enable_gqa``.
    ``prefill_fused_rope`` (default True, likewise an attribute): prefill's QK norm and RoPE of q and k as one
    Triton kernel (``_kernels.rope_rows``: one read, one write), on GPUs and under the emulation (elsewhere the
    torch ops). False restores ``rotate_qkv``'s torch ops (a copy, a roll, an fp32 product and a multiply-add; two
    more with QK norm).
    Both are on by default since they were measured together on 2 x H200 (2026-11-27, 4k and 8k tokens of one
    sequence): the stack against the torch baseline 1.35x / 1.29x for Llama-3-8B, 1.16x / 1.17x for Llama-3-70B and
    1.28x / 1.15x for Qwen3-32B, against 1.09-1.18x with both off, and the same output difference (0.009;
    docs/results/2026-11-27-session22.md).
    Two decode options, off by default until measured (docs/design.md, "The decode step at batch 64"; attributes
    too): ``decode_gather`` ("all_reduce", the default, "all_gather" or "fused"): how the sequence-split decode
    gathers every rank's new q, k, v: one ``ops.all_reduce`` of a kept buffer that is zero outside this rank's block
    (each rank receives W x the block), ``ops.all_gather`` of this rank's block (each rank receives (W - 1) x the
    block, no zeros), or "fused": the QKV GEMM writes this rank's block of a kept buffer on the symmetric heap and one
    kernel (``_kernels.gather_rope``) reads every rank's block (a peer's over NVLink, after its flag), norms, rotates
    and places q, k, v: one launch in place of the all-reduce and ``rope_scatter``. ``decode_sdpa_backend`` (None,
    the default: torch's choice; or a name of ``DECODE_SDPA_BACKENDS``:
    "cudnn", "efficient", "flash", "math"): the head-split decode's SDPA pinned to that backend
    (``torch.nn.attention.sdpa_kernel``; a backend that cannot take the call raises torch's RuntimeError). A value
    outside these raises LayerError at the next decode. ``decode_rope_tiles`` (False, off until measured; an
    attribute too): the decode's RoPE and cache writes (``rope_scatter``, both cache layouts; not the fused gather,
    which is tiled already) as one 4-warp program per token that takes its heads as [heads, D/2] tiles, instead of
    one 1-warp program per head and token: 64 programs in place of 1536 (Llama-3-8B) / 2560 (Qwen3-32B) at the
    head-split decode's batch 64 on 2 ranks. ``decode_k_major`` (False, an attribute only): the decode's QKV
    GEMM (and ``decode_partial``'s O) on a kept copy of the weight stored [N, K] (``k_major_weight``: cuBLAS's
    "TN" GEMM; twice the weights' memory). ``decode_triton_gemm`` (False, an attribute only): the same GEMMs by
    ``ops.matmul.skinny_matmul`` (a Triton GEMM for at most 64 rows that streams the weight once, split over K to
    fill the SMs; ``decode_product``) on the [K, N] weight (it overrides ``decode_k_major``); above 64 rows, and
    on the CPU without the emulation, cuBLAS as before. A value other than a bool raises LayerError at the next
    decode.
    """

    def __init__(
        self,
        q_weight: torch.Tensor,
        k_weight: torch.Tensor,
        v_weight: torch.Tensor,
        o_weight: torch.Tensor,
        *,
        num_heads: int,
        num_kv_heads: int,
        head_dim: int,
        rope_theta: float = 10000.0,
        q_norm_weight: torch.Tensor | None = None,
        k_norm_weight: torch.Tensor | None = None,
        rms_eps: float = 1e-6,
        rank: int | None = None,
        world_size: int | None = None,
        prefill_gqa: bool = True,
        prefill_fused_rope: bool = True,
        decode_gather: str = "all_reduce",
        decode_sdpa_backend: str | None = None,
        decode_rope_tiles: bool = False,
    ) -> None:
        rank, world_size = world_position(rank, world_size)
        name = type(self).__name__
        _check_heads(name, num_heads, num_kv_heads, head_dim, world_size)
        hidden = _hidden_of(name, q_weight)
        for tensor, weight, cols in (
            ("q_weight", q_weight, num_heads * head_dim),
            ("k_weight", k_weight, num_kv_heads * head_dim),
            ("v_weight", v_weight, num_kv_heads * head_dim),
        ):
            check_weight(name, tensor, weight)
            if tuple(weight.shape) != (hidden, cols):
                raise LayerError(f"{name}: {tensor} must be [{hidden}, {cols}], got {list(weight.shape)}")
        check_weight(name, "o_weight", o_weight)
        for tensor, weight in (("k_weight", k_weight), ("v_weight", v_weight), ("o_weight", o_weight)):
            if weight.dtype != q_weight.dtype:
                raise LayerError(f"{name}: mixed weight dtypes: q_weight is {q_weight.dtype}, {tensor} {weight.dtype}")
        if tuple(o_weight.shape) != (num_heads * head_dim, hidden):
            raise LayerError(f"{name}: o_weight must be [{num_heads * head_dim}, {hidden}], got {list(o_weight.shape)}")
        named = (("q_weight", q_weight), ("k_weight", k_weight), ("v_weight", v_weight))
        qkv = torch.cat([shard_of(name, t, w, 1, rank, world_size) for t, w in named], dim=1)
        o = shard_of(name, "o_weight", o_weight, 0, rank, world_size)
        self._init_from_shards(
            qkv, o, num_heads, num_kv_heads, head_dim, rope_theta, q_norm_weight, k_norm_weight, rms_eps, rank,
            world_size, prefill_gqa, prefill_fused_rope,
        )  # fmt: skip
        self.decode_gather = decode_gather
        self.decode_sdpa_backend = decode_sdpa_backend
        self.decode_rope_tiles = decode_rope_tiles
        self._decode_options()

    @classmethod
    def from_shards(
        cls,
        qkv_shard: torch.Tensor,
        o_shard: torch.Tensor,
        *,
        num_heads: int,
        num_kv_heads: int,
        head_dim: int,
        rope_theta: float = 10000.0,
        q_norm_weight: torch.Tensor | None = None,
        k_norm_weight: torch.Tensor | None = None,
        rms_eps: float = 1e-6,
        rank: int | None = None,
        world_size: int | None = None,
        prefill_gqa: bool = True,
        prefill_fused_rope: bool = True,
        decode_gather: str = "all_reduce",
        decode_sdpa_backend: str | None = None,
        decode_rope_tiles: bool = False,
    ) -> TensorParallelAttention:
        """A block holding this rank's shards as ``state_dict`` has them: ``qkv_shard`` [H, (Hq/W + 2*Hkv/W)*D]
        (q's columns, then k's, then v's) and ``o_shard`` [Hq*D/W, H]; the other arguments as the class's."""
        rank, world_size = world_position(rank, world_size)
        _check_heads(cls.__name__, num_heads, num_kv_heads, head_dim, world_size)
        block = cls.__new__(cls)
        block._init_from_shards(
            qkv_shard, o_shard, num_heads, num_kv_heads, head_dim, rope_theta, q_norm_weight, k_norm_weight, rms_eps,
            rank, world_size, prefill_gqa, prefill_fused_rope,
        )  # fmt: skip
        block.decode_gather = decode_gather
        block.decode_sdpa_backend = decode_sdpa_backend
        block.decode_rope_tiles = decode_rope_tiles
        block._decode_options()
        return block

    def _init_from_shards(
        self,
        qkv: torch.Tensor,
        o: torch.Tensor,
        num_heads: int,
        num_kv_heads: int,
        head_dim: int,
        rope_theta: float,
        q_norm_weight: torch.Tensor | None,
        k_norm_weight: torch.Tensor | None,
        rms_eps: float,
        rank: int,
        world_size: int,
        prefill_gqa: bool,
        prefill_fused_rope: bool,
    ) -> None:
        nn.Module.__init__(self)
        name = type(self).__name__
        check_weight(name, "qkv_shard", qkv)
        check_weight(name, "o_shard", o)
        local_cols = (num_heads + 2 * num_kv_heads) // world_size * head_dim
        if qkv.shape[1] != local_cols:
            raise LayerError(
                f"{name}: qkv_shard must have {local_cols} columns ((Hq + 2*Hkv) / W * D = ({num_heads} + "
                f"2*{num_kv_heads}) / {world_size} * {head_dim}), got {list(qkv.shape)}"
            )
        hidden = int(qkv.shape[0])
        if tuple(o.shape) != (num_heads // world_size * head_dim, hidden):
            raise LayerError(
                f"{name}: o_shard must be [{num_heads // world_size * head_dim}, {hidden}], got {list(o.shape)}"
            )
        if o.dtype != qkv.dtype:
            raise LayerError(f"{name}: mixed weight dtypes: qkv {qkv.dtype}, o {o.dtype}")
        self.rank, self.world_size = rank, world_size
        self.num_heads, self.num_kv_heads, self.head_dim = num_heads, num_kv_heads, head_dim
        self.rope_theta, self.rms_eps = float(rope_theta), float(rms_eps)
        self.prefill_gqa = bool(prefill_gqa)
        self.prefill_fused_rope = bool(prefill_fused_rope)
        self.decode_gather = "all_reduce"
        self.decode_sdpa_backend = None
        self.decode_rope_tiles = False
        self.decode_k_major = False
        self.decode_triton_gemm = False
        self._k_major: dict[str, tuple[tuple[int, int], torch.Tensor]] = {}
        self.qkv = ColumnParallelLinear.from_shard(qkv, rank=rank, world_size=world_size)
        self.inv_freq: torch.Tensor
        self.register_buffer("inv_freq", rope_inv_freq(head_dim, self.rope_theta, qkv.device), persistent=False)
        self.signed_freq: torch.Tensor
        self.register_buffer("signed_freq", rope_signed_frequencies(self.inv_freq), persistent=False)
        # What decode reuses from call to call instead of making it again (launches saved per step; see
        # _decode_tables, _gather_buffer, _qk_norm_weight). Derived, so not in the state dict.
        self._tables: dict[tuple, tuple[torch.Tensor, ...]] = {}
        self._gather: dict[tuple, torch.Tensor] = {}
        self._fused: dict[tuple, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}
        self._qk_norm: tuple[tuple, torch.Tensor] | None = None
        self.o = RowParallelLinear.from_shard(o, rank=rank, world_size=world_size)
        if (q_norm_weight is None) != (k_norm_weight is None):
            raise LayerError(f"{name}: give both q_norm_weight and k_norm_weight, or neither")
        self.q_norm_weight: nn.Parameter | None = None
        self.k_norm_weight: nn.Parameter | None = None
        for tensor, weight in (("q_norm_weight", q_norm_weight), ("k_norm_weight", k_norm_weight)):
            if weight is None:
                continue
            if not isinstance(weight, torch.Tensor) or tuple(weight.shape) != (head_dim,) or weight.dtype != qkv.dtype:
                got = f"{weight.dtype} {list(weight.shape)}" if isinstance(weight, torch.Tensor) else type(weight)
                raise LayerError(f"{name}: {tensor} must be a {qkv.dtype} [{head_dim}] tensor, got {got}")
            setattr(self, tensor, nn.Parameter(weight.detach().contiguous().clone(), requires_grad=False))

    # ------------------------------------------------------------------------------------------------ geometry

    @property
    def hidden_size(self) -> int:
        """H."""
        return self.qkv.in_features

    @property
    def local_heads(self) -> int:
        """Query heads on this rank (Hq/W)."""
        return self.num_heads // self.world_size

    @property
    def local_kv_heads(self) -> int:
        """KV heads on this rank (Hkv/W)."""
        return self.num_kv_heads // self.world_size

    def extra_repr(self) -> str:
        return (
            f"hidden_size={self.hidden_size}, num_heads={self.num_heads}, num_kv_heads={self.num_kv_heads}, "
            f"head_dim={self.head_dim}, qk_norm={self.q_norm_weight is not None}, prefill_gqa={self.prefill_gqa}, "
            f"prefill_fused_rope={self.prefill_fused_rope}, decode_gather={self.decode_gather!r}, "
            f"decode_sdpa_backend={self.decode_sdpa_backend!r}, decode_rope_tiles={self.decode_rope_tiles}, "
            f"rank={self.rank}, world_size={self.world_size}"
        )

    def _decode_options(self) -> None:
        """Raise LayerError unless ``decode_gather``, ``decode_sdpa_backend``, ``decode_rope_tiles``,
        ``decode_k_major`` and ``decode_triton_gemm`` are values they take."""
        name = type(self).__name__
        for option in ("decode_rope_tiles", "decode_k_major", "decode_triton_gemm"):
            if not isinstance(getattr(self, option), bool):
                raise LayerError(f"{name}: {option} must be a bool, got {getattr(self, option)!r}")
        if self.decode_gather not in DECODE_GATHERS:
            raise LayerError(f"{name}: decode_gather must be one of {list(DECODE_GATHERS)}, got {self.decode_gather!r}")
        if self.decode_sdpa_backend is not None and self.decode_sdpa_backend not in DECODE_SDPA_BACKENDS:
            raise LayerError(
                f"{name}: decode_sdpa_backend must be None or one of {list(DECODE_SDPA_BACKENDS)}, got "
                f"{self.decode_sdpa_backend!r}"
            )

    def new_cache(
        self, batch: int, max_len: int, layout: str = "heads", device: torch.device | str | None = None
    ) -> KVCache:
        """A zeroed KV cache for ``batch`` sequences of up to ``max_len`` tokens, split by ``layout`` ("heads" or
        "sequence", see :class:`KVCache`; "sequence" needs ``max_len`` a multiple of W and head dim 128), on
        ``device`` (default: the weights'). Raises LayerError otherwise."""
        name = type(self).__name__
        if layout not in KV_LAYOUTS:
            raise LayerError(f"{name}: the KV cache layout must be one of {list(KV_LAYOUTS)}, got {layout!r}")
        if batch < 1 or max_len < 1:
            raise LayerError(f"{name}: a KV cache needs batch >= 1 and max_len >= 1, got {batch} and {max_len}")
        if layout == "sequence":
            if max_len % self.world_size:
                raise LayerError(
                    f"{name}: a sequence-split KV cache needs max_len a multiple of the world size "
                    f"{self.world_size}, got {max_len}"
                )
            if self.head_dim != FLASH_DECODE_HEAD_DIM:
                raise LayerError(
                    f"{name}: a sequence-split KV cache runs ops.flash_decode, which takes head_dim "
                    f"{FLASH_DECODE_HEAD_DIM}, not {self.head_dim}"
                )
            shape = (batch, self.num_kv_heads, max_len // self.world_size + 1, self.head_dim)  # + the spare
        else:
            shape = (batch, self.local_kv_heads, max_len, self.head_dim)
        where = self.qkv.weight.device if device is None else torch.device(device)
        k = torch.zeros(shape, dtype=self.qkv.weight.dtype, device=where)
        return KVCache(k, torch.zeros_like(k), layout, self.rank, self.world_size)

    def decode_positions(
        self, positions: torch.Tensor, cache: KVCache, *, same_position: int | None = None
    ) -> DecodePositions:
        """The per-step tensors of ``positions`` (int [B] on the cache's device: each sequence's position of its
        new token) for caches like ``cache``: compute once per decode step, pass to every layer. Raises
        LayerError for positions of the wrong type or shape. Positions are not checked against ``max_len`` (that
        would need a host synchronization): one past the cache is a device-side indexing error.

        ``same_position`` (an option, for a batch whose new tokens all sit at one position the host knows, as in
        torch TP's baseline of bench/decoder.py): every element of ``positions`` is this int (not checked: that
        would need a host synchronization); a head-split decode then attends over the cache's first
        ``same_position + 1`` positions without a mask, which lets SDPA take its unmasked kernels (cuDNN's), and
        the step makes no mask. A CUDA graph captured with it holds that length. The sequence split ignores it
        (flash_decode reads the lengths). Raises LayerError unless it is an int in ``[0, max_len)``."""
        name = type(self).__name__
        self._check_cache(cache, int(cache.k_store.shape[0]))
        batch = int(cache.k_store.shape[0])
        if not isinstance(positions, torch.Tensor) or positions.shape != (batch,) or positions.is_floating_point():
            got = f"{positions.dtype} {list(positions.shape)}" if isinstance(positions, torch.Tensor) else positions
            raise LayerError(f"{name}: positions must be an integer tensor of shape [{batch}], got {got}")
        if positions.device != cache.k_store.device:
            raise LayerError(f"{name}: positions is on {positions.device} but the KV cache on {cache.k_store.device}")
        if same_position is not None and (
            isinstance(same_position, bool)
            or not isinstance(same_position, int)
            or not 0 <= same_position < cache.max_len
        ):
            raise LayerError(
                f"{name}: same_position must be None or an int in [0, {cache.max_len}) (the cache's max_len), got "
                f"{same_position!r}"
            )
        cos, signed_sin = self.rope_tables(positions)
        lengths = mask = None
        rows, *table = self._decode_tables(cache, batch, positions.device)
        if cache.layout == "sequence":
            # One lookup gives both: row 0 of the table is each position's slot here, row 1 this rank's lengths.
            slots, lengths = table[0][:, positions].unbind(0)
        else:
            slots = positions.contiguous()  # rope_scatter reads it as a plain array (a no-op when it is one)
            after, neg_inf, zero = table  # after: arange(local_len); the two constants in the cache's dtype
            # Additive, in the cache's dtype: SDPA takes it as is (a boolean mask is converted per call).
            if same_position is None:
                mask = torch.where(after > positions.unsqueeze(1), neg_inf, zero)[:, None, None, :]
        length = None if same_position is None else same_position + 1
        key = self._step_key(cache)
        return DecodePositions(positions, rows, cos, signed_sin, slots, lengths, mask, key, length)

    def _decode_tables(self, cache: KVCache, batch: int, device: torch.device) -> tuple[torch.Tensor, ...]:
        """``(rows, *table)`` of a decode step, made on the first call for this cache geometry, batch and device and
        kept (a step then derives its tensors in one or two launches). ``rows``: ``arange(batch)``. Sequence-split:
        ``table`` int32 [2, max_len], row 0 each position's slot in this rank's storage (the spare one,
        ``local_len``, outside this rank's block), row 1 this rank's valid tokens once that position is written.
        Head-split: ``arange(local_len)`` and the mask's -inf and 0 as 0-dim tensors of the cache's dtype."""
        key = (*self._step_key(cache), batch, cache.k_store.dtype, device)
        kept = self._tables.get(key)
        if kept is not None:
            return kept
        local_len = cache.local_len
        rows = torch.arange(batch, device=device)
        if cache.layout == "sequence":
            offset = torch.arange(cache.max_len, device=device) - self.rank * local_len
            inside = (offset >= 0) & (offset < local_len)
            slots = torch.where(inside, offset, local_len)  # else the spare
            table = torch.stack([slots, (offset + 1).clamp(0, local_len)]).to(torch.int32)
            kept = (rows, table)
        else:
            dtype = cache.k_store.dtype
            kept = (
                rows,
                torch.arange(local_len, device=device),
                torch.tensor(float("-inf"), dtype=dtype, device=device),
                torch.tensor(0.0, dtype=dtype, device=device),
            )
        self._tables[key] = kept
        return kept

    def _step_key(self, cache: KVCache) -> tuple:
        return (cache.layout, cache.local_len, self.rank, self.world_size, self.head_dim, self.rope_theta)

    # ------------------------------------------------------------------------------------------------ pieces

    def rope_tables(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``rope_tables`` of ``positions`` with this block's frequencies (for ``rotate_qkv``; three launches)."""
        return rope_tables(positions, self.inv_freq, self.signed_freq)

    def prefill_rope(self, seq: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """``rope_tables`` of the positions ``0 .. seq - 1`` on ``device`` ([seq, D] each), which every prefill of
        ``seq`` tokens rotates by: made on first use and kept for every block of the same head dim and rope theta
        (the ``PREFILL_ROPE_KEPT`` most recently used), so a prefill launches nothing for them (the tables cost
        four launches and their host path per layer otherwise). Under CUDA-graph capture and ``torch.compile`` they
        are made afresh and not kept. The tables are shared: read them, never write into them."""
        make = lambda: self.rope_tables(torch.arange(seq, device=device))  # noqa: E731
        if torch.compiler.is_compiling() or (device.type == "cuda" and torch.cuda.is_current_stream_capturing()):
            return make()
        key = (seq, self.head_dim, self.rope_theta, self.signed_freq.dtype, device)
        kept = _prefill_rope.pop(key, None)
        _prefill_rope[key] = kept = make() if kept is None else kept  # the most recently used last
        while len(_prefill_rope) > PREFILL_ROPE_KEPT:
            del _prefill_rope[next(iter(_prefill_rope))]
        return kept

    def rotate_qkv(
        self, qkv: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """This rank's QKV projection [..., (Hq/W + 2*Hkv/W)*D] -> ``(q, k, v)``: q [..., Hq/W, D], k and v
        [..., Hkv/W, D], q and k RMS-normed per head (with QK norm) and rotated by ``rope`` (``rope_tables`` of the
        positions: [..., D] without the heads dim, broadcast: [S, D] for [B, S, ...]). q and k are normed and
        rotated together (they are adjacent columns), in few launches (three for RoPE, two more for the QK norm)."""
        d, hq, hkv = self.head_dim, self.local_heads, self.local_kv_heads
        qk = qkv[..., : (hq + hkv) * d].unflatten(-1, (hq + hkv, d))
        v = qkv[..., (hq + hkv) * d :].unflatten(-1, (hkv, d))
        if self.q_norm_weight is not None and self.k_norm_weight is not None:
            qk = rms_norm(qk, None, self.rms_eps) * self._qk_norm_weight()
        qk = rotate(qk, *rope)
        return qk[..., :hq, :], qk[..., hq:, :], v

    def _qk_norm_weight(self) -> torch.Tensor:
        """[Hq/W + Hkv/W, D]: q's norm weight for each of this rank's q heads, then k's for each KV head (one
        product norms q and k). Made again only when either weight changed (``load_state_dict`` writes them in
        place, which bumps their versions)."""
        q_weight, k_weight = self.q_norm_weight, self.k_norm_weight
        assert q_weight is not None and k_weight is not None
        key = (q_weight.data_ptr(), q_weight._version, k_weight.data_ptr(), k_weight._version)
        if self._qk_norm is None or self._qk_norm[0] != key:
            hq, hkv, d = self.local_heads, self.local_kv_heads, self.head_dim
            self._qk_norm = (key, torch.cat([q_weight.expand(hq, d), k_weight.expand(hkv, d)]))
        return self._qk_norm[1]

    def _check_cache(self, cache: KVCache, batch: int) -> None:
        name = type(self).__name__
        if not isinstance(cache, KVCache):
            raise LayerError(f"{name}: cache must be a KVCache (new_cache), got {type(cache).__name__}")
        kv_heads = self.num_kv_heads if cache.layout == "sequence" else self.local_kv_heads
        want = (batch, kv_heads, cache.local_len, self.head_dim)
        if tuple(cache.k.shape) != want or cache.rank != self.rank or cache.world_size != self.world_size:
            raise LayerError(
                f"{name}: the KV cache ({cache.layout}, k {list(cache.k.shape)}, rank {cache.rank} of "
                f"{cache.world_size}) does not fit this block at batch {batch} (want k {list(want)}, rank "
                f"{self.rank} of {self.world_size})"
            )

    def _check_hidden(self, x: torch.Tensor, what: str) -> None:
        name = type(self).__name__
        if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.shape[1] != self.hidden_size:
            got = list(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise LayerError(f"{name}: {what} must be [rows, {self.hidden_size}], got {got}")
        if x.dtype != self.qkv.weight.dtype:
            raise LayerError(f"{name}: {what} is {x.dtype} but the weights are {self.qkv.weight.dtype}")
        if x.device != self.qkv.weight.device:
            raise LayerError(f"{name}: {what} is on {x.device} but the weights are on {self.qkv.weight.device}")

    # ------------------------------------------------------------------------------------------------ prefill

    def forward(self, x: torch.Tensor, *, batch: int = 1, cache: KVCache | None = None) -> torch.Tensor:
        """Prefill (``prefill``)."""
        return self.prefill(x, batch=batch, cache=cache)

    def prefill(self, x: torch.Tensor, *, batch: int = 1, cache: KVCache | None = None) -> torch.Tensor:
        """Causal self-attention over ``batch`` sequences of S tokens each, from position 0, sequence-parallel.

        ``x``: this rank's rows [M/W, H] of the [M, H] hidden states (M = batch * S tokens, sequence b's tokens at
        rows ``[b * S, (b + 1) * S)``; M a multiple of W). QKV through ``ag_gemm`` (every token, this rank's
        heads), QK norm and RoPE, ``scaled_dot_product_attention`` (causal) on this rank's heads, O through
        ``gemm_rs``. Returns this rank's rows [M/W, H] of the block's output. ``cache`` (optional, of this batch
        and ``max_len >= S``): receives the keys and values of positions ``[0, S)`` (a sequence-split cache
        gathers them from every rank's heads). Every rank calls it together, with the same shapes.
        """
        name = type(self).__name__
        self._check_hidden(x, "x")
        tokens = x.shape[0] * self.world_size
        if batch < 1 or tokens % batch:
            raise LayerError(f"{name}: {tokens} tokens do not split into batch={batch} equal sequences")
        seq = tokens // batch
        rope = self.prefill_rope(seq, x.device)  # [S, D], broadcast over the batch
        qkv = self.qkv(x)  # [M, (Hq/W + 2*Hkv/W) * D]
        if self.prefill_fused_rope and fused_kernels(qkv):
            hq, hkv, d = self.local_heads, self.local_kv_heads, self.head_dim
            qk = rope_rows(qkv, *rope, seq, (hq, hkv), self._qk_norm_args()).view(batch, seq, hq + hkv, d)
            q, k = qk[:, :, :hq], qk[:, :, hq:]
            v = qkv.view(batch, seq, -1)[..., (hq + hkv) * d :].unflatten(-1, (hkv, d))
        else:
            q, k, v = self.rotate_qkv(qkv.view(batch, seq, -1), rope)  # [B, S, heads, D]
        if cache is not None:
            self._fill_cache(cache, k, v, batch, seq)
        out = self._prefill_sdpa(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))  # [B, Hq/W, S, D]
        return self.o(out.transpose(1, 2).reshape(tokens, self.local_heads * self.head_dim))

    def _prefill_sdpa(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Causal attention of q [B, Hq/W, S, D] over k and v [B, Hkv/W, S, D] (query head h reads KV head
        ``h // group``): SDPA with ``enable_gqa`` (``prefill_gqa``) or on copies of k and v with each KV head
        repeated for its group; no copy when every query head has its own KV head."""
        group = self.num_heads // self.num_kv_heads
        if group == 1:
            return functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        if self.prefill_gqa:
            return functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        return functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    def _fill_cache(self, cache: KVCache, k: torch.Tensor, v: torch.Tensor, batch: int, seq: int) -> None:
        """Write positions [0, seq) of k, v [B, S, Hkv/W, D] (this rank's heads) into ``cache``."""
        self._check_cache(cache, batch)
        if seq > cache.max_len:
            raise LayerError(f"{type(self).__name__}: {seq} tokens do not fit a KV cache of max_len {cache.max_len}")
        if cache.layout == "heads":
            cache.k[:, :, :seq] = k.transpose(1, 2)
            cache.v[:, :, :seq] = v.transpose(1, 2)
            return
        import torch.distributed as dist

        # Every rank's heads for this rank's block of positions: gather every rank's heads (a prefill-time cost).
        start = self.rank * cache.local_len
        count = max(0, min(seq - start, cache.local_len))
        for source, target in ((k, cache.k), (v, cache.v)):
            pieces = [torch.empty_like(source) for _ in range(self.world_size)]
            dist.all_gather(pieces, source.contiguous())
            every = torch.cat(pieces, dim=2)  # [B, S, Hkv, D], heads in rank order
            if count:
                target[:, :, :count] = every[:, start : start + count].transpose(1, 2)

    # ------------------------------------------------------------------------------------------------ decode

    def decode(self, x: torch.Tensor, positions: torch.Tensor | DecodePositions, cache: KVCache) -> torch.Tensor:
        """One new token per sequence: ``decode_partial``'s attention with O reduced over the ranks by
        ``ops.gemm_ar``. Returns [B, H], the same on every rank."""
        attn = self.decode_attention(x, positions, cache)
        return gemm_ar(attn, self.o.weight)

    def decode_partial(
        self, x: torch.Tensor, positions: torch.Tensor | DecodePositions, cache: KVCache
    ) -> torch.Tensor:
        """One new token per sequence, O left unreduced: returns this rank's partial [B, H] (``attn_local @ o``),
        whose sum over the ranks is the block's output; for a caller that fuses the all-reduce into what
        follows (``ops.all_reduce_residual_rmsnorm``).

        ``x``: the new tokens' hidden states [B, H], the same on every rank; ``positions``: int [B] on x's device,
        each sequence's position of its new token (the cache holds its earlier positions; below ``max_len``), or
        ``decode_positions`` of them (computed once per step for every layer); ``cache``: this block's KV cache
        (``new_cache``) of batch B, which receives the new keys and values. No host synchronization (CUDA-graph
        capturable once each shape ran eagerly). A "heads" cache attends with ``scaled_dot_product_attention`` on
        this rank's heads (pinned to ``decode_sdpa_backend`` when set); a "sequence" cache first gathers every rank's
        new q, k, v (one ``ops.all_reduce`` of the zero-padded columns, or ``ops.all_gather`` with ``decode_gather``
        "all_gather") and runs ``ops.flash_decode``. Raises LayerError for bad input or a bad decode option.
        """
        attn = self.decode_attention(x, positions, cache)
        return decode_product(attn, self._decode_weight("o", self.o.weight), self.decode_triton_gemm)

    def decode_attention(
        self, x: torch.Tensor, positions: torch.Tensor | DecodePositions, cache: KVCache
    ) -> torch.Tensor:
        """The new tokens' attention output on this rank's heads, [B, Hq/W * D], before O (arguments as
        ``decode_partial``): for a caller that runs O itself (the decoder layer: ``gemm_ar`` with its norm
        epilogue)."""
        name = type(self).__name__
        self._check_hidden(x, "x")
        batch = x.shape[0]
        self._check_cache(cache, batch)
        step = positions if isinstance(positions, DecodePositions) else self.decode_positions(positions, cache)
        if step.key != self._step_key(cache) or step.positions.shape != (batch,):
            raise LayerError(
                f"{name}: the DecodePositions were made for {step.key} at batch {step.positions.shape[0]}, not for "
                f"this cache {self._step_key(cache)} at batch {batch}"
            )
        if step.positions.device != x.device:
            raise LayerError(f"{name}: positions is on {step.positions.device} but x is on {x.device}")
        self._decode_options()
        d, hq, hkv = self.head_dim, self.local_heads, self.local_kv_heads
        rope = (step.cos, step.signed_sin)
        w_qkv = self._decode_weight("qkv", self.qkv.weight)
        if cache.layout == "heads":
            qkv = decode_product(x, w_qkv, self.decode_triton_gemm)
            if fused_kernels(x):  # RoPE (and QK norm) and the cache writes in one launch
                q = torch.empty(batch, hq, d, dtype=x.dtype, device=x.device)
                stores = (cache.k_store, cache.v_store)
                rope_scatter(
                    qkv.unsqueeze(0), *rope, step.slots, q, *stores, (hq, hkv), self._qk_norm_args(),
                    tiled=self.decode_rope_tiles,
                )  # fmt: skip
            else:
                q, k, v = self.rotate_qkv(qkv, rope)  # [B, heads, D]
                cache.k_store[step.rows, :, step.slots] = k
                cache.v_store[step.rows, :, step.slots] = v
            # The group's query heads as the query rows of their KV head: no copy of the cache for GQA. With a
            # same_position step, the cache's first positions up to it and no mask.
            query = q.reshape(batch, hkv, hq // hkv, d)
            keys, values = cache.k[:, :, : step.length], cache.v[:, :, : step.length]
            if self.decode_sdpa_backend is None:
                out = functional.scaled_dot_product_attention(query, keys, values, attn_mask=step.mask)
            else:
                with sdpa_kernel(DECODE_SDPA_BACKENDS[self.decode_sdpa_backend]):
                    out = functional.scaled_dot_product_attention(query, keys, values, attn_mask=step.mask)
            return out.reshape(batch, hq * d)
        # Sequence-split cache: every head's new q, k, v on every rank, gathered as one all-reduce of a buffer that
        # is zero outside this rank's columns. The buffer is kept ([W, B, cols], zeroed once: no rank ever writes
        # another's block) and the QKV GEMM writes this rank's block, so the gather costs no fill and no copy. Then
        # one launch norms (QK norm) and rotates every head's q and k, stores q contiguous for flash_decode and
        # each new token's k, v into its slot here (the spare one where another rank holds its position). With
        # decode_gather "all_gather": the QKV GEMM into a new [B, cols] tensor, gathered into a new [W, B, cols]; with
        # "fused": into this rank's block of a kept symmetric buffer, which gather_rope reads on every rank.
        q_all = torch.empty(batch, self.num_heads, d, dtype=x.dtype, device=x.device)
        stores = (cache.k_store, cache.v_store)
        if self.decode_gather == "fused":  # the gather inside the RoPE kernel: one launch, no zeros
            sym, flags, state = self._fused_buffers(batch, x)
            decode_product(x, w_qkv, self.decode_triton_gemm, out=sym[self.rank])
            gather_rope(sym, flags, state, *rope, step.slots, q_all, *stores, (hq, hkv), self._qk_norm_args())
        else:
            if self.decode_gather == "all_gather":  # this rank's block alone crosses the links, no zeros
                gathered = all_gather(decode_product(x, w_qkv, self.decode_triton_gemm)).view(
                    self.world_size, batch, -1
                )
            else:
                gather = self._gather_buffer(batch, x)
                decode_product(x, w_qkv, self.decode_triton_gemm, out=gather[self.rank])
                gathered = all_reduce(gather)
            rope_scatter(
                gathered, *rope, step.slots, q_all, *stores, (hq, hkv), self._qk_norm_args(),
                tiled=self.decode_rope_tiles,
            )  # fmt: skip
        out = flash_decode(q_all, cache.k, cache.v, step.lengths, scale=d**-0.5)  # [B, Hq, D]
        return out[:, self.rank * hq : (self.rank + 1) * hq].reshape(batch, hq * d)  # a view: rows of stride Hq*D

    def _decode_weight(self, name: str, weight: torch.Tensor) -> torch.Tensor:
        """``weight``, or with ``decode_k_major`` (and not ``decode_triton_gemm``, which reads the [K, N] weight)
        its K-major copy's view (``k_major_weight``)."""
        if self.decode_k_major and not self.decode_triton_gemm:
            return k_major_weight(self._k_major, name, weight)
        return weight

    def _qk_norm_args(self) -> tuple[torch.Tensor, torch.Tensor, float] | None:
        """``rope_scatter``'s ``qk_norm``: the two weights and the epsilon, or None without QK norm."""
        if self.q_norm_weight is None or self.k_norm_weight is None:
            return None
        return (self.q_norm_weight, self.k_norm_weight, self.rms_eps)

    def _fused_buffers(self, batch: int, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``decode_gather="fused"``'s kept ``(sym, flags, state)`` for ``gather_rope``: sym [W, B, cols] in x's
        dtype and flags int32 [W] (zeroed) on the symmetric heap, state int64 [1] (zeroed) on x's device. Made on
        a decode's first call at this batch (eagerly, before any CUDA-graph capture of the step: a collective with
        a barrier, every rank in the same order) and kept; this block's calls only (the epochs count them)."""
        key = ("fused", batch, x.dtype, x.device)
        kept = self._fused.get(key)
        if kept is None:
            cols = (self.local_heads + 2 * self.local_kv_heads) * self.head_dim
            sym = rt.empty(self.world_size, batch, cols, dtype=x.dtype)
            flags = rt.zeros(self.world_size, dtype=torch.int32)
            state = torch.zeros(1, dtype=torch.int64, device=x.device)
            rt.barrier()  # zeroed flags everywhere before any rank's kernel sets one
            kept = self._fused[key] = (sym, flags, state)
        return kept

    def _gather_buffer(self, batch: int, x: torch.Tensor) -> torch.Tensor:
        """The sequence-split decode's all-gather buffer [W, B, (Hq/W + 2*Hkv/W)*D] in x's dtype on x's device,
        zeroed when first made (eagerly, before any CUDA-graph capture of the step) and kept: each call writes
        only this rank's block ``[rank]``, so every other block stays zero. Calls of one block must not run
        concurrently on two streams."""
        key = (batch, x.dtype, x.device)
        buffer = self._gather.get(key)
        if buffer is None:
            cols = (self.local_heads + 2 * self.local_kv_heads) * self.head_dim
            buffer = torch.zeros(self.world_size, batch, cols, dtype=x.dtype, device=x.device)
            self._gather[key] = buffer
        return buffer


def _check_heads(name: str, num_heads: int, num_kv_heads: int, head_dim: int, world_size: int) -> None:
    """Raise LayerError unless the heads split evenly over ``world_size`` ranks and group evenly (GQA)."""
    if num_heads < 1 or num_kv_heads < 1 or head_dim < 2 or head_dim % 2:
        raise LayerError(
            f"{name}: num_heads and num_kv_heads must be >= 1 and head_dim even, got {num_heads}, {num_kv_heads}, "
            f"{head_dim}"
        )
    if num_heads % num_kv_heads:
        raise LayerError(f"{name}: num_heads {num_heads} is not a multiple of num_kv_heads {num_kv_heads}")
    for what, count in (("num_heads", num_heads), ("num_kv_heads", num_kv_heads)):
        if count % world_size:
            raise LayerError(
                f"{name}: {what} {count} does not split over {world_size} ranks (each rank takes whole heads; "
                "replicated KV heads are not supported)"
            )


def _hidden_of(name: str, q_weight: torch.Tensor) -> int:
    check_weight(name, "q_weight", q_weight)
    return int(q_weight.shape[0])

"""The tensor-parallel decoder layer (pre-norm: RMSNorm, attention, residual, RMSNorm, gated MLP, residual) and the
configs of the models it is benchmarked on (see the package docstring and docs/layers.md)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import nn

from triton_dist.layers._kernels import fused_kernels, l2_prefetch, silu_mul
from triton_dist.layers.attention import (
    DecodePositions,
    KVCache,
    TensorParallelAttention,
    decode_product,
    k_major_weight,
    rms_norm,
)
from triton_dist.layers.linear import LayerError, world_position
from triton_dist.layers.mlp import TensorParallelMLP
from triton_dist.ops import all_reduce, all_reduce_residual_rmsnorm, gemm_ar

DECODE_PREFETCH_BYTES = 16 << 20
"""What ``bench/decoder.py``'s prefetch variants pass as ``decode_prefetch_bytes``: a third of an H100's or H200's
50 MB L2, about what HBM delivers in the 4-8 µs of a fused all-reduce + RMSNorm."""
_side_streams: dict[torch.device, torch.cuda.Stream] = {}
"""The side stream of each GPU that the decode step's L2 prefetches run on (made on first use)."""

MAX_HIDDEN = 32768
"""The largest hidden size ``ops.all_reduce_residual_rmsnorm`` tiles (one row per program)."""


@dataclass(frozen=True)
class DecoderConfig:
    """The shape of one decoder layer: hidden size H, query heads Hq, KV heads Hkv, head dim D, the MLP's
    intermediate size I, the rotary base, the RMSNorm epsilon, whether q and k are RMS-normed per head before RoPE
    (Qwen3), and the model's depth (for reference: a layer is one of ``num_layers``)."""

    name: str
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    rope_theta: float
    rms_eps: float
    qk_norm: bool = False
    num_layers: int = 1

    def weight_shapes(self) -> dict[str, tuple[int, ...]]:
        """The full weights a layer takes, by name, in the ops' [in_features, out_features] layout."""
        h, i, d = self.hidden_size, self.intermediate_size, self.head_dim
        shapes: dict[str, tuple[int, ...]] = {
            "input_norm": (h,),
            "q": (h, self.num_heads * d),
            "k": (h, self.num_kv_heads * d),
            "v": (h, self.num_kv_heads * d),
            "o": (self.num_heads * d, h),
            "post_norm": (h,),
            "gate": (h, i),
            "up": (h, i),
            "down": (i, h),
        }
        if self.qk_norm:
            shapes.update(q_norm=(d,), k_norm=(d,))
        return shapes


LLAMA_3_8B = DecoderConfig("Llama-3-8B", 4096, 32, 8, 128, 14336, 500000.0, 1e-5, num_layers=32)
LLAMA_3_70B = DecoderConfig("Llama-3-70B", 8192, 64, 8, 128, 28672, 500000.0, 1e-5, num_layers=80)
QWEN3_32B = DecoderConfig("Qwen3-32B", 5120, 64, 8, 128, 25600, 1000000.0, 1e-6, qk_norm=True, num_layers=64)
CONFIGS = {config.name: config for config in (LLAMA_3_8B, LLAMA_3_70B, QWEN3_32B)}
"""The published configs of the benchmarked models (hidden, heads, KV heads, head dim, intermediate, rope theta,
RMSNorm eps, QK norm, layers), by name."""


def random_weights(
    config: DecoderConfig,
    *,
    dtype: torch.dtype = torch.bfloat16,
    device: torch.device | str = "cpu",
    generator: torch.Generator | None = None,
) -> dict[str, torch.Tensor]:
    """Full random weights of one layer (``config.weight_shapes()``): projections ``randn / sqrt(in_features)``,
    norm weights ``1 + randn / 8``, so activations stay near 1. ``generator`` (on ``device``) makes them
    reproducible: every rank draws the same ones."""
    weights = {}
    for name, shape in config.weight_shapes().items():
        value = torch.randn(shape, generator=generator, device=device, dtype=torch.float32)
        weights[name] = (1 + value / 8 if len(shape) == 1 else value / shape[0] ** 0.5).to(dtype)
    return weights


class TensorParallelDecoderLayer(nn.Module):
    """A pre-norm decoder layer split over the ranks: ``h = x + attn(rmsnorm(x)); out = h + mlp(rmsnorm(h))``,
    the attention a :class:`TensorParallelAttention` and the MLP a :class:`TensorParallelMLP`.

    ``weights``: the full weights by name (``config.weight_shapes()``: ``input_norm``, ``q``, ``k``, ``v``, ``o``,
    ``post_norm``, ``gate``, ``up``, ``down``, and with ``config.qk_norm`` ``q_norm`` and ``k_norm``), all of one
    dtype (bf16 or fp16); the layer keeps this rank's shards and the (replicated) norm weights. ``from_shards``
    builds one from a ``state_dict``. Bad weights raise LayerError naming the layer and the tensor.

    Two ways through the layer (every rank calls together, with the same shapes):

    - ``prefill(x)``, sequence-parallel: x is this rank's rows [M/W, H]; the norms are local, the attention and
      the MLP run ``ag_gemm`` then ``gemm_rs``; returns this rank's rows [M/W, H].
    - ``decode(x, residual, positions, cache)``, one new token per sequence, replicated hidden states [B, H], the
      all-reduces deferred and fused: the layer's input is ``residual + sum over ranks of x``, and it returns
      ``(x_out, residual_out)`` meaning the same for its output. Both of its all-reduces are
      ``ops.all_reduce_residual_rmsnorm`` (with this layer's input norm; then with its post-attention norm, as
      ``ops.gemm_ar``'s epilogue after O), so a stack of layers passes ``(x, residual)`` along with one fused
      all-reduce + residual + RMSNorm per boundary. Start a
      stack with ``x = zeros``, ``residual = hidden``; ``decode_hidden`` does one layer that way and reduces its
      output.
    Decode options, off by default until measured (docs/design.md, "The decode step at batch 64"; attributes of the
    same names, which may be changed later; the attention block's ``decode_gather`` and ``decode_sdpa_backend`` are
    its own, ``layer.attention``):

    - ``decode_cublas_o`` (False): O's GEMM by cuBLAS (``torch.matmul``), then ``all_reduce_residual_rmsnorm`` of
      the product, in place of ``gemm_ar``'s norm epilogue (which runs its own Triton GEMM, then the same fused op).
    - ``decode_prefetch_bytes`` (0, off): on GPUs, while each fused all-reduce + RMSNorm runs (it moves a few
      hundred KB over NVLink and leaves HBM idle), a side stream reads the first ``decode_prefetch_bytes`` of the
      next GEMM's weight into L2 (``_kernels.l2_prefetch``): the QKV weight during the first; gate/up's during the
      second, only with ``decode_cublas_o`` (else the second runs inside ``gemm_ar`` right after its GEMM).
      Under the CPU emulation the prefetch kernel runs inline on the current stream; on the CPU without it, not.
    - ``decode_k_major`` (False; an attribute only): the decode's cuBLAS GEMMs of this layer (gate/up, down, and O
      with ``decode_cublas_o``) on kept copies of their weights stored [N, K] (``attention.k_major_weight``:
      cuBLAS's "TN" GEMM instead of "NN" at M = the batch; twice those weights' memory). The attention block's
      attribute of the same name does its QKV GEMM; ``bench/decoder.py`` sets both. (``decode_prefetch_bytes``
      still reads the [K, N] weights: the two are not meant together.)
    - ``decode_triton_gemm`` (False; an attribute only): the decode's cuBLAS GEMMs of this layer (gate/up, down,
      and O with ``decode_cublas_o``; ``gemm_ar``'s own GEMM stays) by ``ops.matmul.skinny_matmul``, a Triton GEMM
      for at most 64 rows made to stream the weight at HBM speed (``attention.decode_product``: above 64 rows, and
      on the CPU without the emulation, cuBLAS as before); it reads the [K, N] weights, so it overrides
      ``decode_k_major``. The attention block's attribute of the same name does its QKV GEMM; ``bench/decoder.py``
      sets both.
    """

    def __init__(
        self,
        config: DecoderConfig,
        weights: Mapping[str, torch.Tensor],
        *,
        rank: int | None = None,
        world_size: int | None = None,
        decode_cublas_o: bool = False,
        decode_prefetch_bytes: int = 0,
    ) -> None:
        rank, world_size = world_position(rank, world_size)
        name = type(self).__name__
        _check_config(name, config)
        _check_full_weights(name, config, weights)
        attention = TensorParallelAttention(
            weights["q"], weights["k"], weights["v"], weights["o"],
            num_heads=config.num_heads, num_kv_heads=config.num_kv_heads, head_dim=config.head_dim,
            rope_theta=config.rope_theta, q_norm_weight=weights.get("q_norm"), k_norm_weight=weights.get("k_norm"),
            rms_eps=config.rms_eps, rank=rank, world_size=world_size,
        )  # fmt: skip
        mlp = TensorParallelMLP(weights["gate"], weights["up"], weights["down"], rank=rank, world_size=world_size)
        self._assemble(config, attention, mlp, weights["input_norm"], weights["post_norm"], rank, world_size)
        self.decode_cublas_o, self.decode_prefetch_bytes = decode_cublas_o, decode_prefetch_bytes
        self._decode_options()

    @classmethod
    def from_shards(
        cls,
        config: DecoderConfig,
        state: Mapping[str, torch.Tensor],
        *,
        rank: int | None = None,
        world_size: int | None = None,
        decode_cublas_o: bool = False,
        decode_prefetch_bytes: int = 0,
    ) -> TensorParallelDecoderLayer:
        """A layer holding this rank's shards, as ``state_dict()`` has them (``input_norm_weight``,
        ``post_norm_weight``, ``attention.qkv.weight``, ``attention.o.weight``, ``mlp.gate_up.weight`` (gate's
        columns, then up's), ``mlp.down.weight``, and with QK norm ``attention.q_norm_weight`` and
        ``attention.k_norm_weight``); the decode options as the class's. Raises LayerError naming a missing or
        misshapen tensor or a bad option."""
        rank, world_size = world_position(rank, world_size)
        name = cls.__name__
        _check_config(name, config)
        needed = ["input_norm_weight", "post_norm_weight", "attention.qkv.weight", "attention.o.weight"]
        needed += ["mlp.gate_up.weight", "mlp.down.weight"]
        needed += ["attention.q_norm_weight", "attention.k_norm_weight"] if config.qk_norm else []
        missing = [key for key in needed if key not in state]
        if missing:
            raise LayerError(f"{name}: the shards lack {missing}")
        attention = TensorParallelAttention.from_shards(
            state["attention.qkv.weight"], state["attention.o.weight"],
            num_heads=config.num_heads, num_kv_heads=config.num_kv_heads, head_dim=config.head_dim,
            rope_theta=config.rope_theta, q_norm_weight=state.get("attention.q_norm_weight"),
            k_norm_weight=state.get("attention.k_norm_weight"), rms_eps=config.rms_eps, rank=rank,
            world_size=world_size,
        )  # fmt: skip
        gate_up = state["mlp.gate_up.weight"]
        if gate_up.dim() != 2 or gate_up.shape[1] % 2:
            raise LayerError(f"{name}: mlp.gate_up.weight must be [H, 2*I/W], got {list(gate_up.shape)}")
        gate, up = gate_up.chunk(2, dim=1)
        mlp = TensorParallelMLP.from_shards(gate, up, state["mlp.down.weight"], rank=rank, world_size=world_size)
        layer = cls.__new__(cls)
        layer._assemble(config, attention, mlp, state["input_norm_weight"], state["post_norm_weight"], rank, world_size)
        layer.decode_cublas_o, layer.decode_prefetch_bytes = decode_cublas_o, decode_prefetch_bytes
        layer._decode_options()
        return layer

    def _assemble(
        self,
        config: DecoderConfig,
        attention: TensorParallelAttention,
        mlp: TensorParallelMLP,
        input_norm: torch.Tensor,
        post_norm: torch.Tensor,
        rank: int,
        world_size: int,
    ) -> None:
        nn.Module.__init__(self)
        name = type(self).__name__
        dtype = attention.qkv.weight.dtype
        if mlp.gate_up.weight.dtype != dtype:
            raise LayerError(f"{name}: mixed weight dtypes: attention {dtype}, mlp {mlp.gate_up.weight.dtype}")
        if attention.hidden_size != config.hidden_size or mlp.hidden_size != config.hidden_size:
            raise LayerError(
                f"{name}: the weights' hidden size (attention {attention.hidden_size}, mlp {mlp.hidden_size}) is "
                f"not the config's {config.hidden_size}"
            )
        if mlp.intermediate_size != config.intermediate_size:
            raise LayerError(
                f"{name}: the MLP's intermediate size {mlp.intermediate_size} is not the config's "
                f"{config.intermediate_size}"
            )
        for tensor, weight in (("input_norm", input_norm), ("post_norm", post_norm)):
            if (
                not isinstance(weight, torch.Tensor)
                or tuple(weight.shape) != (config.hidden_size,)
                or weight.dtype != dtype
            ):
                got = f"{weight.dtype} {list(weight.shape)}" if isinstance(weight, torch.Tensor) else type(weight)
                raise LayerError(f"{name}: {tensor} must be a {dtype} [{config.hidden_size}] tensor, got {got}")
        self.config, self.rank, self.world_size = config, rank, world_size
        self.input_norm_weight = nn.Parameter(input_norm.detach().contiguous().clone(), requires_grad=False)
        self.attention = attention
        self.post_norm_weight = nn.Parameter(post_norm.detach().contiguous().clone(), requires_grad=False)
        self.mlp = mlp
        self.decode_cublas_o, self.decode_prefetch_bytes, self.decode_k_major = False, 0, False
        self.decode_triton_gemm = False
        self._k_major: dict[str, tuple[tuple[int, int], torch.Tensor]] = {}
        self._sinks: dict[torch.device, torch.Tensor] = {}  # l2_prefetch's per-program sums (never read)

    def _decode_options(self) -> None:
        """Raise LayerError unless ``decode_cublas_o``, ``decode_k_major`` and ``decode_triton_gemm`` are bools and
        ``decode_prefetch_bytes`` an int >= 0."""
        name = type(self).__name__
        for option in ("decode_cublas_o", "decode_k_major", "decode_triton_gemm"):
            if not isinstance(getattr(self, option), bool):
                raise LayerError(f"{name}: {option} must be a bool, got {getattr(self, option)!r}")
        prefetch = self.decode_prefetch_bytes
        if isinstance(prefetch, bool) or not isinstance(prefetch, int) or prefetch < 0:
            raise LayerError(f"{name}: decode_prefetch_bytes must be an int >= 0 (0: off), got {prefetch!r}")

    def extra_repr(self) -> str:
        return (
            f"config={self.config.name!r}, rank={self.rank}, world_size={self.world_size}, decode_cublas_o="
            f"{self.decode_cublas_o}, decode_prefetch_bytes={self.decode_prefetch_bytes}"
        )

    def new_cache(
        self, batch: int, max_len: int, layout: str = "heads", device: torch.device | str | None = None
    ) -> KVCache:
        """This layer's KV cache (``TensorParallelAttention.new_cache``)."""
        return self.attention.new_cache(batch, max_len, layout, device)

    def decode_positions(
        self, positions: torch.Tensor, cache: KVCache, *, same_position: int | None = None
    ) -> DecodePositions:
        """What every layer's decode step derives from ``positions`` (``TensorParallelAttention.decode_positions``,
        ``same_position`` included): compute once per step, pass to each layer's ``decode`` (layers of one config
        with caches of one shape)."""
        return self.attention.decode_positions(positions, cache, same_position=same_position)

    def forward(self, x: torch.Tensor, *, batch: int = 1, cache: KVCache | None = None) -> torch.Tensor:
        """Prefill (``prefill``)."""
        return self.prefill(x, batch=batch, cache=cache)

    def prefill(self, x: torch.Tensor, *, batch: int = 1, cache: KVCache | None = None) -> torch.Tensor:
        """The layer over ``batch`` sequences of S tokens each from position 0, sequence-parallel: ``x`` is this
        rank's rows [M/W, H] of the [M, H] hidden states (M = batch * S, sequence-major; a multiple of W); returns
        this rank's rows [M/W, H] of the output. ``cache`` (optional) receives the keys and values (see
        ``TensorParallelAttention.prefill``)."""
        self._check_input("x", x)
        eps = self.config.rms_eps
        h = x + self.attention.prefill(rms_norm(x, self.input_norm_weight, eps), batch=batch, cache=cache)
        return h + self.mlp(rms_norm(h, self.post_norm_weight, eps))

    def decode(
        self, x: torch.Tensor, residual: torch.Tensor, positions: torch.Tensor | DecodePositions, cache: KVCache
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One new token per sequence. The layer's input is ``residual + sum over ranks of x`` ([B, H] each,
        ``residual`` the same on every rank); returns ``(x_out, residual_out)``, the output as the same kind of
        pair (this rank's unreduced partial, and the replicated residual). ``positions`` and ``cache`` as
        ``TensorParallelAttention.decode_partial`` (a stack computes ``decode_positions`` once per step).
        Launches: the fused all-reduce + residual + RMSNorm, the QKV GEMM, the attention, O through ``gemm_ar``
        with its norm epilogue (O's GEMM, then the fused op again; ``decode_cublas_o``: cuBLAS's GEMM, then the fused
        op), the gate/up GEMM, ``silu(gate) * up`` (one Triton kernel), the down GEMM; with
        ``decode_prefetch_bytes``, an L2 prefetch beside each fused op on a side stream. No host synchronization
        (CUDA-graph capturable once each shape ran eagerly). Raises LayerError for bad input or a bad option."""
        self._check_input("x", x)
        self._check_input("residual", residual)
        if x.shape != residual.shape:
            raise LayerError(
                f"{type(self).__name__}: x and residual must have one shape, got {list(x.shape)} and "
                f"{list(residual.shape)}"
            )
        self._decode_options()
        eps = self.config.rms_eps
        x, residual = x.contiguous(), residual.contiguous()  # the fused op takes contiguous tensors
        prefetch = self._prefetch(self.attention.qkv.weight, x)
        normed, residual = all_reduce_residual_rmsnorm(x, residual, self.input_norm_weight, eps)
        self._join(prefetch)
        attn = self.attention.decode_attention(normed, positions, cache)
        if self.decode_cublas_o:
            partial = decode_product(attn, self._decode_weight("o", self.attention.o.weight), self.decode_triton_gemm)
            prefetch = self._prefetch(self.mlp.gate_up.weight, x)
            normed, residual = all_reduce_residual_rmsnorm(partial, residual, self.post_norm_weight, eps)
            self._join(prefetch)
        else:
            normed, residual = gemm_ar(
                attn, self.attention.o.weight, residual=residual, norm_weight=self.post_norm_weight, eps=eps
            )
        gate_up = decode_product(
            normed, self._decode_weight("gate_up", self.mlp.gate_up.weight), self.decode_triton_gemm
        )
        gated = silu_mul(gate_up)  # one launch
        return decode_product(
            gated, self._decode_weight("down", self.mlp.down.weight), self.decode_triton_gemm
        ), residual

    def _decode_weight(self, name: str, weight: torch.Tensor) -> torch.Tensor:
        """``weight``, or with ``decode_k_major`` (and not ``decode_triton_gemm``, which reads the [K, N] weight)
        its K-major copy's view (``attention.k_major_weight``)."""
        if self.decode_k_major and not self.decode_triton_gemm:
            return k_major_weight(self._k_major, name, weight)
        return weight

    def _prefetch(self, weight: torch.Tensor, x: torch.Tensor) -> torch.cuda.Stream | None:
        """With ``decode_prefetch_bytes``: enqueue ``l2_prefetch`` of ``weight``'s first bytes. On a GPU on the
        side stream, after what the current stream has enqueued so far (a fork, which CUDA-graph capture records),
        and return that stream for ``_join``; under the CPU emulation inline (None); else nothing (None)."""
        if not self.decode_prefetch_bytes or not fused_kernels(x):
            return None
        sink = self._sinks.get(weight.device)
        if sink is None:
            on_gpu = weight.device.type == "cuda"
            programs = torch.cuda.get_device_properties(weight.device).multi_processor_count if on_gpu else 4
            sink = self._sinks[weight.device] = torch.empty(programs, dtype=torch.float32, device=weight.device)
        if weight.device.type != "cuda":
            l2_prefetch(weight, self.decode_prefetch_bytes, sink)
            return None
        side = _side_streams.get(weight.device)
        if side is None:
            side = _side_streams[weight.device] = torch.cuda.Stream(weight.device)
        side.wait_stream(torch.cuda.current_stream(weight.device))
        with torch.cuda.stream(side):
            l2_prefetch(weight, self.decode_prefetch_bytes, sink)
        return side

    @staticmethod
    def _join(side: torch.cuda.Stream | None) -> None:
        """The current stream waits for ``side``'s prefetch (the join of ``_prefetch``'s fork)."""
        if side is not None:
            torch.cuda.current_stream(side.device).wait_stream(side)

    def _check_input(self, what: str, x: torch.Tensor) -> None:
        """Raise LayerError unless ``x`` is [rows, H] in the weights' dtype, on their device."""
        name, weight = type(self).__name__, self.input_norm_weight
        if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.shape[1] != self.config.hidden_size:
            got = list(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise LayerError(f"{name}: {what} must be [rows, {self.config.hidden_size}], got {got}")
        if x.dtype != weight.dtype:
            raise LayerError(f"{name}: {what} is {x.dtype} but the weights are {weight.dtype}")
        if x.device != weight.device:
            raise LayerError(f"{name}: {what} is on {x.device} but the weights are on {weight.device}")

    def decode_hidden(
        self, hidden: torch.Tensor, positions: torch.Tensor | DecodePositions, cache: KVCache
    ) -> torch.Tensor:
        """``decode`` of one layer from and to plain hidden states: [B, H] in (the same on every rank), [B, H]
        out (the same on every rank)."""
        x, residual = self.decode(torch.zeros_like(hidden), hidden, positions, cache)
        return residual + all_reduce(x)


def _check_config(name: str, config: DecoderConfig) -> None:
    """Raise LayerError unless the fused norm can tile the hidden size."""
    if not isinstance(config, DecoderConfig):
        raise LayerError(f"{name}: config must be a DecoderConfig, got {type(config).__name__}")
    if not 1 <= config.hidden_size <= MAX_HIDDEN or config.hidden_size % 8:
        raise LayerError(
            f"{name}: hidden size {config.hidden_size} cannot be tiled by the fused all-reduce + RMSNorm (it takes "
            f"a multiple of 8 up to {MAX_HIDDEN})"
        )


def _check_full_weights(name: str, config: DecoderConfig, weights: Mapping[str, torch.Tensor]) -> None:
    """Raise LayerError naming a missing, extra, misshapen or differently typed full weight."""
    shapes = config.weight_shapes()
    missing = [key for key in shapes if key not in weights]
    extra = [key for key in weights if key not in shapes]
    if missing or extra:
        raise LayerError(f"{name}: weights missing {missing}, unexpected {extra} (config {config.name!r})")
    dtype = weights["q"].dtype if isinstance(weights["q"], torch.Tensor) else None
    for key, shape in shapes.items():
        weight = weights[key]
        if not isinstance(weight, torch.Tensor):
            raise LayerError(f"{name}: weight {key!r} must be a torch.Tensor, got {type(weight).__name__}")
        if tuple(weight.shape) != shape:
            raise LayerError(
                f"{name}: weight {key!r} must be {list(shape)} for {config.name!r}, got {list(weight.shape)}"
            )
        if weight.dtype != dtype:
            raise LayerError(f"{name}: weight {key!r} is {weight.dtype} but 'q' is {dtype} (one dtype for all)")

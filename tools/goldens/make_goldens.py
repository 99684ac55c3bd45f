#!/usr/bin/env python3
"""Golden reference outputs from Hugging Face transformers for Switchyard's golden tests.

Builds small random MoE models (mixtral, qwen2_moe, qwen3_moe, olmoe), each in float32 and in bfloat16
(the same random weights, cast), and writes under tests/golden/data/<arch>-<dtype>/:

  config.json                      the model's transformers config
  model.safetensors                weights in the per-expert naming of the published checkpoints
  (or model-0000{1,2}-of-00002.safetensors + model.safetensors.index.json for the sharded cases)
  logits_p{j}.npy                  float32 [T, vocab] logits of prompt j (all positions)
  golden.json                      prompts, greedy continuations and their margins

Run it through tools/goldens/make_goldens.sh, which sets up the pinned environment. The output is
deterministic: rerunning it rewrites byte-identical files (with the same pinned versions).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import sys
import tempfile
from collections import OrderedDict
from pathlib import Path

import numpy as np
import safetensors.torch
import torch
import transformers
from transformers import (
    MixtralConfig,
    MixtralForCausalLM,
    Qwen2MoeConfig,
    Qwen2MoeForCausalLM,
    OlmoeConfig,
    OlmoeForCausalLM,
    Qwen3MoeConfig,
    Qwen3MoeForCausalLM,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = REPO_ROOT / "tests" / "golden" / "data"

# Std of every weight matrix (embeddings, projections, routers, experts) and of the biases. Much
# larger than the usual 0.02 so the final logits have a std of about 1.5 rather than being
# near-uniform: with a [vocab, 64] lm_head over an RMS-normalised hidden state the logit std is
# about sqrt(64) * INIT_STD.
INIT_STD = 0.2
# RMSNorm weights are 1 + NORM_STD * N(0, 1), so a wrong (or missing) norm weight shows.
NORM_STD = 0.1
WEIGHT_SEED = 1234
PROMPT_SEED = 5678

PROMPT_LENGTHS = (5, 11, 17)
MAX_NEW_TOKENS = 8
MAX_PROMPT_ATTEMPTS = 100000

# A greedy continuation is only an exact test if no step is a near-tie. The margin between the
# top-1 and top-2 logit at every generated step must be at least this fraction of that step's
# logit std, and at least MIN_MARGIN_ABS. For bf16 the margins are taken on what the engine
# computes (the bf16-rounded weights with float32 activations), and transformers' bf16 run must
# produce the same continuation.
MARGIN_FRACTION = 0.05
MIN_MARGIN_ABS = 1e-3
# Expert selection is a discontinuity too: a near-tie between the k-th and (k+1)-th router logit
# would let float32 summation-order noise pick a different expert. Router logits at every
# position of prompt + continuation must be this far apart around the top-k cut (on the float32
# computation: the f32 model, or the bf16 weights with float32 activations).
MIN_ROUTER_MARGIN = 1e-3
# bf16 only: transformers rounds every activation to bf16, the engine keeps float32 activations
# over the same bf16 weights. Measured on these models the two differ by 5-12 % of the logit std
# at the worst logit of a prompt (and by far more when rounding flips an expert choice). A
# golden prompt keeps that difference within this fraction; the C++ test allows 0.2.
MAX_F32_COMPUTE_REL_DIFF_BF16 = 0.1

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
# Model directories written as two safetensors shards (with an index) rather than one file.
SHARDED = {("qwen2_moe", "f32"), ("mixtral", "bf16")}

COMMON = dict(
    vocab_size=256,
    hidden_size=64,
    num_attention_heads=4,
    num_key_value_heads=2,  # GQA: 2 query heads per kv head
    intermediate_size=96,  # dense MLP layers (Mixtral: every expert)
    max_position_embeddings=512,
    num_experts_per_tok=2,
    attention_dropout=0.0,
    output_router_logits=False,
    # No special tokens: generate() must not stop early on an EOS id, and the engine reads
    # eos_token_id from config.json to stop generation.
    bos_token_id=None,
    eos_token_id=None,
    pad_token_id=None,
    initializer_range=INIT_STD,
)

ARCHS = OrderedDict(
    mixtral=dict(
        config_cls=MixtralConfig,
        model_cls=MixtralForCausalLM,
        config=dict(
            COMMON,
            num_hidden_layers=3,
            head_dim=16,
            num_local_experts=4,
            rms_norm_eps=1e-5,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
            sliding_window=None,
            router_jitter_noise=0.0,
            tie_word_embeddings=False,
        ),
    ),
    qwen2_moe=dict(
        config_cls=Qwen2MoeConfig,
        model_cls=Qwen2MoeForCausalLM,
        config=dict(
            COMMON,
            num_hidden_layers=3,
            head_dim=16,
            moe_intermediate_size=48,
            shared_expert_intermediate_size=64,
            num_experts=4,
            norm_topk_prob=False,
            decoder_sparse_step=1,
            mlp_only_layers=[1],  # layer 1 is a dense MLP, layers 0 and 2 are sparse
            qkv_bias=True,
            rms_norm_eps=1e-5,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
            use_sliding_window=False,
            sliding_window=None,
            tie_word_embeddings=False,
        ),
    ),
    qwen3_moe=dict(
        config_cls=Qwen3MoeConfig,
        model_cls=Qwen3MoeForCausalLM,
        config=dict(
            COMMON,
            num_hidden_layers=4,
            head_dim=32,  # != hidden_size / num_attention_heads (16)
            moe_intermediate_size=48,
            num_experts=8,
            norm_topk_prob=True,
            # A layer is sparse iff it is not in mlp_only_layers and (idx + 1) % step == 0:
            # layers 1 and 3 are sparse, layers 0 and 2 dense.
            decoder_sparse_step=2,
            mlp_only_layers=[],
            attention_bias=False,
            rms_norm_eps=1e-6,
            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
            use_sliding_window=False,
            sliding_window=None,
            tie_word_embeddings=True,
        ),
    ),
)
# OLMoE (allenai/OLMoE-1B-7B's architecture): q and k RMS-normalised over each whole projection
# (not per head), every layer routed, top-k weights not renormalised, head_dim = hidden / heads.
ARCHS["olmoe"] = dict(
    config_cls=OlmoeConfig,
    model_cls=OlmoeForCausalLM,
    config=dict(
        COMMON,
        num_hidden_layers=3,
        num_key_value_heads=2,
        intermediate_size=48,  # every expert's width
        num_experts=6,
        norm_topk_prob=False,
        rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        attention_bias=False,
        clip_qkv=None,
        tie_word_embeddings=False,
    ),
)

# qwen3_moe with YaRN, as Qwen3's model cards enable it for long contexts (factor 4 over the
# pretraining context); scaled to this model's 512 positions so that the ramp between
# interpolated and extrapolated frequencies falls inside head_dim. The same weights as qwen3_moe
# (same shapes, same seed): the logits differ by the rotary embedding alone. float32 only.
ARCHS["qwen3_moe_yarn"] = dict(
    ARCHS["qwen3_moe"],
    family="qwen3_moe",
    dtypes=("f32",),
    config=dict(
        ARCHS["qwen3_moe"]["config"],
        rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                         "original_max_position_embeddings": 128},
    ),
)


def family(arch: str) -> str:
    """The architecture a model entry is built as (qwen3_moe_yarn is a qwen3_moe)."""
    return ARCHS[arch].get("family", arch)

# Generic PretrainedConfig keys that say nothing about the architecture.
CONFIG_KEYS_DROPPED = {
    "_name_or_path",
    "chunk_size_feed_forward",
    "id2label",
    "label2id",
    "is_encoder_decoder",
    "output_attentions",
    "output_hidden_states",
    "problem_type",
    "return_dict",
}


# --------------------------------------------------------------------------------------------
# Models


def sparse_layers(arch: str, config) -> list[bool]:
    """transformers' rule for which decoder layers route to experts."""
    arch = family(arch)
    if arch in ("mixtral", "olmoe"):
        return [True] * config.num_hidden_layers
    return [
        i not in config.mlp_only_layers and config.num_experts > 0 and (i + 1) % config.decoder_sparse_step == 0
        for i in range(config.num_hidden_layers)
    ]


def build_model(arch: str, dtype: torch.dtype = torch.float32):
    spec = ARCHS[arch]
    config = spec["config_cls"](**spec["config"])
    config.architectures = [spec["model_cls"].__name__]
    # Eager attention and the eager (per-expert loop) experts implementation: the plain reference
    # semantics, independent of which fused kernels this machine has.
    model = spec["model_cls"]._from_config(
        config, attn_implementation="eager", experts_implementation="eager", dtype=dtype
    )
    model.eval()
    return model


@torch.no_grad()
def with_weights(arch: str, dtype: torch.dtype, src):
    """A fresh model in `dtype` holding src's weights, rounded to `dtype`."""
    model = build_model(arch, dtype)
    model.load_state_dict({k: v.to(dtype) for k, v in src.state_dict().items()}, strict=True)
    return model


@torch.no_grad()
def randomize_(model) -> None:
    """Overwrites every parameter with seeded random values.

    transformers' default init leaves norms at 1 and biases at 0; a reference that only ever sees
    those values cannot catch an engine that ignores them, so they get noise too.
    """
    gen = torch.Generator().manual_seed(WEIGHT_SEED)
    # named_parameters() yields a tied parameter once (qwen3_moe: lm_head is embed_tokens).
    for name, p in model.named_parameters():
        noise = torch.randn(p.shape, generator=gen, dtype=torch.float32)
        if name.endswith("norm.weight"):  # input/post_attention/final/q/k RMSNorms
            p.copy_(1.0 + NORM_STD * noise)
        else:  # weight matrices, fused experts, routers, biases
            p.copy_(INIT_STD * noise)


def state_dict_to_per_expert(arch: str, model) -> "OrderedDict[str, torch.Tensor]":
    """The model's weights in the tensor naming of the published checkpoints.

    transformers 5 stores each layer's routed experts fused, as two 3-D parameters:
      mlp.experts.gate_up_proj [E, 2*I, H]  (rows [0, I) are the gate projection, [I, 2I) the up
                                             projection: the forward pass does .chunk(2, dim=-1)
                                             on x @ gate_up_proj[e].T)
      mlp.experts.down_proj    [E, H, I]
    and converts per-expert checkpoints into that layout when loading (conversion_mapping.py:
    MergeModulelist(dim=0) then Concatenate(dim=1)). Published checkpoints, and what the engine
    reads, have one 2-D nn.Linear weight per expert and projection:
      mixtral:    block_sparse_moe.experts.{e}.w1 (gate) / w3 (up) / w2 (down), router
                  block_sparse_moe.gate (transformers renames block_sparse_moe -> mlp on load)
      qwen*_moe, olmoe: mlp.experts.{e}.gate_proj / up_proj / down_proj, router mlp.gate
    """
    arch = family(arch)
    cfg = model.config
    tied = cfg.tie_word_embeddings
    out: OrderedDict[str, torch.Tensor] = OrderedDict()
    fused = re.compile(r"^model\.layers\.(\d+)\.mlp\.experts\.(gate_up_proj|down_proj)$")
    for name, t in model.state_dict().items():
        if tied and name == "lm_head.weight":
            continue  # tied to model.embed_tokens.weight; published tied checkpoints omit it
        m = fused.match(name)
        if m is None:
            if arch == "mixtral":
                name = re.sub(r"^(model\.layers\.\d+)\.mlp\.", r"\1.block_sparse_moe.", name)
            out[name] = t.detach().clone().contiguous()
            continue
        layer, kind = int(m.group(1)), m.group(2)
        prefix = f"model.layers.{layer}.block_sparse_moe" if arch == "mixtral" else f"model.layers.{layer}.mlp"
        names = {"gate": "w1", "up": "w3", "down": "w2"} if arch == "mixtral" else {
            "gate": "gate_proj", "up": "up_proj", "down": "down_proj"}
        for e in range(t.shape[0]):
            if kind == "gate_up_proj":
                inter = t.shape[1] // 2
                out[f"{prefix}.experts.{e}.{names['gate']}.weight"] = t[e, :inter].clone().contiguous()
                out[f"{prefix}.experts.{e}.{names['up']}.weight"] = t[e, inter:].clone().contiguous()
            else:
                out[f"{prefix}.experts.{e}.{names['down']}.weight"] = t[e].clone().contiguous()
    return out


def per_expert_to_state_dict(arch: str, model, tensors: dict) -> "OrderedDict[str, torch.Tensor]":
    """The inverse of state_dict_to_per_expert, written independently (by stacking per expert)."""
    arch = family(arch)
    cfg = model.config
    out: OrderedDict[str, torch.Tensor] = OrderedDict()
    for name, ref in model.state_dict().items():
        m = re.match(r"^model\.layers\.(\d+)\.mlp\.experts\.(gate_up_proj|down_proj)$", name)
        if m is None:
            src = name
            if cfg.tie_word_embeddings and name == "lm_head.weight":
                src = "model.embed_tokens.weight"
            if arch == "mixtral":
                src = re.sub(r"^(model\.layers\.\d+)\.mlp\.", r"\1.block_sparse_moe.", src)
            out[name] = tensors[src]
            continue
        layer, kind = int(m.group(1)), m.group(2)
        num_experts = ref.shape[0]
        if arch == "mixtral":
            p, gate, up, down = f"model.layers.{layer}.block_sparse_moe.experts", "w1", "w3", "w2"
        else:
            p, gate, up, down = f"model.layers.{layer}.mlp.experts", "gate_proj", "up_proj", "down_proj"
        if kind == "gate_up_proj":
            out[name] = torch.stack([
                torch.cat([tensors[f"{p}.{e}.{gate}.weight"], tensors[f"{p}.{e}.{up}.weight"]], dim=0)
                for e in range(num_experts)])
        else:
            out[name] = torch.stack([tensors[f"{p}.{e}.{down}.weight"] for e in range(num_experts)])
    return out


def expected_tensor_shapes(arch: str, config) -> dict[str, tuple[int, ...]]:
    """Every tensor a per-expert checkpoint of this architecture holds, written out from the
    published naming independently of transformers' module tree."""
    arch = family(arch)
    H, V = config.hidden_size, config.vocab_size
    D = getattr(config, "head_dim", None) or H // config.num_attention_heads
    q, kv = config.num_attention_heads * D, config.num_key_value_heads * D
    shapes = {"model.embed_tokens.weight": (V, H), "model.norm.weight": (H,)}
    if not config.tie_word_embeddings:
        shapes["lm_head.weight"] = (V, H)
    for i, sparse in enumerate(sparse_layers(arch, config)):
        L = f"model.layers.{i}"
        shapes[f"{L}.input_layernorm.weight"] = (H,)
        shapes[f"{L}.post_attention_layernorm.weight"] = (H,)
        shapes[f"{L}.self_attn.q_proj.weight"] = (q, H)
        shapes[f"{L}.self_attn.k_proj.weight"] = (kv, H)
        shapes[f"{L}.self_attn.v_proj.weight"] = (kv, H)
        shapes[f"{L}.self_attn.o_proj.weight"] = (H, q)
        if arch == "qwen2_moe":
            shapes[f"{L}.self_attn.q_proj.bias"] = (q,)
            shapes[f"{L}.self_attn.k_proj.bias"] = (kv,)
            shapes[f"{L}.self_attn.v_proj.bias"] = (kv,)
        if arch == "qwen3_moe":
            shapes[f"{L}.self_attn.q_norm.weight"] = (D,)
            shapes[f"{L}.self_attn.k_norm.weight"] = (D,)
        if arch == "olmoe":
            shapes[f"{L}.self_attn.q_norm.weight"] = (q,)
            shapes[f"{L}.self_attn.k_norm.weight"] = (kv,)
        if arch == "mixtral":
            E, I = config.num_local_experts, config.intermediate_size
            shapes[f"{L}.block_sparse_moe.gate.weight"] = (E, H)
            for e in range(E):
                shapes[f"{L}.block_sparse_moe.experts.{e}.w1.weight"] = (I, H)
                shapes[f"{L}.block_sparse_moe.experts.{e}.w3.weight"] = (I, H)
                shapes[f"{L}.block_sparse_moe.experts.{e}.w2.weight"] = (H, I)
        elif sparse:
            E = config.num_experts
            I = config.intermediate_size if arch == "olmoe" else config.moe_intermediate_size
            shapes[f"{L}.mlp.gate.weight"] = (E, H)
            for e in range(E):
                shapes[f"{L}.mlp.experts.{e}.gate_proj.weight"] = (I, H)
                shapes[f"{L}.mlp.experts.{e}.up_proj.weight"] = (I, H)
                shapes[f"{L}.mlp.experts.{e}.down_proj.weight"] = (H, I)
            if arch == "qwen2_moe":
                S = config.shared_expert_intermediate_size
                shapes[f"{L}.mlp.shared_expert.gate_proj.weight"] = (S, H)
                shapes[f"{L}.mlp.shared_expert.up_proj.weight"] = (S, H)
                shapes[f"{L}.mlp.shared_expert.down_proj.weight"] = (H, S)
                shapes[f"{L}.mlp.shared_expert_gate.weight"] = (1, H)
        else:
            I = config.intermediate_size
            shapes[f"{L}.mlp.gate_proj.weight"] = (I, H)
            shapes[f"{L}.mlp.up_proj.weight"] = (I, H)
            shapes[f"{L}.mlp.down_proj.weight"] = (H, I)
    return shapes


# --------------------------------------------------------------------------------------------
# Files


def config_dict(model, dtype_name: str) -> dict:
    d = model.config.to_dict()
    for key in CONFIG_KEYS_DROPPED:
        d.pop(key, None)
    d = {k: v for k, v in d.items() if not k.startswith("_")}
    d["dtype"] = {"f32": "float32", "bf16": "bfloat16"}[dtype_name]
    d["transformers_version"] = transformers.__version__
    return dict(sorted(d.items()))


def write_json(path: Path, obj) -> None:
    path.write_text(json.dumps(obj, indent=2) + "\n")


def write_checkpoint(out_dir: Path, tensors: "OrderedDict[str, torch.Tensor]", sharded: bool) -> list[str]:
    """Writes the safetensors file(s); returns the file names."""
    meta = {"format": "pt"}
    if not sharded:
        safetensors.torch.save_file(dict(tensors), str(out_dir / "model.safetensors"), metadata=meta)
        return ["model.safetensors"]
    # Two shards split at half the bytes, in state-dict order (layers stay mostly together).
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    files = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    shards: list[dict] = [{}, {}]
    acc = 0
    weight_map = {}
    for name, t in tensors.items():
        idx = 0 if acc < total // 2 else 1
        shards[idx][name] = t
        weight_map[name] = files[idx]
        acc += t.numel() * t.element_size()
    assert shards[0] and shards[1]
    for f, shard in zip(files, shards):
        safetensors.torch.save_file(shard, str(out_dir / f), metadata=meta)
    write_json(out_dir / "model.safetensors.index.json",
               {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))})
    return files


def read_checkpoint(out_dir: Path) -> dict[str, torch.Tensor]:
    index = out_dir / "model.safetensors.index.json"
    files = sorted(set(json.loads(index.read_text())["weight_map"].values())) if index.exists() else [
        "model.safetensors"]
    tensors: dict[str, torch.Tensor] = {}
    for f in files:
        part = safetensors.torch.load_file(str(out_dir / f))
        assert not (part.keys() & tensors.keys())
        tensors.update(part)
    return tensors


def save_npy(path: Path, a: np.ndarray) -> None:
    a = np.ascontiguousarray(a, dtype="<f4")
    with open(path, "wb") as f:
        np.save(f, a, allow_pickle=False)


# --------------------------------------------------------------------------------------------
# Reference computations


@torch.no_grad()
def prompt_logits(model, tokens: list[int]) -> torch.Tensor:
    """float32 [T, vocab] logits at every prompt position, computed in the model's dtype."""
    out = model(input_ids=torch.tensor([tokens]), use_cache=False)
    return out.logits[0].float()


def required_margin(step_std: float) -> float:
    return max(MARGIN_FRACTION * step_std, MIN_MARGIN_ABS)


@torch.no_grad()
def greedy_manual(model, tokens: list[int], n: int, check_margins: bool = False):
    """Greedy decoding by hand over the KV cache: (new tokens, top1-top2 margins, logit stds).

    With check_margins, gives up (returns None) at the first step whose margin is below
    required_margin(): most candidate prompts fail within a step or two, so this keeps the
    prompt search cheap.
    """
    out = model(input_ids=torch.tensor([tokens]), use_cache=True)
    new, margins, stds = [], [], []
    for _ in range(n):
        logits = out.logits[0, -1].float()
        top = torch.topk(logits, 2).values
        margins.append(float(top[0] - top[1]))
        stds.append(float(logits.std()))
        if check_margins and margins[-1] < required_margin(stds[-1]):
            return None
        nxt = int(torch.argmax(logits))
        new.append(nxt)
        out = model(input_ids=torch.tensor([[nxt]]), past_key_values=out.past_key_values, use_cache=True)
    return new, margins, stds


@torch.no_grad()
def greedy_generate(model, tokens: list[int], n: int) -> list[int]:
    ids = torch.tensor([tokens])
    out = model.generate(
        input_ids=ids,
        attention_mask=torch.ones_like(ids),
        max_new_tokens=n,
        min_new_tokens=n,
        do_sample=False,
        num_beams=1,
        eos_token_id=None,
        pad_token_id=None,
    )
    return out[0, len(tokens):].tolist()


@torch.no_grad()
def min_router_margin(model, tokens: list[int]) -> float:
    """Smallest gap, over sparse layers and positions, between the k-th and (k+1)-th router logit."""
    out = model(input_ids=torch.tensor([tokens]), use_cache=False, output_router_logits=True)
    k = model.config.num_experts_per_tok
    gaps = []
    for r in out.router_logits:
        top = torch.topk(r.float(), k + 1, dim=-1).values
        gaps.append((top[:, k - 1] - top[:, k]).min())
    return float(torch.stack(gaps).min())


def make_prompt(length: int, slot: int, attempt: int, vocab: int) -> list[int]:
    gen = torch.Generator().manual_seed(PROMPT_SEED + 1000 * slot + attempt)
    return torch.randint(0, vocab, (length,), generator=gen).tolist()


# --------------------------------------------------------------------------------------------


def check_checkpoint(arch: str, dtype_name: str, model, out_dir: Path, probe: list[int]) -> None:
    """The written per-expert checkpoint holds exactly the model's weights: bit-identical tensors
    and logits, both through our own inverse conversion and through transformers' from_pretrained
    (which converts published per-expert checkpoints with its own mapping), and the same tensors
    that transformers' save_pretrained writes."""
    dtype = DTYPES[dtype_name]
    tensors = read_checkpoint(out_dir)
    shapes = expected_tensor_shapes(arch, model.config)
    assert set(tensors) == set(shapes), (set(tensors) ^ set(shapes))
    for name, t in tensors.items():
        assert tuple(t.shape) == shapes[name], (name, t.shape, shapes[name])
        assert t.dtype == dtype, (name, t.dtype)
    ref = prompt_logits(model, probe)

    # transformers' own save_pretrained reverts its load-time conversion and writes the published
    # per-expert layout too: it must agree with ours tensor for tensor.
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp)
        theirs = read_checkpoint(Path(tmp))
    assert set(theirs) == set(tensors), set(theirs) ^ set(tensors)
    for name, t in tensors.items():
        assert torch.equal(theirs[name], t), name

    fresh = build_model(arch, dtype)
    fresh.load_state_dict(per_expert_to_state_dict(arch, fresh, tensors), strict=True)
    for (n1, a), (n2, b) in zip(model.state_dict().items(), fresh.state_dict().items()):
        assert n1 == n2 and torch.equal(a, b), n1
    assert torch.equal(prompt_logits(fresh, probe), ref), "inverse conversion changes the logits"

    loaded, info = ARCHS[arch]["model_cls"].from_pretrained(
        str(out_dir), dtype=dtype, attn_implementation="eager", experts_implementation="eager",
        output_loading_info=True)
    loaded.eval()
    problems = {k: v for k, v in info.items() if v}
    assert not problems, f"from_pretrained({out_dir}): {problems}"
    assert loaded.dtype == dtype
    for (n1, a), (n2, b) in zip(model.state_dict().items(), loaded.state_dict().items()):
        assert n1 == n2 and torch.equal(a, b), n1
    assert torch.equal(prompt_logits(loaded, probe), ref), "from_pretrained changes the logits"


def golden_prompt(model, model_f32_compute, slot: int, length: int) -> tuple[dict, int, torch.Tensor]:
    """Finds the first seeded prompt of this length whose greedy continuation has no near-tie."""
    vocab = model.config.vocab_size
    # The float32 computation the engine performs: the model itself for f32, the bf16 weights
    # with float32 activations for bf16.
    engine_like = model if model_f32_compute is None else model_f32_compute
    for attempt in range(MAX_PROMPT_ATTEMPTS):
        tokens = make_prompt(length, slot, attempt, vocab)
        result = greedy_manual(engine_like, tokens, MAX_NEW_TOKENS, check_margins=True)
        if result is None:
            continue  # a near-tie somewhere in the continuation
        greedy, margins, _ = result
        router_margin = min_router_margin(engine_like, tokens + greedy[:-1])
        if router_margin < MIN_ROUTER_MARGIN:
            continue
        logits = prompt_logits(model, tokens)
        std = float(logits.std(unbiased=False))  # population std, as the C++ test computes it
        entry = {"tokens": tokens, "logits": f"logits_p{slot}.npy", "greedy": greedy,
                 "min_greedy_margin": round(min(margins), 6), "logit_std": round(std, 6),
                 "min_router_margin": round(router_margin, 6)}
        if model_f32_compute is not None:
            # transformers' own bf16 run must agree with the float32-activation one.
            own_greedy, _, _ = greedy_manual(model, tokens, MAX_NEW_TOKENS)
            rel = float((prompt_logits(model_f32_compute, tokens) - logits).abs().max()) / std
            if rel > MAX_F32_COMPUTE_REL_DIFF_BF16 or own_greedy != greedy:
                continue
            entry["f32_compute_max_rel_diff"] = round(rel, 6)
        gen = greedy_generate(model, tokens, MAX_NEW_TOKENS)
        assert gen == greedy, f"generate() {gen} != manual greedy loop {greedy}"
        return entry, attempt, logits
    raise RuntimeError(f"no prompt of length {length} without near-ties in {MAX_PROMPT_ATTEMPTS} attempts")


# RoPE variants (modeling_rope_utils) on qwen3_moe configs, through the model's rotary module: each case's
# config.json keys, and the inverse frequencies and cos/sin factor transformers derives from them.
# Written to rope/frequencies.json; the C++ test parses each config and must derive the same
# float32 values bit for bit.
ROPE_CASES = [
    ("default", dict(head_dim=128, rope_theta=1e6, max_position_embeddings=40960)),
    ("linear", dict(head_dim=64, max_position_embeddings=8192,
                    rope_parameters={"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.5})),
    ("yarn, Qwen3's long-context setting", dict(
        head_dim=128, max_position_embeddings=131072,
        rope_parameters={"rope_type": "yarn", "rope_theta": 1e6, "factor": 4.0,
                         "original_max_position_embeddings": 32768})),
    ("yarn, transformers 4 rope_scaling with type and a top-level rope_theta", dict(
        head_dim=128, max_position_embeddings=40960, rope_theta=1e6,
        rope_scaling={"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768})),
    ("yarn, pretraining context defaulted to max_position_embeddings", dict(
        head_dim=128, max_position_embeddings=40960,
        rope_parameters={"rope_type": "yarn", "rope_theta": 1e6, "factor": 4.0})),
    ("yarn, factor null: the ratio of the context lengths", dict(
        head_dim=64, max_position_embeddings=163840,
        rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": None,
                         "original_max_position_embeddings": 4096})),
    ("yarn, DeepSeek's mscale and mscale_all_dim", dict(
        head_dim=64, max_position_embeddings=163840,
        rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 40.0,
                         "original_max_position_embeddings": 4096, "mscale": 0.707, "mscale_all_dim": 1.0,
                         "beta_fast": 32, "beta_slow": 1})),
    ("yarn, untruncated range, own betas and attention factor", dict(
        head_dim=96, max_position_embeddings=65536,
        rope_parameters={"rope_type": "yarn", "rope_theta": 500000.0, "factor": 8.0,
                         "original_max_position_embeddings": 8192, "truncate": False, "beta_fast": 16.0,
                         "beta_slow": 2.0, "attention_factor": 1.2})),
    ("llama3, Llama 3.1's setting", dict(
        head_dim=128, max_position_embeddings=131072,
        rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})),
    ("llama3, Llama 3.2's factor 32", dict(
        head_dim=64, max_position_embeddings=131072,
        rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})),
]


def write_rope_goldens(out_dir: Path) -> None:
    # The model's own rotary module: what its attention layers use.
    from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeRotaryEmbedding

    cases = []
    for name, keys in ROPE_CASES:
        config_json = dict(ARCHS["qwen3_moe"]["config"], model_type="qwen3_moe")
        config_json.pop("rope_parameters")
        config_json.update(keys)
        kwargs = {k: v for k, v in config_json.items() if k != "model_type"}
        config = Qwen3MoeConfig(**copy.deepcopy(kwargs))
        rotary = Qwen3MoeRotaryEmbedding(config=config)
        inv_freq, attention_scaling = rotary.inv_freq, rotary.attention_scaling
        assert inv_freq.dtype == torch.float32
        cases.append({"name": name, "config": config_json,
                      "inv_freq": [float(x) for x in inv_freq.tolist()],
                      "attention_scaling": float(attention_scaling)})
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(out_dir / "frequencies.json", {"transformers_version": transformers.__version__,
                                              "torch_version": torch.__version__.split("+")[0],
                                              "cases": cases})
    print(f"rope/frequencies.json  {len(cases)} cases")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output directory (default: %(default)s)")
    ap.add_argument("--only", nargs="*", default=None,
                    help="model dirs to write, e.g. mixtral-f32, or rope for rope/frequencies.json")
    args = ap.parse_args()

    # Determinism: one thread (reduction order does not depend on the machine's core count) and
    # deterministic kernels.
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)

    if not args.only or "rope" in args.only:
        write_rope_goldens(args.out / "rope")
    for arch in ARCHS:
        if args.only and not any(n.startswith(arch + "-") for n in args.only):
            continue
        base = build_model(arch, torch.float32)
        randomize_(base)
        for dtype_name, dtype in DTYPES.items():
            if dtype_name not in ARCHS[arch].get("dtypes", DTYPES):
                continue
            name = f"{arch}-{dtype_name}"
            if args.only and name not in args.only:
                continue
            # bf16: the same random weights, cast (both dtypes test the same function). The model
            # is built in bf16 the way from_pretrained(dtype=torch.bfloat16) builds it and then
            # given the cast weights; base.to(torch.bfloat16) would also round the float32 RoPE
            # inv_freq buffer to bf16, which transformers never does when loading a checkpoint.
            model = base if dtype == torch.float32 else with_weights(arch, dtype, base)
            f32_compute = None
            if dtype != torch.float32:
                # The engine's semantics: these bf16-rounded weights, float32 activations.
                f32_compute = with_weights(arch, torch.float32, model)

            out_dir = args.out / name
            out_dir.mkdir(parents=True, exist_ok=True)
            for old in out_dir.iterdir():  # no stale shards or logits from an earlier layout
                if old.is_file():
                    old.unlink()

            write_json(out_dir / "config.json", config_dict(model, dtype_name))
            files = write_checkpoint(out_dir, state_dict_to_per_expert(arch, model), (arch, dtype_name) in SHARDED)
            check_checkpoint(arch, dtype_name, model, out_dir, make_prompt(24, 99, 0, model.config.vocab_size))

            prompts, attempts = [], []
            for slot, length in enumerate(PROMPT_LENGTHS):
                entry, attempt, logits = golden_prompt(model, f32_compute, slot, length)
                save_npy(out_dir / entry["logits"], logits.numpy())
                prompts.append(entry)
                attempts.append(attempt)

            golden = {"arch": family(arch), "dtype": dtype_name,
                      "transformers_version": transformers.__version__,
                      "torch_version": torch.__version__.split("+")[0],
                      "prompts": prompts}
            write_json(out_dir / "golden.json", golden)
            size = sum(f.stat().st_size for f in out_dir.iterdir())
            print(f"{name:16s} {size / 1024:7.1f} KiB  files={files}")
            for p, attempt in zip(prompts, attempts):
                print(f"    T={len(p['tokens']):2d} attempt={attempt:2d} greedy={p['greedy']} "
                      f"logit_std={p['logit_std']:.3f} min_margin={p['min_greedy_margin']:.4f} "
                      f"router_margin={p['min_router_margin']:.4f}"
                      + (f" f32_compute_rel={p['f32_compute_max_rel_diff']:.4f}"
                         if "f32_compute_max_rel_diff" in p else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())

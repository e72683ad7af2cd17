"""Training transformers causal LMs with txl's own loop (the `hf` extra): the same stream,
curriculum, recall evaluation, checkpoints, resume and torchrun as Transformer-XL; only the model
and its checkpoint format differ (`txl.architecture`).

A config's `arch` table picks the model: `family` (llama | mistral | mamba | mamba2 | rwkv) and
the family's own keys (llama: `rope_theta`; mistral: `sliding_window`, `rope_theta`; mamba:
`state_size`, `expand`, `conv_kernel`; mamba2: those and `head_dim`, `n_groups`, `chunk_size`;
rwkv: `attention_hidden_size`). Sizes come from the `model` table, as for Transformer-XL:
n_layer, d_model (hidden size), n_head, d_inner (the feed-forward; RWKV's too), vocab_size,
init_std (`initializer_range`), tgt_len (the training row length). `mem_len` must be 0: nothing
is carried from segment to segment (each segment is an independent training row).

What a segment sees:
- attention families: key k is visible to query q when k <= q, k is not padding, doc(k) == doc(q)
  (documents are reset, as Transformer-XL trains) and q − k < sliding_window (mistral); an
  explicit 4-D additive mask, built in torch on the model's device, with position ids 0 … T − 1
  (rotary: only distances matter, so this equals the offsets the adapter uses);
- recurrent families (mamba, mamba2, rwkv): one forward from a fresh state over the segment. A state
  cannot be reset in the middle of one forward, so a document that follows another in a segment
  starts from the state the previous one left: the model learns to forget at `<eod>`, as language
  models trained on concatenated documents do. Mamba's scan runs through `mambapy`'s parallel
  scan when installed (transformers' `use_mambapy`; its sequential loop is ~50x slower to train on
  a CPU), and the config records it either way. Mamba-2's is transformers' chunked scan in torch
  (matrix products per chunk: ~5,000 tokens/s on one CPU thread at d_model 128, where Mamba's
  parallel scan gives ~1,100).

A checkpoint is a `save_pretrained` directory (config.json, model.safetensors,
generation_config.json) plus the synth tokenizer (tokenizer.json), the training record
(training.json) and, for a resumable one, train_state.pt and rng.json; the final model also keeps
metrics.jsonl and COMMAND. `probe run --model DIR` loads it through the transformers adapter.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from probes.adapters.families import families
from txl import files
from txl.checkpoint import CheckpointError
from txl.io import atomic_write, file_sha256, follow_umask, replace_dir

ATTENTION_FAMILIES = families(trainable=True, recurrent=False)
RECURRENT_FAMILIES = families(trainable=True, recurrent=True)
FAMILIES = ATTENTION_FAMILIES + RECURRENT_FAMILIES
FAMILY_KEYS = {
    "llama": ("rope_theta",),
    "mistral": ("sliding_window", "rope_theta"),
    "mamba": ("state_size", "expand", "conv_kernel"),
    "mamba2": ("state_size", "expand", "conv_kernel", "head_dim", "n_groups", "chunk_size"),
    "rwkv": ("attention_hidden_size",),
}
TRAINING_FILE = "training.json"


def check_arch(arch: dict[str, Any], model: Any) -> None:
    """ValueError (one line) unless `arch` names a family this module trains with `model`
    (TXLConfig) sizes it can use."""
    family = arch.get("family")
    if family not in FAMILIES:
        raise ValueError(f"bad value for arch.family: {family!r}; expected {' | '.join(FAMILIES)}")
    for k, v in arch.items():
        if k != "family" and k not in FAMILY_KEYS[family]:
            known = ", ".join(FAMILY_KEYS[family]) or "none"
            raise ValueError(f"unknown key arch.{k} for family {family}; known: {known}")
        if k != "family" and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
            raise ValueError(f"bad value for arch.{k}: {v!r}; expected a positive integer")
    if model.mem_len != 0:
        raise ValueError(
            f"bad value for model.mem_len: {model.mem_len}; a {family} model carries nothing "
            "from segment to segment in training: set it to 0"
        )
    if model.dropout or model.dropatt:
        raise ValueError(f"model.dropout and model.dropatt must be 0 for a {family} model")
    if family == "mamba2":
        inner = arch.get("expand", 2) * model.d_model
        if inner % arch.get("head_dim", 32):
            raise ValueError(
                f"bad value for arch.head_dim: {arch.get('head_dim', 32)}; it must divide "
                f"expand × d_model = {inner}"
            )


def hf_config(arch: dict[str, Any], model: Any):
    """The transformers config of `arch` at `model`'s sizes."""
    import transformers as tf

    family = arch["family"]
    extra = {k: v for k, v in arch.items() if k != "family"}
    common = dict(
        vocab_size=model.vocab_size,
        hidden_size=model.d_model,
        num_hidden_layers=model.n_layer,
        initializer_range=model.init_std,
        tie_word_embeddings=True,
    )
    if family in ATTENTION_FAMILIES:
        cls = tf.MistralConfig if family == "mistral" else tf.LlamaConfig
        return cls(
            intermediate_size=model.d_inner,
            num_attention_heads=model.n_head,
            num_key_value_heads=model.n_head,
            head_dim=model.d_head,
            max_position_embeddings=max(4096, 4 * model.tgt_len),
            **common,
            **extra,
        )
    if family == "mamba2":
        settings = {"state_size": 16, "expand": 2, "conv_kernel": 4, "head_dim": 32, **extra}
        settings.setdefault("n_groups", 1)
        settings.setdefault("chunk_size", 64)
        inner = settings["expand"] * model.d_model  # check_arch: head_dim divides it
        return tf.Mamba2Config(num_heads=inner // settings["head_dim"], **settings, **common)
    if family == "mamba":
        import importlib.util

        return tf.MambaConfig(
            use_mambapy=importlib.util.find_spec("mambapy") is not None,
            **{"state_size": 16, "expand": 2, "conv_kernel": 4, **extra},
            **common,
        )
    return tf.RwkvConfig(
        intermediate_size=model.d_inner,
        attention_hidden_size=extra.get("attention_hidden_size", model.d_model),
        context_length=max(4096, 4 * model.tgt_len),
        **common,
    )


@dataclass
class SegmentOutput:
    nll: torch.Tensor  # (B, T), float32
    memory: None = None  # nothing is carried


class SegmentLM(nn.Module):
    """A transformers causal LM as txl's segment model (module docstring)."""

    def __init__(self, lm: nn.Module, family: str) -> None:
        super().__init__()
        self.lm = lm
        self.family = family
        sw = getattr(lm.config, "sliding_window", None)
        self.sliding_window = int(sw) if family == "mistral" and sw else None

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def attention_mask(self, doc_ids: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """(B, 1, T, T) additive mask: causal ∧ same document ∧ not padding ∧ the window."""
        T = doc_ids.shape[1]
        q = torch.arange(T, device=doc_ids.device)
        dist = q[:, None] - q[None, :]
        vis = (dist >= 0)[None] & (doc_ids[:, None, :] >= 0)
        vis &= doc_ids[:, None, :] == doc_ids[:, :, None]
        if self.sliding_window is not None:
            vis &= (dist < self.sliding_window)[None]
        vis |= (doc_ids[:, :, None] < 0) & (dist == 0)[None]  # no empty softmax row
        mask = torch.zeros(vis.shape, dtype=dtype, device=doc_ids.device)
        return mask.masked_fill_(~vis, torch.finfo(dtype).min)[:, None]

    def forward(self, inputs, *, doc_ids, memory=None, targets) -> SegmentOutput:
        if self.family in ATTENTION_FAMILIES:
            B, T = inputs.shape
            pos = torch.arange(T, device=inputs.device).expand(B, T)
            dtype = next(self.lm.parameters()).dtype
            if torch.is_autocast_enabled(inputs.device.type):
                dtype = torch.get_autocast_dtype(inputs.device.type)
            logits = self.lm(
                input_ids=inputs,
                attention_mask=self.attention_mask(doc_ids, dtype),
                position_ids=pos,
                use_cache=False,
            ).logits
        else:
            logits = self.lm(input_ids=inputs, use_cache=False).logits
        nll = nn.functional.cross_entropy(
            logits.float().flatten(0, 1), targets.flatten(), reduction="none"
        )
        return SegmentOutput(nll.view(targets.shape))


@dataclass
class LoadedCheckpoint:
    model: SegmentLM
    train_state: dict | None
    rng: dict | None
    training: dict


class HFArchitecture:
    """A transformers family trained by txl's loop, saved with `save_pretrained`."""

    def __init__(self, arch: dict[str, Any]) -> None:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # stderr belongs to the run's own progress
        self.arch = dict(arch)
        self.family = arch["family"]
        self.name = f"transformers-{self.family}"

    def build(self, config: Any) -> SegmentLM:
        from transformers import AutoModelForCausalLM

        check_arch(self.arch, config.model)
        impl = "sdpa" if self.family in ATTENTION_FAMILIES else None
        lm = AutoModelForCausalLM.from_config(
            hf_config(self.arch, config.model),
            **({"attn_implementation": impl} if impl else {}),
        )
        return SegmentLM(lm, self.family)

    def save(self, path, model, *, tokenizer, training, train_state=None, rng=None,
             extra_files=None) -> str:  # fmt: skip

        def write(tmp: Path) -> None:
            model.lm.save_pretrained(tmp, safe_serialization=True)
            for p in tmp.iterdir():
                follow_umask(p)
            atomic_write(tmp / "tokenizer.json", json.dumps(tokenizer, sort_keys=True) + "\n")
            atomic_write(tmp / TRAINING_FILE, json.dumps(training, sort_keys=True, indent=2))
            if train_state is not None:
                torch.save(train_state, tmp / "train_state.pt")
            if rng is not None:
                atomic_write(tmp / "rng.json", json.dumps(rng, sort_keys=True))
            for name, text in (extra_files or {}).items():
                atomic_write(tmp / name, text)

        target = Path(path)
        if target.exists() and not (target / "config.json").is_file():
            raise ValueError(f"refusing to replace {target}: it is not a model directory")
        replace_dir(target, write)
        return file_sha256(target / "model.safetensors")

    def load(self, path, device) -> LoadedCheckpoint:
        from transformers import AutoModelForCausalLM

        p = Path(path)
        try:
            lm = AutoModelForCausalLM.from_pretrained(
                str(p), local_files_only=True, trust_remote_code=False, use_safetensors=True
            )
            state = p / "train_state.pt"
            train_state = torch.load(state, weights_only=True) if state.exists() else None
            rng = files.read_json(p / "rng.json") if (p / "rng.json").exists() else None
            training = files.read_json(p / TRAINING_FILE)
        except Exception as e:  # any damage means: not resumable from here
            msg = " ".join(str(e).split())[:200]
            raise CheckpointError(f"{p} cannot be loaded ({type(e).__name__}: {msg})") from None
        return LoadedCheckpoint(SegmentLM(lm.to(device), self.family), train_state, rng, training)

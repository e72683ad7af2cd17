"""Helpers for tests and demos: a tiny untrained checkpoint that speaks a synth language.

    from probes.testing import tiny_checkpoint
    tiny_checkpoint(tmp_path / "m", mem_len=0)     # then: probe run fact-swap --model tmp_path/m

Never the shipped model: tests must not depend on a trained artifact.
"""

from __future__ import annotations

from pathlib import Path

from probes.adapters.families import families
from synth.language import Language
from synth.text.default_corpus import default_corpus
from synth.text.tokenizer import train_bpe
from txl.checkpoint import save_checkpoint
from txl.config import TXLConfig
from txl.model import TransformerXL


def tiny_checkpoint(
    path: str | Path,
    *,
    mem_len: int = 16,
    tgt_len: int = 16,
    n_layer: int = 2,
    d_model: int = 16,
    n_head: int = 2,
    seed: int = 0,
    language=None,
    init_std: float = 0.5,
    tokenizer=None,
) -> Path:
    """Save a randomly initialised TransformerXL (d_model 16 by default) with `language`'s JSON
    as its tokenizer (default: synth's Language.default()), or with `tokenizer`'s (a
    `synth.text.tokenizer.TextTokenizer`: a model of real text, as `probe train --text` makes).
    A large `init_std` makes an untrained model's attention far from uniform, so deltas inside
    its reach are clearly non-zero."""
    import torch

    lang = tokenizer or language or Language.default()
    torch.manual_seed(seed)
    config = TXLConfig(
        vocab_size=lang.vocab.size,
        n_layer=n_layer,
        d_model=d_model,
        n_head=n_head,
        d_head=d_model // n_head,
        d_inner=2 * d_model,
        tgt_len=tgt_len,
        mem_len=mem_len,
        init_std=init_std,
    )
    model = TransformerXL(config)
    save_checkpoint(
        path, model, tokenizer=lang.to_json(), training={"note": "untrained, for tests"}
    )
    return Path(path)


TRANSFORMERS_FAMILIES = families(tiny_fixture=True, recurrent=False)
RECURRENT_FAMILIES = families(tiny_fixture=True, recurrent=True)


def tiny_transformers(
    path: str | Path,
    family: str = "llama",
    *,
    n_layer: int = 2,
    hidden: int = 32,
    n_head: int = 4,
    max_positions: int = 1024,
    sliding_window: int = 24,
    seed: int = 0,
    init_std: float = 0.3,
    vocab_size: int | None = None,
    tokenizer=None,
) -> Path:
    """Save a randomly initialised transformers causal LM (needs the `hf` extra) that reads the
    synth language's ids (vocab = Language.default()'s size unless given) with save_pretrained
    (safetensors): `gpt2` (learned absolute positions, n_positions = max_positions), `llama`
    (rotary, grouped KV heads), `mistral` (rotary with `sliding_window`), `gemma3` (rotary,
    its first layer with `sliding_window` and its last without: Gemma 3's local and global
    layers, `n_layer` of them alternating), or a recurrent one:
    `mamba` (selective state space, state size 8) or `rwkv` (max_positions and sliding_window
    do not apply to them). With `tokenizer` (a `synth.text.tokenizer.TextTokenizer`, e.g.
    `small_bpe()`) the model reads that tokenizer's ids instead, and the directory keeps it as
    a model with its own tokenizer does (tokenizer.json, tokenizer_config.json naming its
    separator as eos). Nothing is downloaded. From a shell:

        python -c "from probes.testing import tiny_transformers as t; t('runs/tiny-llama', 'llama')"
        python -c "from probes.testing import tiny_transformers as t; t('runs/tiny-mamba', 'mamba')"
        python -c "from probes.testing import tiny_transformers as t, small_bpe; t('runs/tiny-own', 'llama', tokenizer=small_bpe())"
    """
    import torch
    import transformers as tf

    vocab = vocab_size or (tokenizer.vocab.size if tokenizer else Language.default().vocab.size)
    common = dict(vocab_size=vocab, initializer_range=init_std)
    if family == "gpt2":
        config = tf.GPT2Config(
            n_embd=hidden, n_layer=n_layer, n_head=n_head, n_positions=max_positions, **common
        )
        cls = tf.GPT2LMHeadModel
    elif family in ("llama", "mistral"):
        kw = dict(
            hidden_size=hidden,
            intermediate_size=2 * hidden,
            num_hidden_layers=n_layer,
            num_attention_heads=n_head,
            num_key_value_heads=max(1, n_head // 2),
            max_position_embeddings=max_positions,
            **common,
        )
        if family == "mistral":
            config, cls = (
                tf.MistralConfig(sliding_window=sliding_window, **kw),
                tf.MistralForCausalLM,
            )
        else:
            config, cls = tf.LlamaConfig(**kw), tf.LlamaForCausalLM
    elif family == "gemma3":
        kinds = ("sliding_attention", "full_attention")
        config = tf.Gemma3TextConfig(
            hidden_size=hidden,
            intermediate_size=2 * hidden,
            num_hidden_layers=n_layer,
            num_attention_heads=n_head,
            num_key_value_heads=max(1, n_head // 2),
            head_dim=hidden // n_head,
            max_position_embeddings=max_positions,
            sliding_window=sliding_window,
            layer_types=[kinds[i % 2] if i < n_layer - 1 else kinds[1] for i in range(n_layer)],
            **common,
        )
        cls = tf.Gemma3ForCausalLM
    elif family == "mamba":
        config = tf.MambaConfig(
            hidden_size=hidden,
            num_hidden_layers=n_layer,
            state_size=8,
            expand=2,
            conv_kernel=4,
            **common,
        )
        cls = tf.MambaForCausalLM
    elif family == "rwkv":
        config = tf.RwkvConfig(
            hidden_size=hidden,
            num_hidden_layers=n_layer,
            attention_hidden_size=hidden,
            intermediate_size=2 * hidden,
            context_length=max_positions,
            **common,
        )
        cls = tf.RwkvForCausalLM
    else:
        names = ", ".join(TRANSFORMERS_FAMILIES + RECURRENT_FAMILIES)
        raise ValueError(f"family {family!r}: use one of {names}")
    torch.manual_seed(seed)
    model = cls(config).eval()
    path = Path(path)
    model.save_pretrained(path)
    if tokenizer is not None:
        import json

        from tokenizers import Tokenizer

        raw = Tokenizer.from_str(json.dumps(tokenizer.to_json()))
        tf.PreTrainedTokenizerFast(
            tokenizer_object=raw, eos_token=tokenizer.separator
        ).save_pretrained(path)
    return path


def small_bpe(vocab_size: int = 512):
    """A byte-level BPE (`synth.text.tokenizer.train_bpe`) of `vocab_size` tokens trained on the
    default corpus's training documents: a tokenizer for tiny text models (needs the `text`
    extra)."""

    return train_bpe((d.text for d in default_corpus("train").documents), vocab_size)

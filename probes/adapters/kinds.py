"""The built-in model kinds (`probes.api.kinds`), registered without importing torch: each
names its detector and loader as `module:function`, imported when a model of the kind is met.

Detection tries gguf, then transformers, and a path neither claims is a Transformer-XL
checkpoint, whose loader names what is missing. `hf:PATH` reads PATH as a GGUF file or a
transformers directory only; `planted:FIELD=V,…` builds a planted model (no torch)."""

from __future__ import annotations

from probes.api.kinds import register_model_kind

# --cache chooses the Transformer-XL cached evaluator's memory; a transformers model's stream
# evaluator keeps keys and values already.
NO_CACHE = (
    "--cache applies to a Transformer-XL checkpoint's cached evaluator, not to the {kind} model "
    "{path!r} (its stream evaluator keeps keys and values already); drop --cache"
)

register_model_kind("planted", prefix="planted:", load="probes.adapters.planted:from_spec")

register_model_kind(
    "gguf",
    prefix="hf:",
    detect="probes.adapters.hf_dir:holds_gguf",
    load="probes.adapters.hf_load:load",
    refuses={"cache": NO_CACHE},
)

register_model_kind(
    "transformers",
    prefix="hf:",
    detect="probes.adapters.hf_dir:is_transformers_model",
    check="probes.adapters.hf_dir:read_config",
    recurrent="probes.adapters.hf_dir:is_recurrent",
    load="probes.adapters.hf_load:load",
    refuses={"cache": NO_CACHE},
)

register_model_kind(
    "txl",
    fallback=True,
    load="probes.adapters.txl:load",
    refuses={
        "cache_positions": (
            "--cache-positions applies to a rotary transformers model's stream or sinks "
            "evaluator, not to the Transformer-XL checkpoint {path!r} (its relative positions "
            "have no position to re-index)"
        ),
        "sinks": (
            "--sinks applies to a transformers model's --evaluator sinks, not to the "
            "Transformer-XL checkpoint {path!r}"
        ),
    },
)

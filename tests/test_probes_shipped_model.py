"""The shipped models (probes/models/: the default, its no-recurrence sibling default-mem0, the
ablation group and the deep models): they load, speak the language the probes write in, are what
their COMMAND's preset trains, carry a compact training log, and `probe run fact-swap --quick
--model default` runs. Skipped while a model is not there (it is trained separately and committed later); the
other tests never use it."""

import json

import pytest
from click.testing import CliRunner

from probes.framework.models import PACKAGE_MODELS
from synth.language import Language

NAMES = ("default", "default-mem0", "shaw", "abs", "learned-mem0", "deep", "deep4")
PRESETS = {"default": "tiny", "default-mem0": "tiny-mem0", "shaw": "tiny-shaw", "abs": "tiny-abs",
           "learned-mem0": "tiny-learned-mem0", "deep": "deep", "deep4": "deep4"}  # fmt: skip


def shipped(name):
    path = PACKAGE_MODELS / name
    if not path.is_dir():
        pytest.skip(f"probes/models/{name} is not shipped yet")
    return path


@pytest.mark.parametrize("name", NAMES)
def test_shipped_model_loads_and_its_tokenizer_is_a_synth_language(name):
    from probes.adapters import txl as adapters

    lm = adapters.load(shipped(name), device="cpu")
    lang = Language.from_json(lm.tokenizer)
    lang.check_compatible(lm.tokenizer, what=f"shipped model {name!r}")
    assert lm.info.vocab_size >= lang.vocab.size
    assert lm.info.sha256 and lm.info.id.startswith(name)


@pytest.mark.parametrize("name", NAMES)
def test_shipped_model_speaks_the_default_language(name):
    """`probe run PROBE` without --language writes Language.default(): the shipped model must
    read it, or the first command of the README fails."""
    from probes.adapters import txl as adapters

    lm = adapters.load(shipped(name), device="cpu")
    assert Language.from_json(lm.tokenizer) == Language.default()


def test_shipped_pair_is_a_model_and_its_no_recurrence_sibling():
    from probes.adapters import txl as adapters

    main = adapters.load(shipped("default"), device="cpu")
    sibling = adapters.load(shipped("default-mem0"), device="cpu")
    assert main.info.train_mem_len > 0 and sibling.info.train_mem_len == 0
    assert Language.from_json(main.tokenizer) == Language.from_json(sibling.tokenizer)


def _training_config(name):
    return json.loads((shipped(name) / "config.json").read_text())["training"]["config"]


def test_shipped_sibling_has_the_same_recipe_and_budget_at_mem_0():
    from txl.train_config import differences

    main, sibling = _training_config("default"), _training_config("default-mem0")
    assert differences(main, sibling) == ["eval.mem_len", "model.mem_len"]
    assert sibling["model"]["mem_len"] == 0 and main["steps"] == sibling["steps"]


@pytest.mark.parametrize(("name", "preset"), PRESETS.items())
def test_shipped_model_is_what_its_preset_trains(name, preset):
    """`nox -s train` (probe train --preset P --threads 1) retrains exactly this configuration."""
    from probes.training.presets import resolve_dict
    from txl.train_config import TrainConfig, differences

    shipped_config = _training_config(name)
    resolved = resolve_dict(preset, overrides=["threads=1"])
    resolved.pop("preset")
    resolved["model"]["vocab_size"] = shipped_config["model"]["vocab_size"]
    assert differences(TrainConfig.from_dict(resolved).to_dict(), shipped_config) == []


def test_shipped_default_meets_the_bars_at_its_last_evaluation():
    """The bars the default model is shipped on, read from its own metrics.jsonl (a retrain
    that is copied in must meet them too): recall >= 95 % where the fact is in the answer's
    direct window, beyond the training span at --mem 640 an interval above twice chance, filler
    NLL within 5 % of the entropy rate; and the directory stays <= 10 MB."""
    path = shipped("default")
    records = [json.loads(x) for x in (path / "metrics.jsonl").read_text().splitlines()]
    last = [r for r in records if r["kind"] == "eval"][-1]
    mem_len = _training_config("default")["model"]["mem_len"]
    chance = 1 / len(Language.default().values)

    assert last["recall_direct_acc"] >= 0.95
    within_mem = [b for b in last["recall"] if b["hi"] <= mem_len]  # every fact in the window
    assert within_mem and all(b["acc"] >= 0.95 for b in within_mem)
    beyond = [b for b in last["recall_mem640"] if not b["inside"]]
    assert beyond and all(b["acc_ci95"][0] > 2 * chance for b in beyond)
    assert last["filler_nll"] <= 1.05 * last["filler_entropy"]
    assert sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) <= 10 * 2**20


def test_fact_swap_quick_runs_on_the_shipped_model(tmp_path):
    path = shipped("default")
    from probes.adapters import txl as adapters
    from probes.cli.main import cli

    lang_args = []
    if Language.from_json(adapters.load(path, device="cpu").tokenizer) != Language.default():
        lang_args = ["--language", str(path)]  # its own language (the test above says why not)
    r = CliRunner().invoke(
        cli,
        ["run", "fact-swap", "--quick", "--model", "default", "--device", "cpu",
         "--out", str(tmp_path), "--json", *lang_args],
        catch_exceptions=False,
    )  # fmt: skip
    assert r.exit_code == 0, (r.stdout[-500:], r.stderr)  # its own checks pass too
    doc = json.loads(r.stdout)
    assert doc["probe"] == "fact-swap"
    assert doc["model"]["path"] == "default"  # a shipped model is recorded by its name
    assert doc["n_pairs"] > 0 and doc["run_dir"].startswith(str(tmp_path))


@pytest.mark.parametrize("name", NAMES)
def test_shipped_model_names_its_command_and_carries_a_compact_log(name):
    from txl.metrics_log import COLUMNS_KIND, MetricsLog

    path = shipped(name)
    command = (path / "COMMAND").read_text()
    assert command.startswith("probe train ") and f"--preset {PRESETS[name]} " in command
    raw = [json.loads(x) for x in (path / "metrics.jsonl").read_text().splitlines()]
    assert sum(r["kind"] == COLUMNS_KIND for r in raw) == 1  # compact: per-step columns packed
    records = MetricsLog(path / "metrics.jsonl").records()
    steps = [r["step"] for r in records if r["kind"] == "train"]
    assert steps == list(range(1, _training_config(name)["steps"] + 1))
    assert (path / "metrics.jsonl").stat().st_size < 1_000_000

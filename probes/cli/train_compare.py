"""`probe train-compare A B`: how far training run B (a retrain) landed from run A (say, the
shipped model); probes/training/compare.py does the work.

Exit codes: 0 reproduced (both runs complete; identical or within tolerance), 1 not (the runs
differ, one is shorter, or they share no evaluation), 2 bad input (one line).
Imports nothing heavy at module level: `probe --help` stays instant."""

from __future__ import annotations

import math

import click

from probes.api.params import number_type
from probes.cli.errors import EXIT_CHECK, BadInput
from probes.training.compare import DEFAULT_ACC_TOL, DEFAULT_NLL_TOL

HEADLINE_FIELDS = ("nll", "filler_nll", "filler_floor", "filler_entropy")


def tolerance_option(flag: str, default: float, what: str):
    return click.option(
        flag,
        type=number_type(False, 0),
        default=default,
        show_default=True,
        help=f"Largest |difference| of {what} at the last common evaluation.",
    )


@click.command(
    "train-compare",
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.argument("run_a", metavar="A")
@click.argument("run_b", metavar="B")
@tolerance_option("--nll-tol", DEFAULT_NLL_TOL, "an NLL (nats)")
@tolerance_option("--acc-tol", DEFAULT_ACC_TOL, "a recall accuracy")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def train_compare_command(
    run_a: str, run_b: str, nll_tol: float, acc_tol: float, as_json: bool
) -> None:
    """Compare the metrics.jsonl of two training runs: per-step losses bit for bit, and every
    held-out evaluation field at the steps both evaluated. A and B are run directories, model
    directories or shipped model names (`default`).

    \b
    Verdict, from the last common evaluation: identical (every loss and field equal),
    within tolerance (held-out NLLs within --nll-tol, recall accuracies within --acc-tol,
    counts equal; interval bounds and per-bucket answer NLLs are shown, not judged), or
    differs; "so far" when one run trained fewer steps than the other. Exit 0 only when both
    runs are complete and the verdict is identical or within tolerance, else 1.
    """
    from probes.training.compare import compare_runs

    try:
        result = compare_runs(_resolve(run_a), _resolve(run_b), nll_tol=nll_tol, acc_tol=acc_tol)
    except ValueError as e:  # RunMetricsError, or a NaN tolerance
        raise BadInput(str(e)) from None
    if as_json:
        import json

        from txl.io import json_safe

        click.echo(json.dumps(json_safe(result.to_dict()), sort_keys=True, allow_nan=False))
    else:
        _print(result)
    if not result.reproduced:
        click.get_current_context().exit(EXIT_CHECK)


def _resolve(name: str) -> str:
    """A shipped model's name (`default`) stands for its directory; anything else is a path."""
    from probes.api.probe_base import ProbeInputError
    from probes.framework.models import resolve_model_path

    try:
        return str(resolve_model_path(name))
    except ProbeInputError:
        return name  # compare_runs says what is wrong with it


def _num(v: float | None, digits: int = 5) -> str:
    """A recorded value: fixed point where that stays short, else in exponent form (1e308 is
    not 309 digits); '-' for none (null or non-finite)."""
    if v is None or not math.isfinite(v):
        return "-"
    return f"{v:.{digits}f}" if abs(v) < 1e6 else f"{v:.{digits - 1}e}"


def _print(r) -> None:
    from functools import partial

    from probes.report.tables import console

    say = partial(console().print, markup=False)  # paths and field names are text, not markup
    say(f"A: {r.a}")
    say(f"B: {r.b}")
    say(
        f"train losses: {r.n_train_common:,} common steps (A {r.n_train_a:,}, B {r.n_train_b:,}), "
        f"{r.n_loss_identical:,} identical"
        + (
            ""
            if r.first_loss_diff_step is None
            else f"; first difference at step {r.first_loss_diff_step:,}, "
            + (
                f"max |Δ| {r.max_loss_diff:.3g}"
                if r.max_loss_diff is not None and math.isfinite(r.max_loss_diff)
                else "a loss recorded on one side only (null or non-finite)"
            )
        )
    )
    if not r.eval_steps_common:
        say("evaluations: none at a common step")
    else:
        moved = sum(v != 0.0 for v in r.max_eval_diff.values())
        say(
            f"evaluations: {len(r.eval_steps_common)} at common steps "
            f"({r.eval_steps_common[0]:,} … {r.final_step:,}); {moved} of "
            f"{len(r.max_eval_diff)} fields differ somewhere"
        )
        say(f"last common evaluation, step {r.final_step:,}:")
        say(f"  {'field':<34} {'A':>10} {'B':>10} {'B − A':>11}")
        for d in r.final:
            if d.name in HEADLINE_FIELDS or (d.kind == "accuracy" and _is_headline_acc(d.name)):
                delta = "-" if d.delta is None else f"{d.delta:+.2e}"
                say(f"  {d.name:<34} {_num(d.a):>10} {_num(d.b):>10} {delta:>11}")
        for d in r.out_of_tolerance:
            say(f"  out of tolerance: {d.name} ({d.kind}) {_num(d.a)} → {_num(d.b)}")
        for side, names in (("A", r.only_a), ("B", r.only_b)):
            if names:
                say(f"  only in {side} (not judged): {', '.join(names)}")
    tol = f"(NLL ±{r.nll_tol:g} nats, accuracy ±{r.acc_tol:g})"
    say(f"verdict: {r.verdict} {tol}")


def _is_headline_acc(name: str) -> bool:
    """Overall recall accuracies and each bucket's accuracy (not its direct-window share)."""
    return name.endswith(".acc") or "." not in name

"""`probe show RUN_DIR --pair K --text`: one pair's texts in the terminal, the page's view in rich
colours — each token's background its Δ on the page's diverging scale, the edit underlined, the
fact in italics, the answer bold, and where the answer's layered reach and direct window start
marked ▸L and ▸D in the text. Long texts are elided as on the page."""

from __future__ import annotations

import math

from rich.text import Text

from probes.report import show_run
from probes.report.show_page import CONTEXT, SHOWN, colour, scale_limit
from probes.report.show_run import ANSWER, DIRECT, EDIT, FACT, LAYERED, PairRows, Side
from probes.report.tables import console


def side_text(side: Side, strings: dict[int, str], limit: float) -> Text:
    out = Text()
    at = 0
    for a, b in show_run.shown_positions(side, CONTEXT, SHOWN):
        if a > at:
            out.append(f" … {a - at:,} tokens … ", style="italic dim")
        for p in range(a, b):
            reach = int(side.reach[p])
            before = int(side.reach[p - 1]) if p else 0
            if reach == LAYERED and before != LAYERED:
                out.append("▸L", style="bold yellow")
            if reach == DIRECT and before != DIRECT:
                out.append("▸D", style="bold green")
            style = []
            d, mark = side.delta[p], int(side.mark[p])
            if math.isfinite(d) and d != 0:
                style.append(f"black on {colour(d, limit)}")
            elif not math.isfinite(side.nll[p]):
                style.append("dim")
            if mark & EDIT:
                style.append("underline")
            if mark & FACT:
                style.append("italic")
            if mark & ANSWER:
                style.append("bold")
            s = strings.get(int(side.ids[p]), f"⟨{int(side.ids[p])}⟩")
            out.append(s, style=" ".join(style) or None)
        at = b
    return out


def print_pair(summary: dict, p: PairRows, strings: dict[int, str], viewed: bool, out=None) -> None:
    c = console(out)
    limit = scale_limit([p])
    s = p.sample
    c.print(f"{summary.get('probe')} · {(summary.get('model') or {}).get('id')}", style="bold")
    facts = [f"pair {p.pair}", f"bin {p.group}"]
    facts += [f"{k} {s[k]}" for k in ("distance", "direct_window", "layered_reach") if k in s]
    if isinstance(s.get("delta"), float):
        facts.append(f"delta {s['delta']:+.3f}")
    c.print(" · ".join(facts))
    c.print(
        f"Δ = NLL(variant) − NLL(base): blue ≤ −{limit:g} … white 0 … red ≥ +{limit:g} nats; edit "
        "underlined, fact italic, answer bold; ▸L / ▸D: the answer's layered reach / direct "
        "window start; dim: not scored in both texts",
        soft_wrap=True,
    )
    if not viewed:
        c.print("(only the answer tokens were scored in both texts: run with --token-view N)")
    for name, side in (("base", p.base), ("variant", p.variant)):
        c.print(f"{name} ({len(side.ids):,} tokens)", style="bold")
        c.print(side_text(side, strings, limit), soft_wrap=True)

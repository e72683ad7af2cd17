"""`probe show`'s page: one self-contained static HTML file for a run (no server, no network, no
external script, style or font: its Content-Security-Policy allows nothing else, and its plots
are data URIs).

It holds the run's provenance line and bins table, then per shown pair the base and variant
texts as the model tokenized them (probes/report/show_run.py), each token one `<span class="t">`
whose data attributes carry what it shows, so that a test reads the page as data:

    data-p     position in its row          data-d     Δ = NLL(variant) − NLL(base), if scored in both
    data-nll   NLL in this text             data-o     NLL in the other text
    data-m     marks: edit, fact, answer    data-r     the answer's window: direct, layered, beyond

A token with a nonzero Δ has class `s` and a background on a diverging scale (legend in nats);
hovering shows its NLLs and Δ (its title). A sweep probe gets its curve per text, drawn as SVG;
the run's plots close the page.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from probes.report import show_run
from probes.report.show_run import ANSWER, DIRECT, EDIT, FACT, LAYERED, PairRows, Side
from probes.report.tables import FORMATS, declared_columns, geometry_line
from txl import files

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'"
CONTEXT = 24  # tokens shown around a marked or scored stretch of a long text
SHOWN = 600  # a text up to this many tokens is shown whole
PLOT_LIMIT = 8 << 20  # bytes of one embedded plot
REACH_NAMES = {DIRECT: "direct", LAYERED: "layered", show_run.BEYOND: "beyond"}

STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#1b1b1b;
max-width:1200px}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:22px 0 6px}h3{font-size:14px;
margin:12px 0 4px}
.prov{color:#444;font-size:12.5px}.verdict{font-weight:600}
table.bins{border-collapse:collapse;font-size:12.5px}
table.bins td,table.bins th{border-bottom:1px solid #ddd;padding:2px 8px;text-align:right}
table.bins tr.sig{font-weight:600}
.plots img{max-width:560px;margin:6px 12px 6px 0;border:1px solid #eee}
.legend{display:flex;flex-wrap:wrap;gap:18px;align-items:center;font-size:12.5px;
margin:8px 0 10px}
.bar{display:inline-block;width:220px;height:12px;vertical-align:middle;border:1px solid #999;
background:linear-gradient(90deg,#2166ac,#92c5de,#ffffff,#f4a582,#b2182b)}
.text{font:13px/1.9 ui-monospace,Menlo,Consolas,monospace;white-space:pre-wrap;
word-break:break-word;border:1px solid #ddd;padding:8px;background:#fcfcfc}
.t{border-radius:2px}.t.u{color:#888}
.t.m-edit{outline:2px solid #6a3d9a;outline-offset:-1px}
.t.m-fact{text-decoration:underline double #6a3d9a}
.t.m-answer{outline:2px solid #111;outline-offset:-1px;font-weight:700}
.t.r-direct{box-shadow:inset 0 -2px 0 #66c2a5}.t.r-layered{box-shadow:inset 0 -2px 0 #fdb863}
.gap{color:#777;background:#eee;border-radius:3px;padding:0 4px;font-style:italic}
.key{display:inline-block;padding:0 4px;margin-right:4px}
.pair{display:none}.pair.on{display:block}.note{color:#555;font-size:12.5px}
svg text{font-size:11px;fill:#333}
"""

SCRIPT = """
const sel=document.getElementById('pair-select');
function show(){for(const d of document.querySelectorAll('.pair'))
d.classList.toggle('on',d.dataset.pair===sel.value);}
if(sel){sel.addEventListener('change',show);show();}
"""


def esc(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _num(x: float) -> str:
    return f"{x:.4g}"


def scale_limit(pairs: Sequence[PairRows]) -> float:
    """The colour scale's end, ±L nats: the 95th percentile of the nonzero |Δ| shown, rounded up
    to 1, 2 or 5 × 10^k; a larger |Δ| (an answer's, often) takes the scale's end colour, so that
    the text around it keeps its shades."""
    found = [np.abs(s.delta[np.isfinite(s.delta)]) for p in pairs for s in (p.base, p.variant)]
    values = np.concatenate(found) if found else np.zeros(0)
    values = values[values > 0]
    top = float(np.quantile(values, 0.95)) if values.size else 0.0
    if top <= 0:
        return 1.0
    k = 10.0 ** math.floor(math.log10(top))
    return next(m * k for m in (1, 2, 5, 10) if m * k >= top)


def colour(delta: float, limit: float) -> str:
    """A diverging colour for Δ on ±limit: blue below 0, white at 0, red above (ColorBrewer
    RdBu's ends)."""
    x = max(-1.0, min(1.0, delta / limit))
    end = (178, 24, 43) if x > 0 else (33, 102, 172)
    a = abs(x) ** 0.7  # small effects stay visible
    r, g, b = (round(255 + (e - 255) * a) for e in end)
    return f"#{r:02x}{g:02x}{b:02x}"


def token_span(side: Side, p: int, text: str, limit: float, this: str) -> str:
    d, nll, other = side.delta[p], side.nll[p], side.other[p]
    mark = int(side.mark[p])
    marks = [n for bit, n in ((EDIT, "edit"), (FACT, "fact"), (ANSWER, "answer")) if mark & bit]
    reach = REACH_NAMES.get(int(side.reach[p]))
    cls = ["t"] + [f"m-{m}" for m in marks] + ([f"r-{reach}"] if reach else [])
    attrs = [f'data-p="{p}"']
    that = "variant" if this == "base" else "base"
    if math.isfinite(nll):
        attrs.append(f'data-nll="{_num(nll)}"')
    if math.isfinite(other):
        attrs.append(f'data-o="{_num(other)}"')
    style = ""
    if math.isfinite(d):
        attrs.append(f'data-d="{_num(d)}"')
        if d != 0:
            cls.append("s")
            style = f' style="background:{colour(d, limit)}"'
        tip = f"pos {p}: NLL {this} {nll:.3f}, {that} {other:.3f}, Δ {d:+.3f} nats"
    elif math.isfinite(nll):
        tip = f"pos {p}: NLL {this} {nll:.3f}" + (
            f", {that} {other:.3f} (another token: no Δ)" if math.isfinite(other) else ""
        )
    else:
        cls.append("u")
        tip = f"pos {p}: not scored"
    if marks:
        attrs.append(f'data-m="{" ".join(marks)}"')
        tip += " · " + ", ".join(marks)
    if reach:
        attrs.append(f'data-r="{reach}"')
    return (
        f'<span class="{" ".join(cls)}" {" ".join(attrs)}{style} title="{esc(tip)}">'
        f"{esc(text)}</span>"
    )


def side_html(side: Side, strings: dict[int, str], limit: float, this: str) -> tuple[str, int]:
    """A text's spans and elisions, and how many tokens were elided."""
    out, elided, at = [], 0, 0
    for a, b in show_run.shown_positions(side, CONTEXT, SHOWN):
        if a > at:
            out.append(f'<span class="gap" data-elided="{a - at}">… {a - at:,} tokens …</span>')
            elided += a - at
        for p in range(a, b):
            s = strings.get(int(side.ids[p]), f"⟨{int(side.ids[p])}⟩")
            out.append(token_span(side, p, s, limit, this))
        at = b
    return "".join(out), elided


def legend(limit: float) -> str:
    return (
        '<div class="legend" id="legend">'
        f'<span>Δ = NLL(variant) − NLL(base), nats: ≤ −{limit:g} <span class="bar"></span> '
        f"≥ +{limit:g}</span>"
        '<span><span class="key t m-edit">edit</span><span class="key t m-fact">fact</span>'
        '<span class="key t m-answer">answer</span></span>'
        '<span>the answer sees: <span class="key t r-direct">direct window</span>'
        '<span class="key t r-layered">layered reach</span></span>'
        '<span><span class="key t u">grey</span>not scored in both texts (no Δ)</span></div>'
    )


def pair_html(p: PairRows, strings: dict[int, str], limit: float, on: bool) -> str:
    s = p.sample
    facts = [f"pair {p.pair}", f"bin {p.group}"]
    for key in ("distance", "delta", "direct_window", "layered_reach", "reach"):
        if key in s:
            v = s[key]
            facts.append(f"{key.replace('_', ' ')} {v:+.3f}" if isinstance(v, float) else
                         f"{key.replace('_', ' ')} {v}")  # fmt: skip
    parts = [f'<div class="pair{" on" if on else ""}" id="pair-{p.pair}" data-pair="{p.pair}">']
    parts.append(f'<p class="note">{esc(" · ".join(facts))}</p>')
    for name, side in (("base", p.base), ("variant", p.variant)):
        body, elided = side_html(side, strings, limit, name)
        note = (
            f" ({len(side.ids):,} tokens; {elided:,} elided: shown are the first tokens and "
            f"{CONTEXT} around the edit, the scored tokens and the answer)"
            if elided
            else f" ({len(side.ids):,} tokens)"
        )
        parts.append(f"<h3>{name}{esc(note)}</h3>")
        parts.append(f'<div class="text" data-side="{name}">{body}</div>')
    parts.append("</div>")
    return "".join(parts)


def bins_html(summary: dict) -> str:
    bins = summary.get("bins") or []
    cols = [c for c in declared_columns(summary) if any(c.key in b for b in bins)]
    if not cols:
        return ""
    head = "".join(f"<th>{esc(c.header)}</th>" for c in cols)
    rows = []
    for b in bins:
        cells = "".join(f"<td>{esc(FORMATS[c.format](b, c.key))}</td>" for c in cols)
        rows.append(f"<tr{' class=sig' if b.get('significant') else ''}>{cells}</tr>")
    return f'<table class="bins"><tr>{head}</tr>{"".join(rows)}</table>'


def plots_html(run_dir: Path, names: Sequence[str]) -> str:
    imgs = []
    for name in names:
        file = run_dir / Path(str(name)).name  # a plot lies in its run directory
        try:
            data = files.read_bytes(file, "json", "plot", limit=PLOT_LIMIT)
        except files.FileRefused:
            continue  # a plot that is gone or unreadable is left out, not fatal
        if data.startswith(b"\x89PNG\r\n\x1a\n"):
            src = base64.b64encode(data).decode("ascii")
            imgs.append(f'<img alt="{esc(file.name)}" src="data:image/png;base64,{src}">')
    return f'<div class="plots">{"".join(imgs)}</div>' if imgs else ""


def sweep_svg(contexts: list[int], curves: dict[int, list[float]], what: str) -> str:
    """The curve per text: NLL against context length (log scale), one line per text."""
    w, h, pad = 560, 300, 44
    ys = [y for c in curves.values() for y in c if math.isfinite(y)]
    if not ys or len(contexts) < 2:
        return ""
    lo, hi = min(ys), max(ys)
    hi = hi if hi > lo else lo + 1
    xs = [math.log(max(c, 1)) for c in contexts]
    x0, x1 = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1

    def pt(i: int, y: float) -> str:
        px = pad + (xs[i] - x0) / (x1 - x0) * (w - 2 * pad)
        py = h - pad - (y - lo) / (hi - lo) * (h - 2 * pad)
        return f"{px:.1f},{py:.1f}"

    lines = []
    for j, (t, c) in enumerate(sorted(curves.items())):
        pts = " ".join(pt(i, y) for i, y in enumerate(c) if math.isfinite(y))
        hue = (j * 47) % 360
        lines.append(
            f'<polyline fill="none" stroke="hsl({hue},60%,45%)" stroke-width="1.2" '
            f'points="{pts}" data-text="{t}"><title>text {t}</title></polyline>'
        )
    ticks = "".join(
        f'<text x="{pt(i, lo).split(",")[0]}" y="{h - pad + 14}" text-anchor="middle">{c}</text>'
        for i, c in enumerate(contexts)
    )
    return (
        f'<svg width="{w}" height="{h}" role="img" aria-label="{esc(what)} by context length">'
        f'<rect x="{pad}" y="{pad}" width="{w - 2 * pad}" height="{h - 2 * pad}" fill="none" '
        f'stroke="#ccc"/>{"".join(lines)}{ticks}'
        f'<text x="{pad}" y="{pad - 8}">{esc(what)}: {lo:.2f} – {hi:.2f} nats</text>'
        f'<text x="{w - pad}" y="{h - 8}" text-anchor="end">context length (tokens)</text></svg>'
    )


def run_parts(run: dict) -> tuple[str, str, str]:
    """run.json's git commit, start and status as a provenance line names them ("" if absent)."""
    git = run.get("git") or {}
    commit = str(git.get("commit") or "")[:10]
    return (
        f"git {commit}{' (dirty)' if git.get('dirty') else ''}" if commit else "",
        f"started {run.get('started_utc')}" if run.get("started_utc") else "",
        f"status {run.get('status')}",
    )


def command_html(command: str, run_dir: Path) -> str:
    """The provenance line with the command that repeats a run and where the run lies."""
    return (
        f'<p class="prov">command: <code>{esc(command)}</code> · run directory: '
        f"<code>{esc(run_dir)}</code></p>"
    )


def provenance(run: dict, summary: dict, run_dir: Path) -> str:
    parts = [
        geometry_line(summary),
        f"probe {summary.get('probe')} v{summary.get('version')}",
        *run_parts(run),
    ]
    command = " ".join(str(a) for a in run.get("command") or [])
    return f'<p class="prov">{esc(" · ".join(p for p in parts if p))}</p>' + command_html(
        command, run_dir
    )


def page(
    run: dict,
    summary: dict,
    arrays: show_run.RunArrays,
    pairs: Sequence[PairRows],
    strings: dict[int, str] | None,
    notes: Sequence[str] = (),
) -> str:
    """The whole page (module docstring)."""
    title = f"{summary.get('probe')} · {(summary.get('model') or {}).get('id')}"
    body = [f"<h1>{esc(title)}</h1>", provenance(run, summary, arrays.path)]
    body.append(f'<p class="verdict">{esc(summary.get("verdict", ""))}</p>')
    body.append(bins_html(summary))
    if arrays.kind == "sweep":
        contexts, curves, what = show_run.sweep_curves(arrays)
        body.append("<h2>The curve per text</h2>" + sweep_svg(contexts, curves, what))
    if pairs:
        limit = scale_limit(pairs)
        body.append("<h2>Pairs, token by token</h2>")
        body.append(
            '<p class="note">Each text as the model tokenized it; hover a token for its NLL in '
            "both texts and Δ."
            + (
                ""
                if arrays.viewed
                else " This run scored only the answer tokens in both texts; run it with "
                "<code>--token-view N</code> to see Δ on the N tokens after the edit and "
                "before the answer."
            )
            + "</p>"
        )
        options = "".join(
            f'<option value="{p.pair}">pair {p.pair} · bin {p.group}'
            + (f" · distance {p.sample['distance']}" if "distance" in p.sample else "")
            + "</option>"
            for p in pairs
        )
        body.append(f'<label>pair <select id="pair-select">{options}</select></label>')
        body.append(legend(limit))
        body += [pair_html(p, strings or {}, limit, i == 0) for i, p in enumerate(pairs)]
    for n in notes:
        body.append(f'<p class="note">{esc(n)}</p>')
    body.append(plots_html(arrays.path, summary.get("plots") or []))
    return document(title, body)


def document(title: str, body: Sequence[str], style: str = "") -> str:
    """A page of `body` under the page's head: its CSP, style (plus `style`) and script."""
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{esc(title)}</title><style>{STYLE}{style}</style></head><body>"
        + "".join(body)
        + f"<script>{SCRIPT}</script></body></html>\n"
    )

"""`probe show`: the page is the run's per-token data, read back from the HTML it writes (data
attributes on the token spans: tests/show_html.py), for a planted model whose effect is known.
A `probe diagnose` directory's page holds its table and plot and links the page of each of its
probe runs; `--save-strings` gives an old run the token strings a newer one records.

The planted model's "context" noise redraws a token's loss whenever what it sees changes, and
leaves it exactly equal otherwise: with `--token-view` covering the texts, a token has a nonzero
Δ exactly when the edit lies within its layered reach. So the page must shade exactly the
tokens with a nonzero Δ, those and only those the edit reaches, with the marks on the edited,
fact and answer tokens the run's files name."""

from __future__ import annotations

import base64
import html as html_lib
import io
import json
import re
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest
import show_html
from capped import probe
from click.testing import CliRunner

import probes
from probes.adapters.planted import PlantedModel
from probes.api.horizon import doc_starts
from probes.api.model import geometry as geometry_of
from probes.api.model import horizon as horizon_of
from probes.cli.main import cli
from probes.testing import tiny_checkpoint

CURATED = Path(__file__).resolve().parents[1] / "results" / "curated"


def show(*args: str):
    return CliRunner().invoke(cli, ["show", *args], catch_exceptions=False)


@pytest.fixture(scope="module")
def planted_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("show")
    model = PlantedModel(copy=2.0)
    s = probes.run("fact-swap", model=model, out=out, progress=False, quick=True, token_view=96)
    return Path(s.run_dir), model


def page_of(run_dir: Path, *args: str) -> str:
    r = show(str(run_dir), *args)
    assert r.exit_code == 0, r.output
    return (run_dir / "show.html").read_text()


def arrays(run_dir: Path):
    with np.load(run_dir / "texts.npz") as t, np.load(run_dir / "tokens.npz") as k:
        return dict(t), dict(k)


def every_pair(run_dir: Path):
    """Each pair's page spans (one page per pair: --pair K)."""
    texts, _ = arrays(run_dir)
    for k in range(len(texts["base_offsets"]) - 1):
        yield k, [s for s in show_html.spans(page_of(run_dir, "--pair", str(k))) if s.pair == k]


def rows(texts, k):
    out = {}
    for side in ("base", "variant"):
        a, b = texts[f"{side}_offsets"][k : k + 2]
        out[side] = (texts[f"{side}_tokens"][a:b], texts[f"{side}_doc_ids"][a:b])
    return out


def test_shaded_tokens_are_exactly_those_with_a_nonzero_delta(planted_run):
    run_dir, _ = planted_run
    _, tok = arrays(run_dir)
    seen_shaded = 0
    for k, spans in every_pair(run_dir):
        assert spans, f"pair {k} has no token on its page"
        m = tok["view_pair"] == k
        view = dict(zip(tok["view_position_base"][m].tolist(),
                        (tok["view_nll_variant"] - tok["view_nll_base"])[m].tolist(), strict=True))  # fmt: skip
        for s in spans:
            assert s.shaded == (s.delta is not None and s.delta != 0), s
            if s.side == "base" and s.position in view and s.delta is not None:
                assert s.delta == pytest.approx(view[s.position], rel=1e-3, abs=1e-9)
            seen_shaded += s.shaded
    assert seen_shaded > 0  # the planted edit changes what later tokens see


def test_the_marks_sit_on_the_edit_the_fact_and_the_answer(planted_run):
    run_dir, _ = planted_run
    texts, tok = arrays(run_dir)
    for k, spans in every_pair(run_dir):
        r = rows(texts, k)
        (b_ids, _), (v_ids, _) = r["base"], r["variant"]
        edited = set(np.flatnonzero(b_ids != v_ids).tolist())  # fact-swap keeps the length
        m = tok["pair"] == k
        answer = set(tok["position_base"][m].tolist())
        fact = int(tok["position_base"][m][0] - tok["distance"][m][0])
        base = {s.position: s for s in spans if s.side == "base"}
        assert {p for p, s in base.items() if "edit" in s.marks} == edited
        assert {p for p, s in base.items() if "answer" in s.marks} == answer
        assert {p for p, s in base.items() if "fact" in s.marks} == {fact}
        variant = {s.position: s for s in spans if s.side == "variant"}
        for p in edited:  # the edit's tokens are the two values, as the model tokenized them
            assert base[p].text != variant[p].text
            assert base[p].delta is None and not base[p].shaded


def test_nothing_the_edit_cannot_reach_is_shaded_and_all_it_reaches_is(planted_run):
    run_dir, model = planted_run
    texts, _ = arrays(run_dir)
    hz = horizon_of(model, geometry_of(model))
    for k, spans in every_pair(run_dir):
        (b_ids, b_doc), (v_ids, _) = rows(texts, k).values()
        edit = int(np.flatnonzero(b_ids != v_ids)[-1])
        starts = doc_starts(b_doc)
        for s in spans:
            if s.side != "base" or s.delta is None:
                continue
            reached = hz.within_reach(s.position, edit, int(starts[s.position - 1]))
            assert s.shaded == (reached and s.position > edit), (k, s)


def test_the_answer_window_drawn_is_the_one_the_run_recorded(planted_run):
    run_dir, _ = planted_run
    _, tok = arrays(run_dir)
    samples = {r["pair"]: r for r in map(json.loads, (run_dir / "samples.jsonl").open())}
    for k, spans in every_pair(run_dir):
        a0 = int(tok["position_base"][tok["pair"] == k][0])
        direct, reach = samples[k]["direct_window"], samples[k]["layered_reach"]
        for s in spans:
            if s.side != "base":
                continue
            want = (
                None if s.position >= a0 else "direct" if s.position >= a0 - direct
                else "layered" if s.position >= a0 - reach else "beyond"
            )  # fmt: skip
            assert s.reach == want, (k, s)


def test_the_page_needs_nothing_outside_itself(planted_run):
    run_dir, _ = planted_run
    html = page_of(run_dir)
    assert "default-src 'none'" in html
    assert "http://" not in html and "https://" not in html
    assert all(part.startswith("data:") for part in html.split('src="')[1:])
    assert 'id="legend"' in html and "nats" in html


def test_by_default_the_page_shows_the_first_pair_of_each_bin(planted_run):
    run_dir, _ = planted_run
    _, tok = arrays(run_dir)
    first = {}
    for p, g in sorted(zip(tok["pair"].tolist(), tok["group"].tolist(), strict=True)):
        first.setdefault(g, p)
    shown = {s.pair for s in show_html.spans(page_of(run_dir))}
    assert shown == set(first.values())


def test_a_run_without_token_strings_gets_the_default_languages_words(planted_run, tmp_path):
    run_dir, _ = planted_run
    old = tmp_path / "old"
    shutil.copytree(run_dir, old)
    texts, _ = arrays(old)
    np.savez_compressed(old / "texts.npz", **{k: v for k, v in texts.items() if "vocab" not in k})
    assert show_html.spans(page_of(old)) and [
        (s.pair, s.side, s.position, s.text) for s in show_html.spans(page_of(old))
    ] == [(s.pair, s.side, s.position, s.text) for s in show_html.spans(page_of(run_dir))]


def test_one_pair_in_the_terminal(planted_run):
    run_dir, _ = planted_run
    r = show(str(run_dir), "--pair", "1", "--text")
    assert r.exit_code == 0, r.output
    assert "pair 1" in r.output and "base (" in r.output and "variant (" in r.output


def test_a_sweep_run_shows_its_curve_per_text(tmp_path):
    s = probes.run("context-sweep", model=PlantedModel(copy=2.0), out=tmp_path, progress=False,
                   quick=True)  # fmt: skip
    run_dir = Path(s.run_dir)
    html = page_of(run_dir)
    with np.load(run_dir / "tokens.npz") as z:
        n_texts = len(np.unique(z["text"]))
    assert html.count("<polyline") == n_texts


def test_a_long_text_is_shown_around_the_edit_and_the_answer(tmp_path):
    s = probes.run("fact-swap", model=PlantedModel(copy=2.0, mem_len=64, tgt_len=64),
                   out=tmp_path, progress=False, n=1, distance="1500-1600", token_view=16)  # fmt: skip
    run_dir = Path(s.run_dir)
    html = page_of(run_dir)
    parser = show_html.PageSpans()
    parser.feed(html)
    texts, tok = arrays(run_dir)
    length = int(texts["base_offsets"][1])
    base = [s for s in parser.spans if s.side == "base" and s.pair == 0]
    assert len(base) < length and parser.elided > 0 and "elided" in html
    shown = {s.position for s in base}
    assert set(tok["position_base"][tok["pair"] == 0].tolist()) <= shown  # the answer
    assert {s.position for s in base if "edit" in s.marks}  # and the edit
    assert len(html.encode()) < 400_000


@pytest.mark.parametrize(
    "case, args, fragment",
    [
        ("missing", ["nowhere"], "not a run directory"),
        ("pair-out-of-range", ["{run}", "--pair", "999"], "the run has pairs 0–"),
        ("out-missing-dir", ["{run}", "--out", "{tmp}/no/such/page.html"], "does not exist"),
        ("out-is-dir", ["{run}", "--out", "{tmp}"], "is a directory"),
        ("diagnose-pair", [str(CURATED / "diagnose-mem640"), "--pair", "0"], "drop --pair"),
        ("save-without-tokenizer", ["{run}", "--save-strings"], "--tokenizer PATH"),
        (
            "save-no-texts",
            ["{textless}", "--tokenizer=t", "--save-strings"],
            "has no texts.npz",
        ),
        ("no-texts", ["{textless}"], "has no texts.npz"),
        ("no-strings", ["{stringless}"], "--tokenizer"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(planted_run, tmp_path, case, args, fragment):
    run_dir, _ = planted_run
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("show.html"))
    # a run from before texts.npz, and a real-model run from before its token strings
    textless = tmp_path / "textless"
    shutil.copytree(run_dir, textless, ignore=shutil.ignore_patterns("show.html", "texts.npz"))
    stringless = tmp_path / "stringless"
    real = CURATED / "real/gemma3/fact-position/gem-pos100"
    shutil.copytree(real, stringless, ignore=shutil.ignore_patterns("show.html"))
    with np.load(real / "texts.npz") as texts:
        kept = {k: texts[k] for k in texts.files if not k.startswith("vocab_")}
    np.savez(stringless / "texts.npz", **kept)
    argv = [
        a.format(run=copy, tmp=tmp_path, textless=textless, stringless=stringless) for a in args
    ]
    before = sorted(p.name for p in copy.iterdir())
    curated = [Path(a) for a in argv if a.startswith(str(CURATED))]
    r = probe("show", *argv, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0] and "Traceback" not in r.stderr
    assert sorted(p.name for p in copy.iterdir()) == before
    assert not any((c / "show.html").exists() for c in curated)


def test_a_fifo_for_texts_is_refused_unread(planted_run, tmp_path):
    import os

    run_dir, _ = planted_run
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("show.html"))
    (copy / "texts.npz").unlink()
    os.mkfifo(copy / "texts.npz")
    r = probe("show", str(copy), cwd=tmp_path, timeout=60)
    assert r.returncode == 2 and "FIFO" in r.stderr.upper(), r.stderr
    assert not (copy / "show.html").exists()


# --- a `probe diagnose` run -------------------------------------------------------------------


@pytest.fixture(scope="module")
def diagnose_run(tmp_path_factory):
    """A real diagnose of a tiny model, fast: fact-swap (paired texts) and boundary (none)."""
    import probe_smoke

    root = tmp_path_factory.mktemp("diagnose")
    model = tiny_checkpoint(root / "m", mem_len=16, tgt_len=16)
    r = CliRunner().invoke(
        cli,
        ["diagnose", "--model", str(model), "--quick", "--out", str(root / "out"), "--json",
         *probe_smoke.skip_all_but("fact-swap", "boundary")],
        catch_exceptions=False,
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    return Path(json.loads(r.stdout)["run_dir"])


def files_under(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def table_rows(html: str) -> list[str]:
    table = html.split('id="diagnose-table"', 1)[1].split("</table>", 1)[0]
    return [html_lib.unescape(m) for m in re.findall(r'<tr[^>]* data-effect="([^"]*)"', table)]


def run_entries(html: str) -> dict[str, str | None]:
    """Each probe run's entry: its link (None: the reason instead)."""
    out = {}
    for probe_name, body in re.findall(r'<li data-probe="([^"]+)"[^>]*>(.*?)</li>', html):
        link = re.search(r'<a href="([^"]+)"', body)
        out[probe_name] = link.group(1) if link else None
    return out


def test_a_diagnose_page_holds_every_row_its_plot_and_links_each_probe_runs_page(
    diagnose_run, tmp_path
):
    diag = tmp_path / "diag"
    shutil.copytree(diagnose_run, diag)
    summary = json.loads((diag / "summary.json").read_text())
    before = files_under(diag)
    r = show(str(diag))
    assert r.exit_code == 0, r.output
    html = (diag / "show.html").read_text()
    assert table_rows(html) == [row["effect"] for row in summary["rows"]]
    for row in summary["rows"]:  # every field of every row, as the terminal table writes it
        for key in ("probe", "unit", "detail", "metric", "measure"):
            assert html_lib.escape(str(row[key])) in html, (row["effect"], key)
    png = (diag / "diagnose.png").read_bytes()
    assert f"data:image/png;base64,{base64.b64encode(png).decode()}" in html
    assert "default-src 'none'" in html and "http://" not in html and "https://" not in html
    links = run_entries(html)
    assert set(links) == set(summary["runs"]) == {"fact-swap", "boundary"}
    for probe_name, rel in summary["runs"].items():
        page = (diag / links[probe_name]).resolve()
        assert page == (diag / rel / "show.html").resolve() and page.is_file()
        written = page.read_bytes()  # the page `probe show` on that run writes
        again = show(str(diag / rel))
        assert again.exit_code == 0, again.output
        assert page.read_bytes() == written
    pairs = {s.pair for s in show_html.spans((diag / links["fact-swap"]).read_text())}
    assert pairs  # the paired probe run's page shows its texts
    after = files_under(diag)  # only the pages were added, nothing else changed
    assert {k: v for k, v in after.items() if not k.endswith("show.html")} == before
    assert sorted(k for k in after if k.endswith("show.html")) == sorted(
        ["show.html", *(f"{rel}/show.html" for rel in summary["runs"].values())]
    )


def test_a_probe_run_that_cannot_be_shown_gets_its_reason_instead_of_a_link(diagnose_run, tmp_path):
    diag = tmp_path / "diag"
    shutil.copytree(diagnose_run, diag, ignore=shutil.ignore_patterns("show.html"))
    rel = json.loads((diag / "summary.json").read_text())["runs"]["fact-swap"]
    (diag / rel / "texts.npz").unlink()
    out = tmp_path / "elsewhere.html"
    r = show(str(diag), "--out", str(out))
    assert r.exit_code == 0, r.output
    html = out.read_text()
    links = run_entries(html)
    assert links["fact-swap"] is None and "has no texts.npz" in html
    assert not (diag / rel / "show.html").exists() and not (diag / "show.html").exists()
    assert (tmp_path / links["boundary"]).resolve().is_file()  # relative to the --out page


@pytest.mark.parametrize(
    "name",
    ["diagnose-mem640", "diagnose-models-mem640", "diagnose-architectures-mem640",
     "real/smollm2/diagnose", "real/gemma3/diagnose"],
)  # fmt: skip
def test_each_curated_diagnose_renders_without_its_probe_runs(name, tmp_path):
    diag = CURATED / name
    before = files_under(diag)
    r = show(str(diag), "--out", str(tmp_path / "page.html"))
    assert r.exit_code == 0, r.output
    html = (tmp_path / "page.html").read_text()
    summary = json.loads((diag / "summary.json").read_text())
    if "models" in summary:  # a row per effect, a column per model
        assert table_rows(html) == [e["effect"] for e in summary["effects"]]
        for m in summary["models"]:
            assert f'<th data-model="{m["id"]}">' in html
            assert html.count(f'data-model="{m["id"]}"') > len(summary["effects"])
    else:
        assert table_rows(html) == [row["effect"] for row in summary["rows"]]
    for plot in summary["plots"]:
        png = (diag / plot).read_bytes()
        assert f"data:image/png;base64,{base64.b64encode(png).decode()}" in html
    assert "not in this copy" in html and "<a href" not in html
    assert files_under(diag) == before  # the curated directory is read only


def test_text_on_a_diagnose_run_prints_the_table_probe_report_prints():
    r = show(str(CURATED / "diagnose-mem640"), "--text")
    assert r.exit_code == 0, r.output
    report = CliRunner().invoke(cli, ["report", str(CURATED / "diagnose-mem640")])
    assert "probe diagnose" in r.stdout and r.stdout == report.stdout


def test_a_diagnose_summary_without_its_table_is_one_line(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    run = json.loads((CURATED / "diagnose-mem640" / "run.json").read_text())
    summary = json.loads((CURATED / "diagnose-mem640" / "summary.json").read_text())
    (d / "run.json").write_text(json.dumps(run))
    (d / "summary.json").write_text(json.dumps({**summary, "rows": "none"}))
    r = probe("show", str(d), cwd=tmp_path)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "`rows`" in r.stderr and not (d / "show.html").exists()


# --- --save-strings ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def own_tokenizer_run(tmp_path_factory):
    """A run on a model with its own tokenizer (a BPE), and its tokenizer.json."""
    from text_helpers import require_tokenizers, text_checkpoint

    require_tokenizers()
    root = tmp_path_factory.mktemp("own")
    model = text_checkpoint(root / "m", mem_len=16, tgt_len=16)
    s = probes.run("fact-swap", model=str(model), out=root / "out", progress=False, quick=True,
                   token_view=16)  # fmt: skip
    return Path(s.run_dir), Path(model) / "tokenizer.json"


def npz_members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(path.read_bytes())) as z:
        return {n: z.read(n) for n in z.namelist()}


def test_save_strings_adds_only_the_strings_and_a_later_show_needs_no_tokenizer(
    own_tokenizer_run, tmp_path
):
    run_dir, tokenizer = own_tokenizer_run
    with np.load(run_dir / "texts.npz") as z:
        recorded = {k: z[k] for k in z.files}
    old = tmp_path / "old"  # a run written before runs recorded their token strings
    shutil.copytree(run_dir, old, ignore=shutil.ignore_patterns("show.html"))
    np.savez_compressed(
        old / "texts.npz", **{k: v for k, v in recorded.items() if "vocab" not in k}
    )
    members = npz_members(old / "texts.npz")
    assert show(str(old)).exit_code == 2  # no strings, no tokenizer

    with_tokenizer = tmp_path / "with.html"
    r = show(str(old), "--tokenizer", str(tokenizer), "--out", str(with_tokenizer))
    assert r.exit_code == 0, r.output
    assert npz_members(old / "texts.npz") == members  # without --save-strings: nothing saved

    before = files_under(old)
    r = show(str(old), "--tokenizer", str(tokenizer), "--save-strings")
    assert r.exit_code == 0, r.output
    assert "saved the strings" in r.stderr
    now = npz_members(old / "texts.npz")
    assert {n: now[n] for n in members} == members  # every array it held, byte for byte
    assert set(now) - set(members) == {"vocab_ids.npy", "vocab_utf8.npy", "vocab_offsets.npy"}
    with np.load(old / "texts.npz") as z:  # the very arrays the run itself recorded
        for k in ("vocab_ids", "vocab_utf8", "vocab_offsets"):
            assert z[k].dtype == recorded[k].dtype and np.array_equal(z[k], recorded[k]), k
    after = files_under(old)
    assert set(after) == set(before) | {"show.html"} and not list(old.glob(".*"))
    assert {k: v for k, v in after.items() if k not in ("texts.npz", "show.html")} == {
        k: v for k, v in before.items() if k != "texts.npz"
    }

    def view(html: str):
        return [(s.pair, s.side, s.position, s.text, s.delta) for s in show_html.spans(html)]

    assert view(page_of(old)) == view(with_tokenizer.read_text())  # now without --tokenizer
    saved = (old / "texts.npz").read_bytes()
    r = show(str(old), "--tokenizer", str(tokenizer), "--save-strings")
    assert r.exit_code == 0 and "already" in r.stderr  # a run that has them is left as it is
    assert (old / "texts.npz").read_bytes() == saved

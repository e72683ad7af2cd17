"""`probe show RUN_DIR [--pair K] [--text] [--out FILE] [--open] [--tokenizer PATH]`: a finished
run as one self-contained page (RUN_DIR/show.html; probes/report/show_page.py), or one pair in
the terminal (`--text`; probes/report/show_text.py).

A paired run's texts need their token strings: texts.npz records them (probes/framework/
token_strings.py). A run written before it did gets them here when that needs no model: synth
ids of the default language (run.json's language fingerprint says so), or the tokenizer the run
read, given with --tokenizer (a tokenizer.json, its directory, or the GGUF file holding it) and
checked against run.json's sha256. Otherwise the command names what is missing, one line, exit 2,
and writes nothing; the page is written atomically.
"""

from __future__ import annotations

from pathlib import Path

import click

from probes.cli.errors import BadInput


@click.command("show")
@click.argument("run_dir", type=click.Path())
@click.option(
    "--pair",
    "pair",
    type=click.IntRange(min=0),
    default=None,
    metavar="K",
    help="Show pair K (samples.jsonl's `pair`). [default: the first pair of each bin]",
)
@click.option("--text", "as_text", is_flag=True, help="Print one pair in the terminal instead.")
@click.option(
    "--out",
    default=None,
    metavar="FILE",
    help="Write the page here (in a directory that exists). [default: RUN_DIR/show.html]",
)
@click.option("--open", "open_", is_flag=True, help="Print only the page's path (to open it).")
@click.option(
    "--tokenizer",
    default=None,
    metavar="PATH",
    help="The tokenizer a run recorded no token strings for read (its tokenizer.json, "
    "directory or GGUF file; checked against run.json's sha256).",
)
def show_command(
    run_dir: str,
    pair: int | None,
    as_text: bool,
    out: str | None,
    open_: bool,
    tokenizer: str | None,
) -> None:
    """A run token by token: its texts shaded by each token's loss delta, as one static page
    (or one pair in the terminal with --text)."""
    from probes.framework.results import FINISHED, RunDirError, load_run, status  # lazy: numpy
    from probes.report import show_page, show_run  # lazy: numpy

    path = Path(run_dir)
    try:
        run, summary = load_run(path)
    except RunDirError as e:
        raise BadInput(str(e)) from None
    if run.get("command") == "diagnose" or (summary or {}).get("command") == "diagnose":
        raise BadInput(
            f"{run_dir!r} is a `probe diagnose` run (a table of probes, no texts); give the "
            "directory of one probe run"
        )
    if run.get("status") not in FINISHED or summary is None:
        raise BadInput(
            f"{run_dir!r} did not finish ({status(path, run)}); give a finished run's directory"
        )
    try:
        arrays = show_run.read_run(path)
        pairs, strings, notes = _pairs(run, arrays, pair, as_text, tokenizer, run_dir)
    except show_run.ShowError as e:
        raise BadInput(str(e)) from None
    if as_text:
        from probes.report.show_text import print_pair  # lazy: rich

        print_pair(summary, pairs[0], strings, arrays.viewed)
        return
    target = _target(path, out)
    html = show_page.page(run, summary, arrays, pairs, strings, notes)
    from txl.io import atomic_write  # lazy: numpy

    try:
        atomic_write(target, html)
    except OSError as e:
        raise BadInput(
            f"cannot write {str(target)!r}: {e.strerror or e}; give --out FILE"
        ) from None
    if open_:
        click.echo(str(target.resolve()))
    else:
        shown = f"pairs {', '.join(str(p.pair) for p in pairs)}; " if pairs else ""
        click.echo(f"wrote {target} ({shown}{len(html.encode()) / 1024:,.0f} KB)")


def _target(run_dir: Path, out: str | None) -> Path:
    """Where the page goes: RUN_DIR/show.html, or --out FILE in a directory that exists."""
    if out is None:
        return run_dir / "show.html"
    target = Path(out).expanduser()
    if not out.strip() or target.is_dir():
        raise BadInput(f"--out {out!r} is a directory; give a file name (e.g. page.html)")
    if not target.parent.is_dir():
        raise BadInput(
            f"--out {out!r}: directory {str(target.parent)!r} does not exist; give a file in "
            "an existing directory"
        )
    if target.exists() and not target.is_file():
        raise BadInput(f"--out {out!r} is not a regular file; give a file name")
    return target


def _pairs(run: dict, arrays, pair: int | None, as_text: bool, tokenizer: str | None, where: str):
    """The pairs to show, their token strings and the page's notes."""
    from probes.report import show_run  # lazy: numpy

    kind = arrays.kind
    if kind != "paired":
        if pair is not None or as_text:
            raise BadInput(
                f"{where!r} is a {(run.get('probe') or {}).get('name')} run, not a paired one: "
                "it has no pairs to show; drop --pair / --text"
            )
        note = (
            []
            if kind == "sweep"
            else [f"A {(run.get('probe') or {}).get('name')} run has no paired texts to show."]
        )
        return [], None, note
    if arrays.texts is None:
        raise BadInput(
            f"{where!r} has no texts.npz (runs before texts.npz was written); `probe rerun "
            f"{where}` writes a run that has it"
        )
    n = show_run.pair_count(arrays)
    if pair is not None and pair >= n:
        raise BadInput(f"--pair {pair}: the run has pairs 0–{n - 1}; give one of them")
    strings = show_run.recorded_strings(arrays.texts) or _derived(run, arrays, tokenizer, where)
    if pair is not None:
        chosen = [pair]
    else:
        chosen = show_run.first_of_each_group(arrays)[: 1 if as_text else None]
    return [show_run.pair_rows(arrays, k) for k in chosen], strings, []


def _derived(run: dict, arrays, tokenizer: str | None, where: str) -> dict[int, str]:
    """Token strings of a run whose texts.npz records none (module docstring)."""
    from probes.framework import token_strings  # lazy: numpy

    ids = arrays.ids_used()
    vocab = run.get("vocabulary") or {}
    if vocab.get("reads") == "tokenizer":
        if tokenizer is None:
            raise BadInput(
                f"{where!r}: texts.npz records no token strings (written before runs recorded "
                f"them) and they need the tokenizer the run read ({vocab.get('origin')}); give "
                f"it with --tokenizer PATH, or `probe rerun {where}` to write a run that has them"
            )
        tok = _tokenizer(tokenizer, vocab)
        return dict(zip(ids.tolist(), tok.token_strings(ids), strict=True))
    from synth.language import Language  # lazy: numpy

    lang = Language.default()
    recorded = (run.get("synth") or {}).get("language_fingerprint")
    if recorded != lang.fingerprint:
        raise BadInput(
            f"{where!r}: texts.npz records no token strings and the run's synth language "
            f"({str(recorded)[:12]}) is not the default one; `probe rerun {where}` writes a run "
            "that has them"
        )
    return dict(zip(ids.tolist(), token_strings.synth_strings(lang.vocab, ids), strict=True))


def _tokenizer(path: str, vocab: dict):
    """The tokenizer at `path` (a tokenizer.json, its directory, or a GGUF file), if it is the
    one run.json names by sha256."""
    from synth.text.tokenizer import TextTokenizer, TokenizerError  # lazy: numpy
    from txl import files  # lazy: kept with its one use

    def read(f: Path) -> bytes:  # bounded, as every file the toolkit reads
        return files.read_bytes(f, "tokenizer" if f.name == "tokenizer.json" else "json")

    p = Path(path).expanduser()
    try:
        if p.is_file() and p.suffix == ".gguf":
            from probes.adapters.hf_load import gguf_tokenizer  # lazy: transformers

            data, special = gguf_tokenizer(p, path)
            tok = TextTokenizer(data, [special.get("bos"), special.get("eos")])
        else:
            tok = TextTokenizer.from_path(p, read)
    except (TokenizerError, ValueError) as e:
        raise BadInput(f"--tokenizer {path!r}: {e}") from None
    if tok.sha256 != vocab.get("tokenizer_sha256"):
        raise BadInput(
            f"--tokenizer {path!r} is tokenizer {tok.sha256[:12]}, but the run read "
            f"{str(vocab.get('tokenizer_sha256'))[:12]} ({vocab.get('origin')}); give that one"
        )
    return tok

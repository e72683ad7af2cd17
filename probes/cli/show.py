"""`probe show RUN_DIR [--pair K] [--text] [--out FILE] [--open] [--tokenizer PATH
[--save-strings]]`: a finished run as one self-contained page (RUN_DIR/show.html;
probes/report/show_page.py), or one pair in the terminal (`--text`; probes/report/show_text.py).

A `probe diagnose` directory gets its own page (probes/report/show_diagnose.py): its table, its
plots and an entry per probe run, linking the page of each probe run that is in the directory —
this command writes those pages too, each as `probe show` on that run would (with the same
--tokenizer and --save-strings), and names why where one cannot be written. `--text` prints its
table; --pair does not apply.

A paired run's texts need their token strings: texts.npz records them (probes/framework/
token_strings.py). A run written before it did gets them here when that needs no model: synth
ids of the default language (run.json's language fingerprint says so), or the tokenizer the run
read, given with --tokenizer (a tokenizer.json, its directory, or the GGUF file holding it) and
checked against run.json's sha256. --save-strings then records them in the run's texts.npz
(the arrays a newer run writes, added; every other array kept byte for byte), so that the next
`probe show` needs no tokenizer. Otherwise the command names what is missing, one line, exit 2,
and writes nothing; every file is written atomically, and nothing outside RUN_DIR and --out.
"""

from __future__ import annotations

import os
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from probes.cli.errors import BadInput
from txl import files


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
@click.option(
    "--text",
    "as_text",
    is_flag=True,
    help="Print one pair in the terminal instead (a diagnose run: its table).",
)
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
@click.option(
    "--save-strings",
    is_flag=True,
    help="With --tokenizer: record the token strings it gave in the run's texts.npz (only "
    "arrays added), so that `probe show` needs no tokenizer next time. A run that records "
    "them already is left as it is (a note says so).",
)
def show_command(
    run_dir: str,
    pair: int | None,
    as_text: bool,
    out: str | None,
    open_: bool,
    tokenizer: str | None,
    save_strings: bool,
) -> None:
    """A run token by token: its texts shaded by each token's loss delta, as one static page
    (or one pair in the terminal with --text). A `probe diagnose` run: its table, plots and a
    page per probe run."""
    path = Path(run_dir)
    if save_strings and tokenizer is None:
        raise BadInput(
            "--save-strings records the token strings that --tokenizer PATH gives; give the "
            "tokenizer the run read with --tokenizer PATH"
        )
    run, summary = _finished_run(path, run_dir)
    how = How(pair, as_text, tokenizer, save_strings)
    if _is_diagnose(run, summary):
        _show_diagnose(path, run, summary, how, out, open_, run_dir)
        return
    target = None if as_text else _target(path, out)
    shown = _prepare(path, run, summary, how, run_dir)
    _say_saved(shown)
    if as_text:
        from probes.report.show_text import print_pair  # lazy: rich

        print_pair(summary, shown.pairs[0], shown.strings, shown.arrays.viewed)
        return
    html = _page(shown)
    _write(target, html)
    if open_:
        click.echo(str(target.resolve()))
    else:
        pairs = f"pairs {', '.join(str(p.pair) for p in shown.pairs)}; " if shown.pairs else ""
        click.echo(f"wrote {target} ({pairs}{len(html.encode()) / 1024:,.0f} KB)")


@dataclass(frozen=True)
class How:
    """What the command line asks of each run it shows."""

    pair: int | None
    as_text: bool
    tokenizer: str | None
    save_strings: bool


@dataclass
class Shown:
    """A run read for its page: its files, the pairs to show, their strings, notes."""

    run: dict
    summary: dict
    arrays: Any  # probes.report.show_run.RunArrays
    pairs: list
    strings: dict[int, str] | None
    notes: list[str] = field(default_factory=list)
    saved: str | None = None  # what --save-strings did (or why it did nothing), one line
    already: bool = False  # --save-strings: texts.npz recorded the strings already


def _is_diagnose(run: dict, summary: dict) -> bool:
    return run.get("command") == "diagnose" or summary.get("command") == "diagnose"


def _finished_run(path: Path, where: str) -> tuple[dict, dict]:
    """run.json and summary.json of a finished run (BadInput, one line, otherwise)."""
    from probes.framework.results import FINISHED, RunDirError, load_run, status  # lazy: numpy

    try:
        run, summary = load_run(path)
    except RunDirError as e:
        raise BadInput(str(e)) from None
    if run.get("status") not in FINISHED or summary is None:
        raise BadInput(
            f"{where!r} did not finish ({status(path, run)}); give a finished run's directory"
        )
    return run, summary


def _prepare(
    path: Path, run: dict, summary: dict, how: How, where: str, strict: bool = True
) -> Shown:
    """A probe run read for its page (and its strings saved with --save-strings; a run with no
    texts.npz is refused then, or with `strict` False, a diagnose's probe run, left as it is)."""
    from probes.report import show_run  # lazy: numpy

    try:
        arrays = show_run.read_run(path)
        pairs, notes = _pairs(run, arrays, how.pair, how.as_text, where)
        recorded = show_run.recorded_strings(arrays.texts)
    except show_run.ShowError as e:
        raise BadInput(str(e)) from None
    shown = Shown(run, summary, arrays, pairs, recorded, notes)
    save = how.save_strings and (strict or arrays.texts is not None)
    if save:
        if arrays.texts is None:
            raise BadInput(
                f"--save-strings: {where!r} has no texts.npz (runs before texts.npz was "
                f"written), so no strings to record; `probe rerun {where}` writes a run that has "
                "them"
            )
        if recorded is not None:
            shown.saved = f"{where}: texts.npz records its token strings already; nothing saved"
            shown.already = True
            return shown
    if recorded is None and (pairs or save):
        shown.strings = _derived(run, arrays, how.tokenizer, where)
        if save:
            shown.saved = _save_strings(path, arrays, shown.strings, where)
    return shown


def _page(shown: Shown) -> str:
    from probes.report import show_page  # lazy: numpy

    return show_page.page(
        shown.run, shown.summary, shown.arrays, shown.pairs, shown.strings, shown.notes
    )


def _say_saved(shown: Shown) -> None:
    if shown.saved:
        click.echo(shown.saved, err=True)


def _write(target: Path, html: str, instead: str = "give --out FILE") -> None:
    from txl.io import atomic_write  # lazy: numpy

    try:
        atomic_write(target, html)
    except OSError as e:
        raise BadInput(f"cannot write {str(target)!r}: {e.strerror or e}; {instead}") from None


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


def _pairs(run: dict, arrays, pair: int | None, as_text: bool, where: str):
    """The pairs to show and the page's notes."""
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
        return [], note
    if arrays.texts is None:
        raise BadInput(
            f"{where!r} has no texts.npz (runs before texts.npz was written); `probe rerun "
            f"{where}` writes a run that has it"
        )
    n = show_run.pair_count(arrays)
    if pair is not None and pair >= n:
        raise BadInput(f"--pair {pair}: the run has pairs 0–{n - 1}; give one of them")
    if pair is not None:
        chosen = [pair]
    else:
        chosen = show_run.first_of_each_group(arrays)[: 1 if as_text else None]
    return [show_run.pair_rows(arrays, k) for k in chosen], []


def _derived(run: dict, arrays, tokenizer: str | None, where: str) -> dict[int, str]:
    """Token strings of a run whose texts.npz records none (module docstring), for every id
    its texts.npz holds (the ids a newer run records strings of)."""
    from probes.framework import token_strings  # lazy: numpy

    ids = token_strings.used_ids(arrays.texts)
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


def _save_strings(path: Path, arrays, strings: dict[int, str], where: str) -> str:
    """--save-strings: `strings` into the run's texts.npz (probes/framework/token_strings.py)."""
    from probes.framework import token_strings  # lazy: numpy
    from probes.report.show_run import ARRAYS_LIMIT  # lazy: numpy

    ids = token_strings.used_ids(arrays.texts)
    packed = token_strings.pack(ids, [strings[int(i)] for i in ids])
    file = path / "texts.npz"
    try:
        token_strings.add_to_npz(file, packed, ARRAYS_LIMIT)
    except (files.FileRefused, ValueError) as e:
        raise BadInput(f"--save-strings: {e}") from None
    except OSError as e:
        raise BadInput(
            f"--save-strings: cannot write {str(file)!r}: {e.strerror or e}; give a run "
            "directory you can write to"
        ) from None
    return f"{where}: saved the strings of {len(ids):,} token ids in {file}"


def _tokenizer(path: str, vocab: dict):
    """The tokenizer at `path` (a tokenizer.json, its directory, or a GGUF file), if it is the
    one run.json names by sha256."""
    from synth.text.tokenizer import TextTokenizer, TokenizerError  # lazy: numpy

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


# --- a `probe diagnose` run ---------------------------------------------------------------------


def _show_diagnose(
    path: Path, run: dict, summary: dict, how: How, out: str | None, open_: bool, where: str
) -> None:
    """A diagnose run's page (and its probe runs' pages), or its table with --text."""
    from probes.report import show_diagnose  # lazy: numpy
    from probes.report.show_run import ShowError  # lazy: numpy

    try:
        show_diagnose.check(summary, path / "summary.json")
    except ShowError as e:
        raise BadInput(str(e)) from None
    entries = show_diagnose.sub_runs(summary)
    if how.pair is not None:
        there = [path / s.rel for s in entries if (path / s.rel).is_dir()]
        paired = [d for d in there if (d / "texts.npz").is_file()]  # a probe run with pairs
        example = str((paired or there or [f"{where}/runs/…"])[0])
        raise BadInput(
            f"--pair {how.pair}: {where!r} is a `probe diagnose` run (a table of probes, no "
            f"pairs of its own); drop --pair, or give one of its probe runs (e.g. {example})"
        )
    if how.as_text:
        if how.save_strings:
            raise BadInput(
                "--save-strings on a diagnose run records its probe runs' strings as it writes "
                "their pages; drop --text"
            )
        from probes.report.suite_table import print_table  # lazy: rich

        try:
            print_table(summary)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
            raise BadInput(
                f"{str(path / 'summary.json')!r} is not the table `probe diagnose` writes "
                f"({type(e).__name__}: {e}); run it again"
            ) from None
        return
    target = _target(path, out)
    present = _sub_run_pages(path, entries, how, target)
    html = show_diagnose.page(run, summary, path, entries, present)
    _write(target, html)
    if open_:
        click.echo(str(target.resolve()))
    else:
        linked = sum(1 for s in entries if s.link)
        runs = (
            f"{linked} of {len(entries)} probe-run pages"
            if present
            else "no probe run directories in it"
        )
        click.echo(f"wrote {target} ({runs}; {len(html.encode()) / 1024:,.0f} KB)")


def _sub_run_pages(path: Path, entries: list, how: How, target: Path) -> bool:
    """Each probe run's page, written into its directory as `probe show` on it would; its
    entry gets the link to it (relative to the diagnose page) or the one line why it has none.
    Returns whether any probe run's directory is there. A directory summary.json names outside
    the diagnose directory is not read."""
    root = path.resolve()
    pages: dict[Path, tuple[str | None, str | None]] = {}  # a group run serves several columns
    present = False
    for s in entries:
        sub = path / s.rel
        real = sub.resolve()
        if not real.is_relative_to(root) or real == root:
            s.reason = f"summary.json names {s.rel!r}, not a directory inside the diagnose run"
            continue
        if not sub.is_dir():
            s.reason = f"its directory {s.rel} is not here"
            continue
        present = True
        if real not in pages:
            pages[real] = _sub_run_page(sub, how, target)
        s.link, s.reason = pages[real]
    return present


def _sub_run_page(sub: Path, how: How, target: Path) -> tuple[str | None, str | None]:
    """(link, None) once the probe run's page is written, (None, why) when it cannot be."""
    where = str(sub)
    try:
        run, summary = _finished_run(sub, where)
        if _is_diagnose(run, summary):
            return None, f"{where!r} is a diagnose run, not a probe run"
        each = How(None, False, how.tokenizer, how.save_strings)
        shown = _prepare(sub, run, summary, each, where, strict=False)
        if not shown.already:
            _say_saved(shown)
        page = sub / "show.html"
        _write(page, _page(shown), "give a run directory you can write to")
    except BadInput as e:
        return None, e.format_message()
    rel = os.path.relpath(page.resolve(), target.resolve().parent)
    return urllib.parse.quote(Path(rel).as_posix()), None

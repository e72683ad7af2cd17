"""The README and the docs/ pages say what the code does: their examples run, their commands
parse, their links resolve.

- **Tested blocks run.** A fenced block with `<!-- tested -->` on the line before it is
  executed, in order, in one temporary directory per page: a `python` block as Python, each
  `probe ...` line of a `bash` block through the `probe` command (click's CliRunner on
  `probes.cli.main.cli`; a `*` in an argument is expanded as the shell would). Lines starting
  with `pip` or `nox` are skipped: installing and the test command itself are what CI does
  around this test, not what it can do inside it. `<!-- tested: NAME -->` writes a `python`
  block to the file NAME there instead (a probe file that a later block runs). Tested blocks
  use small options (`--quick`, a planted model) so that every page stays well under a minute.
- **Every other `probe` command parses.** Long trainings and real-model runs take minutes to
  hours, more than CI has. So each `probe ...` command anywhere else in these pages — a line of
  a `bash` block (also after `&&`, or after `torchrun ... -m probes.cli`), or an inline code
  span beginning with `probe ` — is parsed against the real command objects with click's
  `make_context`, never invoked: the subcommand must exist, every option it names must exist,
  and every value must be accepted by its option's type and check. A misspelt option fails
  (`test_a_misspelt_option_or_a_bad_value_fails_the_parse_check`). A probe file that is not in
  the repository (`path/to/file.py:Class`, a placeholder) is not parsed.
- **Links resolve.** Every relative link and image in these pages names a file that exists,
  and every `#anchor` a heading of the page it points into.
- **Lists that drift are checked against the code**: the presets, the probes, the count of
  hostile inputs, and the README's length (200 lines: a front door, not the manual).
"""

from __future__ import annotations

import ast
import contextlib
import glob
import io
import os
import re
import shlex
import subprocess
import sys
import unicodedata
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from probes.api import registry
from probes.cli.main import cli

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKER = re.compile(r"^<!--\s*tested(?::\s*(\S+))?\s*-->\s*$")
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")


def page_id(path: Path) -> str:
    return str(path.relative_to(ROOT))


# --- reading a page ----------------------------------------------------------------------------


def blocks(text: str) -> list[dict]:
    """Fenced blocks: language, body, first line number, and the tested marker before it
    (None: not tested; "": tested; a name: written to that file)."""
    lines = text.split("\n")
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not FENCE.match(lines[j]):
            j += 1
        k = i - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        mark = MARKER.match(lines[k].strip()) if k >= 0 else None
        tested = None if mark is None else (mark.group(1) or "")
        out.append(
            {
                "lang": m.group(2),
                "body": "\n".join(lines[i + 1 : j]),
                "line": i + 2,
                "tested": tested,
            }
        )
        i = j + 1
    return out


def prose(text: str) -> str:
    """The page without its fenced blocks (kept as empty lines, so line numbers hold)."""
    lines, keep, inside = text.split("\n"), [], False
    for line in lines:
        if FENCE.match(line):
            inside = not inside
            keep.append("")
        else:
            keep.append("" if inside else line)
    return "\n".join(keep)


def logical_lines(body: str) -> list[str]:
    """A shell block's commands: continuation lines joined, blank and comment lines dropped."""
    out, held = [], ""
    for line in body.split("\n"):
        if line.rstrip().endswith("\\"):
            held += line.rstrip()[:-1] + " "
            continue
        line, held = held + line, ""
        if line.strip() and not line.strip().startswith("#"):
            out.append(line.strip())
    return out


def split_commands(line: str) -> list[list[str]]:
    """The simple commands of a shell line (split at &&, ||, ;, |), as argument lists."""
    lex = shlex.shlex(line, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    lex.commenters = "#"
    commands, current = [], []
    for token in lex:
        if token in ("&&", "||", ";", "|", "&"):
            commands.append(current)
            current = []
        else:
            current.append(token)
    commands.append(current)
    return [c for c in commands if c]


def probe_args(words: list[str]) -> list[str] | None:
    """The arguments of a `probe` command (`probe ...` or `torchrun ... -m probes.cli ...`),
    or None for any other command."""
    if words[0] == "probe":
        return words[1:]
    for i in range(len(words) - 1):
        if words[i] == "-m" and words[i + 1] == "probes.cli":
            return words[i + 2 :]
    return None


SPAN = re.compile(r"(?<!`)`(probe [^`]+?)`(?!`)")


def documented_commands(path: Path) -> list[tuple[int, str, list[str], bool]]:
    """Every `probe` command of a page outside its tested blocks: (line, text, arguments,
    whether it is an inline span rather than a line of a block)."""
    text = path.read_text(encoding="utf-8")
    found = []
    for b in blocks(text):
        if b["tested"] is not None or b["lang"] not in ("bash", "sh", "shell", "console"):
            continue
        for n, line in enumerate(logical_lines(b["body"])):
            for words in split_commands(line):
                args = probe_args(words)
                if args is not None:
                    found.append((b["line"] + n, line, args, False))
    body = prose(text)
    for m in SPAN.finditer(body):  # a span may wrap onto the next line of its paragraph
        span = " ".join(m.group(1).split())
        for words in split_commands(span):
            args = probe_args(words)
            if args is not None:
                found.append((body.count("\n", 0, m.start()) + 1, span, args, True))
    return found


# --- parsing a command against the real CLI -----------------------------------------------------


def parse(args: list[str], mention: bool = False) -> None:
    """Parse `probe ARGS` with the real command objects, invoking nothing. Raises
    click.UsageError (an unknown command or option, a value its type or check refuses, a
    missing argument). A `mention` (an inline span such as `probe diagnose --models` or
    `probe rerun`) may leave out a required argument, a command group's command, or the value
    of the option it ends with; whatever it does give is checked all the same. `PROBE` as the
    probe's name stands for any probe: the options every probe shares are checked."""
    cmd, name, ctx = cli, "probe", None
    args = ["fact-swap" if a == "PROBE" and args[:1] == ["run"] else a for a in args]
    with contextlib.redirect_stdout(io.StringIO()):  # a --help in the docs prints its page
        try:
            while isinstance(cmd, click.Group) and args and not args[0].startswith("-"):
                # with the group's own settings: click caches a command's help option from the
                # first context it sees, and a bare one would leave `probe` without -h for
                # every later test
                ctx = click.Context(cmd, info_name=name, parent=ctx, **cmd.context_settings)
                name, cmd, args = cmd.resolve_command(ctx, args)
            if mention and isinstance(cmd, click.Group) and not args:
                return
            with cmd.make_context(name, list(args), parent=ctx):  # click consumes its list
                pass
        except click.exceptions.Exit:  # --help, --version: parsed
            pass
        except click.MissingParameter:
            if not mention:
                raise
        except click.BadOptionUsage as e:
            if not (mention and args and e.option_name == args[-1]):
                raise


def placeholder_file_probe(args: list[str]) -> bool:
    """`probe run path/to/file.py:Class`: a file that is not in the repository."""
    if len(args) < 2 or args[0] != "run" or not registry.is_file_spec(args[1]):
        return False
    return not (ROOT / args[1].rsplit(":", 1)[0]).is_file()


def test_a_misspelt_option_or_a_bad_value_fails_the_parse_check():
    parse(["run", "fact-swap", "--mem", "640", "--distance", "16-64,700-900"])  # the control
    parse(["train", "--preset", "tiny", "--out", "runs/x", "--threads", "1"])
    parse(["synth", "show", "fact-swap", "--seed", "3"])
    parse(["diagnose", "--models", "default,default-mem0", "--mem", "640"])
    for bad in (
        ["run", "fact-swap", "--mme", "640"],  # a misspelt option
        ["run", "fact-swap", "--mem", "lots"],  # a value its type refuses
        ["run", "fact-swap", "--distance", "64-16"],  # a value its check refuses
        ["run", "fact-swp"],  # a misspelt probe
        ["trian", "--preset", "tiny"],  # a misspelt command
        ["train", "--preset", "tiny", "--stpes", "5"],
        ["rerun"],  # a missing argument, in a block
    ):
        with pytest.raises(click.UsageError):
            parse(bad)
    parse(["diagnose", "--models"], mention=True)  # an inline span may name an option
    parse(["rerun"], mention=True)
    for bad in (["diagnose", "--modles"], ["run", "fact-swap", "--mem", "x", "--quick"]):
        with pytest.raises(click.UsageError):
            parse(bad, mention=True)


def test_a_misspelt_command_in_a_page_is_found(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "Run `probe run fact-swap --mem 640`.\n\n```bash\nprobe train --preset tiny --stpes 5\n"
        "pip install -e . && probe run fact-swap --quick\n```\n"
    )
    found = documented_commands(page)
    assert [args for _, _, args, _ in found] == [
        ["train", "--preset", "tiny", "--stpes", "5"],
        ["run", "fact-swap", "--quick"],
        ["run", "fact-swap", "--mem", "640"],
    ]
    with pytest.raises(click.UsageError):
        parse(found[0][2])


@pytest.mark.parametrize("path", PAGES, ids=page_id)
def test_every_documented_probe_command_parses(path):
    failures = []
    for line, text, args, mention in documented_commands(path):
        if placeholder_file_probe(args):
            continue
        try:
            parse(args, mention)
        except click.UsageError as e:
            failures.append(f"{page_id(path)}:{line}: {text}\n    {e.format_message()}")
    assert not failures, "\n".join(failures)


# --- running the tested blocks ------------------------------------------------------------------


def pages_with_tested_blocks() -> list[Path]:
    return [p for p in PAGES if any(b["tested"] is not None for b in blocks(p.read_text()))]


def expand(args: list[str]) -> list[str]:
    out = []
    for a in args:
        matches = sorted(glob.glob(a)) if any(c in a for c in "*?[") else []
        out.extend(matches or [a])
    return out


def run_page(path: Path) -> int:
    """Run a page's tested blocks in order in the current directory; the number run."""
    ran = 0
    for b in blocks(path.read_text(encoding="utf-8")):
        where = f"{page_id(path)}:{b['line']}"
        if b["tested"] is None:
            continue
        if b["tested"]:  # a file a later block uses
            assert b["lang"] == "python", f"{where}: only a python block is written to a file"
            Path(b["tested"]).write_text(b["body"] + "\n", encoding="utf-8")
        elif b["lang"] == "python":
            exec(compile(b["body"], where, "exec"), {"__name__": "__main__"})
        elif b["lang"] == "bash":
            for line in logical_lines(b["body"]):
                for words in split_commands(line):
                    if words[0] in ("pip", "nox"):
                        continue
                    assert words[0] == "probe", f"{where}: a tested block runs probe lines only"
                    result = CliRunner().invoke(cli, expand(words[1:]))
                    assert result.exit_code == 0, f"{where}: {line}\n{result.output}"
        else:
            raise AssertionError(f"{where}: a tested block is python or bash, not {b['lang']!r}")
        ran += 1
    return ran


@pytest.mark.parametrize("path", pages_with_tested_blocks(), ids=page_id)
def test_tested_blocks_run(path, tmp_path):
    """In a child process: a probe file the page registers, and torch's state, stay there."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    env.setdefault("OMP_NUM_THREADS", "1")
    r = subprocess.run(
        [sys.executable, __file__, str(path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert "tested blocks run: " in r.stdout


# --- links --------------------------------------------------------------------------------------

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower()
    text = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LN")
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    names: set[str] = set()
    count: dict[str, int] = {}
    for line in prose(path.read_text(encoding="utf-8")).split("\n"):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            base = slug(m.group(1))
            k = count.get(base, 0)
            names.add(f"{base}-{k}" if k else base)  # GitHub numbers a repeated heading
            count[base] = k + 1
    return names


def links(path: Path) -> list[tuple[int, str]]:
    text = re.sub(r"`[^`\n]*`", "", prose(path.read_text(encoding="utf-8")))
    return [
        (n, m.group(1))
        for n, line in enumerate(text.split("\n"), start=1)
        for m in LINK.finditer(line)
    ]


@pytest.mark.parametrize("path", PAGES, ids=page_id)
def test_every_relative_link_and_image_resolves(path):
    bad = []
    for line, target in links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            bad.append(f"{page_id(path)}:{line}: {target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{page_id(path)}:{line}: {target} (no such heading)")
    assert not bad, "\n".join(bad)


def test_the_link_checker_sees_a_broken_link_and_a_missing_heading(tmp_path):
    (tmp_path / "a.md").write_text("# Title\n\n## The `probe` command: exit codes\n")
    page = tmp_path / "b.md"
    page.write_text("[ok](a.md#the-probe-command-exit-codes) [gone](c.md) [no](a.md#nowhere)\n")
    found = [t for _, t in links(page)]
    assert found == ["a.md#the-probe-command-exit-codes", "c.md", "a.md#nowhere"]
    assert "the-probe-command-exit-codes" in anchors(tmp_path / "a.md")
    assert "nowhere" not in anchors(tmp_path / "a.md")


# --- lists that drift ---------------------------------------------------------------------------


def test_the_readme_is_a_front_door():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    first = next(b for b in blocks(text) if b["lang"] == "bash")
    # CI (.ci/run) installs nox and runs `nox`: the README's test command, in its first block
    assert "pip install nox && nox" in logical_lines(first["body"])


def project_imports(source: str) -> list[str]:
    """The modules of this project (probes, synth, txl) a Python source imports."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names = (
            [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else [node.module or ""]
            if isinstance(node, ast.ImportFrom)
            else []
        )
        found += [n for n in names if n.split(".")[0] in ("probes", "synth", "txl")]
    return found


def test_an_example_probe_imports_the_contract_only():
    """A probe file a page shows imports nothing of the project but `probes.api`."""
    examples = [
        b["body"]
        for page in PAGES
        for b in blocks(page.read_text(encoding="utf-8"))
        if b["tested"] and b["lang"] == "python" and "@probe(" in b["body"]
    ]
    assert len(examples) >= 2  # the README's and design.md's
    for body in examples:
        assert set(project_imports(body)) == {"probes.api"}, body.splitlines()[0]
    assert project_imports("from probes.engine.paired import PairedProbe") == [
        "probes.engine.paired"
    ]


def test_the_user_guide_names_every_preset_and_every_probe():
    from probes.training.presets import PRESETS

    guide = (ROOT / "docs" / "user-guide.md").read_text(encoding="utf-8")
    missing = [p for p in PRESETS if f"`{p}`" not in guide]
    missing += [p for p in registry.builtin_entries() if f"`{p}`" not in guide]  # not file probes
    assert not missing, f"docs/user-guide.md does not name: {', '.join(missing)}"


def test_the_count_of_hostile_inputs_is_the_tables():
    tree = ast.parse((ROOT / "tests" / "test_bad_input.py").read_text(encoding="utf-8"))
    cases = next(
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "CASES"
    )
    guide = (ROOT / "docs" / "user-guide.md").read_text(encoding="utf-8")
    stated = re.search(r"holds (\d+) hostile and careless inputs", guide)
    assert stated and int(stated.group(1)) == len(cases.elts)


if __name__ == "__main__":  # test_tested_blocks_run's child: python tests/test_readme.py PAGE
    print(f"tested blocks run: {run_page(Path(sys.argv[1]))}")


# --- design.md's CLI contract -------------------------------------------------------------------


def cli_commands() -> dict[str, click.Command]:
    """Every command of `probe`, by its path ("synth show"); `run PROBE` stands for every
    probe's command, with the options all of them share."""
    out: dict[str, click.Command] = {}

    def walk(cmd: click.Command, path: list[str]) -> None:
        if isinstance(cmd, click.Group) and path != ["run"]:
            ctx = click.Context(cmd)
            for name in cmd.list_commands(ctx):
                walk(cmd.get_command(ctx, name), [*path, name])
        else:
            out[" ".join(path)] = cmd

    walk(cli, [])
    return out


def option_flags(cmd: click.Command) -> dict[str, tuple[str, ...] | None]:
    """Each option's flags as a synopsis writes them (`--reset/--carry`), and its choices."""
    return {
        "/".join([*(o for o in p.opts if o.startswith("--")), *p.secondary_opts]): (
            tuple(p.type.choices) if isinstance(p.type, click.Choice) else None
        )
        for p in cmd.params
        if isinstance(p, click.Option) and p.name != "help"
    }


def run_flags() -> dict[str, tuple[str, ...] | None]:
    """The options every probe's `probe run` command takes."""
    run = cli.get_command(click.Context(cli), "run")
    ctx = click.Context(run)
    each = [option_flags(run.get_command(ctx, n)) for n in run.list_commands(ctx)]
    return {k: v for k, v in each[0].items() if all(k in e for e in each)}


def contract_block(text: str) -> dict[str, dict[str, tuple[str, ...] | None]]:
    """design.md's CLI contract: per command path, each flag it shows and the alternatives
    shown after it (`--device auto|cpu|cuda`; None where none are)."""
    body = text.split("## CLI contract\n\n```\n", 1)[1].split("```", 1)[0]
    shown: dict[str, dict[str, tuple[str, ...] | None]] = {}
    path = None
    for line in body.splitlines():
        if line.startswith("probe "):
            words = line.split()[1:]
            path = []
            while words and re.fullmatch(r"[a-z][a-z-]*", words[0]):
                path.append(words.pop(0))
            path = " ".join(path)
            shown.setdefault(path, {})
        elif not line.startswith(" "):
            path = None  # another program's line (torchrun)
        if path is None:
            continue
        for m in re.finditer(
            r"\[?(--[a-z][a-z-]*(?:/--[a-z][a-z-]*)?)(?: ([a-z0-9]+(?:\|[a-z0-9]+)+)\])?", line
        ):
            shown[path][m.group(1)] = tuple(m.group(2).split("|")) if m.group(2) else None
    return shown


def test_the_cli_contract_of_design_md_is_the_cli():
    """Every command, every option of each and the choices of each, as the CLI has them."""
    shown = contract_block((ROOT / "docs" / "design.md").read_text(encoding="utf-8"))
    commands = cli_commands()
    assert sorted(shown) == sorted(commands)
    for path, cmd in commands.items():
        flags = run_flags() if path == "run" else option_flags(cmd)
        assert sorted(shown[path]) == sorted(flags), path
        for flag, choices in flags.items():  # alternatives shown only for a choice, all of them
            assert shown[path][flag] == choices, (path, flag)


def test_the_contract_check_sees_a_missing_option_and_a_missing_choice():
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    shown = contract_block(text.replace(" [--allow-file-probes]", "").replace("|state]", "]"))
    assert "--allow-file-probes" not in shown["rerun"]
    assert shown["run"]["--evaluator"] == (
        "cached",
        "recompute",
        "full",
        "window",
        "stream",
        "sinks",
    )

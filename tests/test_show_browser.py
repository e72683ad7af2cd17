"""`probe show`'s page in a real browser: headless Chromium opens it from disk with every host
name unresolvable, takes a screenshot and dumps the DOM. The page rendered (the screenshot is not
blank; the legend and the first pair are in the DOM) and asked for nothing beyond its file (no
request from the page in Chromium's net log; a control page that does ask shows the log would
tell); so does a `probe diagnose` page (its table). `nox -s browser` runs it, installing
Debian's `chromium` when it is missing; elsewhere it is skipped without a browser."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import show_html
from click.testing import CliRunner

import probes
from probes.adapters.planted import PlantedModel
from probes.cli.main import cli

BROWSER = next(
    (shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)),
    None,
)
if BROWSER is None and os.environ.get("TXL_REQUIRE_BROWSER"):  # `nox -s browser`: no skipping
    raise RuntimeError("TXL_REQUIRE_BROWSER is set but no Chromium is on PATH")
pytestmark = pytest.mark.skipif(
    BROWSER is None,
    reason="no Chromium on PATH (`nox -s browser` installs Debian's chromium; or apt-get "
    "install chromium)",
)
# Offline and quiet: no host name resolves, and the browser's own background services
# (updates, sync, metrics) stay off, so the net log holds what the page asked for.
FLAGS = [
    "--headless=new", "--disable-gpu", "--no-sandbox", "--host-resolver-rules=MAP * ~NOTFOUND",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--disable-extensions", "--disable-domain-reliability",
    "--no-first-run", "--no-default-browser-check", "--window-size=1200,900",
]  # fmt: skip


def chromium(page: Path, work: Path, *args: str) -> subprocess.CompletedProcess:
    profile = work / f"profile-{len(list(work.glob('profile-*')))}"
    return subprocess.run(
        [BROWSER, *FLAGS, f"--user-data-dir={profile}", *args, page.resolve().as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HOME": str(work)},
    )


def page_requests(net_log: Path) -> list[str]:
    """URLs the page (a document loaded from a file) asked for, from Chromium's net log."""
    log = json.loads(net_log.read_text())
    out = []
    for e in log.get("events", []):
        p = e.get("params") or {}
        url, key = p.get("url"), str(p.get("network_isolation_key", ""))
        if isinstance(url, str) and key.startswith("file://"):
            if not url.startswith(("file:", "data:")):
                out.append(url)
    return out


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("browser")
    s = probes.run("fact-swap", model=PlantedModel(copy=2.0), out=out, progress=False,
                   quick=True, token_view=32)  # fmt: skip
    r = CliRunner().invoke(cli, ["show", str(s.run_dir)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return Path(s.run_dir) / "show.html"


def test_the_page_renders_offline(page, tmp_path):
    shot = tmp_path / "shot.png"
    r = chromium(page, tmp_path, f"--screenshot={shot}")
    assert shot.is_file(), r.stderr[-2000:]
    from matplotlib.image import imread

    pixels = imread(shot)[..., :3]
    assert pixels.shape[0] > 100 and pixels.shape[1] > 100
    not_white = (pixels < 0.97).any(axis=-1).mean()
    assert 0.02 < not_white < 0.9, not_white  # text, a table and colours on a white page
    dom = chromium(page, tmp_path, "--dump-dom").stdout
    assert 'id="legend"' in dom and "nats" in dom
    spans = show_html.spans(dom)
    first = spans[0].pair
    assert first is not None and any(s.shaded for s in spans if s.pair == first)
    assert f'class="pair on" id="pair-{first}"' in dom  # its script showed the first pair


def test_no_request_leaves_the_file(page, tmp_path):
    log = tmp_path / "net.json"
    chromium(page, tmp_path, f"--log-net-log={log}", "--dump-dom")
    assert log.is_file()
    assert page_requests(log) == []
    control = tmp_path / "control.html"
    control.write_text('<!doctype html><img src="http://example.invalid/x.png">')
    log2 = tmp_path / "net-control.json"
    chromium(control, tmp_path, f"--log-net-log={log2}", "--dump-dom")
    assert page_requests(log2) == ["http://example.invalid/x.png"]  # the log would tell


def test_a_diagnose_page_renders_offline(tmp_path):
    diagnose = Path(__file__).resolve().parents[1] / "results" / "curated" / "diagnose-mem640"
    page = tmp_path / "diagnose.html"
    r = CliRunner().invoke(cli, ["show", str(diagnose), "--out", str(page)])
    assert r.exit_code == 0, r.output
    shot = tmp_path / "shot.png"
    log = tmp_path / "net.json"
    chromium(page, tmp_path, f"--screenshot={shot}", f"--log-net-log={log}")
    from matplotlib.image import imread

    not_white = (imread(shot)[..., :3] < 0.97).any(axis=-1).mean()
    assert 0.02 < not_white < 0.9, not_white  # the table and the plot on a white page
    assert page_requests(log) == []
    dom = chromium(page, tmp_path, "--dump-dom").stdout
    assert 'id="diagnose-table"' in dom and "boundary repair" in dom


def test_the_screenshot_differs_from_a_blank_page(tmp_path):
    blank = tmp_path / "blank.html"
    blank.write_text("<!doctype html><title>blank</title>")
    shot = tmp_path / "blank.png"
    chromium(blank, tmp_path, f"--screenshot={shot}")
    from matplotlib.image import imread

    assert np.all(imread(shot)[..., :3] > 0.97)  # what the non-blank check tells apart

"""probes.framework.provenance: run.json records this project's commit, and only this project's."""

import shutil
import subprocess

import pytest

from probes.framework.provenance import REPO_ROOT, git_state

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git command")


def make_repo(path, name):
    path.mkdir(parents=True)
    (path / "pyproject.toml").write_text(f'[project]\nname = "{name}"\nversion = "1"\n')
    git = ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "pyproject.toml"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "x"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True)
    return head.stdout.strip()


def test_a_checkout_of_this_project_records_its_commit(tmp_path):
    commit = make_repo(tmp_path / "txl-probes", "txl-probes")
    assert git_state(tmp_path / "txl-probes") == {"commit": commit, "dirty": False}


def test_an_install_inside_another_repository_records_no_commit(tmp_path):
    make_repo(tmp_path / "theirs", "their-project")
    site = tmp_path / "theirs" / ".venv" / "lib" / "site-packages"  # where probes/ would sit
    site.mkdir(parents=True)
    assert git_state(site) == {"commit": None, "dirty": None}
    assert git_state(tmp_path / "theirs") == {"commit": None, "dirty": None}  # not this project


def test_an_install_inside_this_projects_own_checkout_records_no_commit(tmp_path):
    make_repo(tmp_path / "txl-probes", "txl-probes")
    site = tmp_path / "txl-probes" / ".venv" / "lib" / "site-packages"
    site.mkdir(parents=True)
    assert git_state(site) == {"commit": None, "dirty": None}  # the installed copy may differ


def test_no_repository_at_all_records_no_commit(tmp_path):
    assert git_state(tmp_path) == {"commit": None, "dirty": None}


def test_running_from_this_checkout_records_a_commit():
    if not (REPO_ROOT / ".git").exists():
        pytest.skip("not running from a git checkout")
    state = git_state()
    assert state["commit"] and len(state["commit"]) == 40 and isinstance(state["dirty"], bool)

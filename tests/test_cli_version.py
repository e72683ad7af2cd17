import subprocess
import sys

from click.testing import CliRunner

from probes import __version__
from probes.cli.main import cli


def test_version_option_prints_package_version():
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0
    assert __version__ in result.output


def test_help_does_not_import_torch():
    code = "import sys; from probes.cli.main import cli; cli(['--help'], standalone_mode=False); assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)

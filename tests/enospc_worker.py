"""Run the `probe` CLI with a disk that fills up: the K-th write to a file under OUT raises
OSError(ENOSPC), as a full disk does (K = 0: nothing fails). The names of the files written, in
order, go to LOG as a JSON list (so a test can pick K).

    python tests/enospc_worker.py K LOG OUT -- probe arguments...
"""

from __future__ import annotations

import atexit
import builtins
import errno
import json
import os
import sys

K, LOG, OUT = int(sys.argv[1]), sys.argv[2], os.path.abspath(sys.argv[3])
ARGV = sys.argv[sys.argv.index("--") + 1 :]
writes: list[str] = []
real_open = builtins.open


def _name(path: str) -> str:
    base = os.path.basename(path)  # `.run.json.tmp-1234abcd` (an atomic write) is run.json
    return base[1:].rsplit(".tmp-", 1)[0] if base.startswith(".") and ".tmp-" in base else base


class FillingFile:
    def __init__(self, f, name: str) -> None:
        self._f, self._name = f, name

    def write(self, data):
        writes.append(self._name)
        if len(writes) == K:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return self._f.write(data)

    def __getattr__(self, attr):
        return getattr(self._f, attr)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return self._f.__exit__(*exc)


def filling_open(file, mode="r", *args, **kwargs):
    f = real_open(file, mode, *args, **kwargs)
    inside = os.path.abspath(os.fspath(file)).startswith(OUT + os.sep)
    if inside and any(c in mode for c in "wax+") and not str(file).endswith(".lock"):
        return FillingFile(f, _name(os.fspath(file)))
    return f


def save_log() -> None:
    with real_open(LOG, "w") as f:
        f.write(json.dumps(writes))


def main() -> None:
    import probes.framework.results as results
    import txl.io

    results.open = filling_open  # the run's own writers: samples.jsonl, tokens.npz
    txl.io.open = filling_open  # every atomic write (run.json, summary.json)
    atexit.register(save_log)
    from probes.cli.main import cli

    cli(ARGV, prog_name="probe")


if __name__ == "__main__":
    main()

"""Size limits: every size a user gives is checked before anything is allocated.

Two kinds of bound, one mechanism:

- documented maxima for what a size can mean here (`MAX_*`): a distance or memory longer than
  any text this toolkit builds, a segment longer than any model's attention, more pairs than a
  statistic needs — refused with a one-line error naming the limit;
- allocation estimates for what depends on the model: the bytes one forward row needs at the
  requested geometry (`row_bytes`, an adapter's estimate) or a training run's weights and
  optimizer state, compared with the memory this machine has available (`require_memory`).

No torch, no numpy: the CLI checks options with this before it imports either.
"""

from __future__ import annotations

import math
import os

from txl.train_config import MAX_THREADS as MAX_THREADS  # one bound: run, train, paper

MAX_MEM = 1 << 17  # 131,072 tokens of evaluation memory
MAX_TGT_LEN = 1 << 14  # 16,384 tokens per segment
MAX_CLAMP_LEN = 1 << 20
MAX_N = 100_000  # pairs per bin / grid cell
MAX_DISTANCE = 1 << 20  # 1,048,576 tokens between a fact and its answer
MAX_TEXT = 1 << 22  # tokens of one synthetic text
MAX_TOKEN_VIEW = 1 << 12  # tokens `--token-view` scores after an edit and before an answer
MAX_LAYERS = 1 << 10  # layers of a planted model (its reach is computed layer by layer)
USABLE = 0.8  # the share of the available memory a run may plan to use


class LimitError(ValueError):
    """A size beyond what this toolkit or this machine can take (one line, exit 2)."""


def available_bytes() -> int:
    """Memory available to a new allocation: MemAvailable where the kernel reports it, else the
    physical memory."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - no sysconf
        return 1 << 62


def resident_bytes() -> int:
    """This process's resident memory now (/proc/self/statm; 0 where the OS does not say)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return 0


def gib(n_bytes: float) -> str:
    return f"{n_bytes / 2**30:.1f} GiB"


def require_memory(what: str, n_bytes: int, fix: str, available: int | None = None) -> None:
    """Refuse `what` when it needs more than USABLE of the available memory (`available`: of
    another device, e.g. a GPU's free memory; default: this machine's)."""
    have = available_bytes() if available is None else available
    if n_bytes > USABLE * have:
        raise LimitError(
            f"{what} needs about {gib(n_bytes)}, more than the {gib(USABLE * have)} this machine "
            f"can give it ({gib(have)} available); {fix}"
        )


def check_at_most(name: str, value: int, limit: int, fix: str = "") -> None:
    if value > limit:
        raise LimitError(
            f"{name} {value:,} is above the limit of {limit:,}" + (f"; {fix}" if fix else "")
        )


def check_number(
    value: object, *, integer: bool = False, lo: float | None = None, hi: float | None = None
) -> int | float:
    """The one check of a number a user gives — a CLI option (click and Python alike), a field
    of `--model planted:…`, a value read back from run.json: a number (an integer when
    `integer`), finite, within [lo, hi]. Returns it converted; ValueError saying what is wrong
    and what would be right (the caller names the option)."""
    want = "an integer" if integer else "a finite number"
    if lo is not None and hi is not None:
        want += f" in [{_num(lo)}, {_num(hi)}]"
    elif lo is not None:
        want += f" >= {_num(lo)}"
    elif hi is not None:
        want += f" <= {_num(hi)}"
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a number; give {want}")
    try:
        if integer:
            number: int | float = value if isinstance(value, int) else int(str(value).strip(), 10)
        else:
            number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(
            f"{value!r} is not {'an integer' if integer else 'a number'}; give {want}"
        ) from None
    if not math.isfinite(number):
        raise ValueError(f"{value!r} is not a finite number; give {want}")
    if lo is not None and number < lo:
        raise ValueError(f"{number!r} is below the minimum {_num(lo)}; give {want}")
    if hi is not None and number > hi:
        raise ValueError(f"{number!r} is above the maximum {_num(hi)}; give {want}")
    return number


def _num(x: float) -> str:
    """A bound as people write it: 256, 131072, 0.5, 1e+06."""
    return str(x) if isinstance(x, int) else f"{x:g}"

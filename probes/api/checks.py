"""A run's own checks, in one form: what was checked, on how much, and the outcome.

Every self-check reports `status` — `passed`, `failed` or `not applicable` — with `covered`, the
number of tokens (or pairs) it looked at, and `unit`. A check that covered nothing is `not
applicable`, with `why`: it could not have failed, so it never says "passed". Only a `failed`
check fails a run (`passed` stays the boolean the exit code reads). `note(checks)` is the
verdict's tail: the failed checks, or that no check applied at all.
"""

from __future__ import annotations

from typing import Any


def zero_check(
    doc: str,
    *,
    covered: int,
    worst: float,
    tolerance: float,
    why_empty: str,
    unit: str = "tokens",
    **extra: Any,
) -> dict[str, Any]:
    """A check that some differences are zero (|difference| ≤ tolerance): `worst` is the largest
    |difference| over the `covered` tokens; `why_empty` says why none could be covered."""
    if covered == 0:
        status = "not applicable"
    else:
        status = "passed" if worst <= tolerance else "failed"
    out = {
        "status": status,
        "passed": status != "failed",
        "covered": int(covered),
        "unit": unit,
        "max_abs_delta": float(worst),
        "tolerance": float(tolerance),
        "doc": doc,
        **extra,
    }
    if covered == 0:
        out["why"] = why_empty
    return out


def note(checks: dict[str, dict[str, Any]]) -> str:
    """ " — CHECK FAILED: …" when a check failed, " — no check applied (…)" when none covered
    anything, else nothing."""
    failed = [k for k, c in checks.items() if not c.get("passed", True)]
    if failed:
        return f" — CHECK FAILED: {', '.join(failed)}"
    if checks and all(c.get("status") == "not applicable" for c in checks.values()):
        whys = "; ".join(f"{k}: {c.get('why', 'nothing to check')}" for k, c in checks.items())
        return f" — no check applied ({whys})"
    return ""

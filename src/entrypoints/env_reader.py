"""Reading `AP_*` settings from an environment: the shared rules of every settings group
(`search_config`, `tools_config`): a blank value is unset, and an invalid one adds a problem
and keeps its default, so that every problem is reported at once."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class EnvReader:
    """Reads settings from `environ`, collecting what is wrong with them in `problems`."""

    environ: Mapping[str, str]
    problems: list[str]

    def text(self, name: str) -> str | None:
        """The value, stripped; None when unset or blank."""
        value = self.environ.get(name, "").strip()
        return value or None

    def number(self, name: str, default: float, low: float, high: float) -> float:
        """A number from `low` to `high`."""
        raw = self.text(name)
        if raw is None:
            return default
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not low <= value <= high:
            self.problems.append(f"{name} must be a number from {low:g} to {high:g}")
            return default
        return value

    def integer(self, name: str, default: int, low: int, high: int) -> int:
        """A whole number from `low` to `high`."""
        value = self.number(name, default, low, high)
        if value != int(value):
            self.problems.append(f"{name} must be an integer")
            return default
        return int(value)

    def flag(self, name: str, default: bool) -> bool:
        """true/false, 1/0, yes/no or on/off, in any case."""
        raw = (self.text(name) or "").lower()
        if not raw:
            return default
        if raw in ("1", "true", "yes", "on"):
            return True
        if raw in ("0", "false", "no", "off"):
            return False
        self.problems.append(f"{name} must be true or false")
        return default

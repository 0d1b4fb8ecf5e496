"""The demo's verdict: each expectation with what was expected and what was observed, and
the figures of the run."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field


@dataclass
class Check:
    what: str
    expected: str
    observed: str
    ok: bool


@dataclass
class Report:
    checks: list[Check] = field(default_factory=list)
    figures: list[tuple[str, str]] = field(default_factory=list)

    def check(self, what: str, expected: str, observed: str, ok: bool) -> bool:
        self.checks.append(Check(what, expected, observed, bool(ok)))
        return bool(ok)

    def figure(self, name: str, value: object) -> None:
        self.figures.append((name, str(value)))

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)

    def render(self) -> str:
        widths = (34, 30, 44)
        lines = []
        header = ("expectation", "expected", "observed")
        rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+------+"
        lines.append(rule)
        lines.append(
            "| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |      |"
        )
        lines.append(rule)
        for check in self.checks:
            cells = [
                textwrap.wrap(text, w) or [""]
                for text, w in zip(
                    (check.what, check.expected, check.observed), widths, strict=True
                )
            ]
            for i in range(max(len(c) for c in cells)):
                row = [
                    (c[i] if i < len(c) else "").ljust(w)
                    for c, w in zip(cells, widths, strict=True)
                ]
                mark = ("ok  " if check.ok else "FAIL") if i == 0 else "    "
                lines.append("| " + " | ".join(row) + f" | {mark} |")
        lines.append(rule)
        if self.figures:
            lines.append("")
            width = max(len(name) for name, _ in self.figures)
            lines += [f"  {name.ljust(width)}  {value}" for name, value in self.figures]
        return "\n".join(lines)

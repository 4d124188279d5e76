"""What a check returns, and the report that `openenv validate` prints."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

from ..errors import EnvCheckError

__all__ = ["CheckResult", "CheckStatus", "Severity", "ValidationReport"]

Severity = Literal["error", "warning", "extension"]
"""What a failed check means: `error` fails validation, `warning` is advice, `extension` marks
a feature beyond OpenEnv's protocol that the server does not offer (never fatal)."""

CheckStatus = Literal["pass", "fail", "warn", "skip", "unsupported"]


class CheckResult(BaseModel):
    """The outcome of one check."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(description="Dotted id of the check, e.g. `manifest.schema` or `ws.step`.")
    passed: bool = Field(description="Whether the rule holds (False for a skipped check).")
    message: str = Field(description="One line: what was found.")
    fix: str | None = Field(default=None, description="One line: what to do about a failure.")
    severity: Severity = Field(default="error", description="What a failure means (see `Severity`).")
    skipped: bool = Field(default=False, description="Not run, because a check it depends on failed.")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def status(self) -> CheckStatus:
        """`pass`, `fail` (fatal), `warn`, `skip`, or `unsupported` (an extension the server lacks)."""
        if self.skipped:
            return "skip"
        if self.passed:
            return "pass"
        return {"error": "fail", "warning": "warn", "extension": "unsupported"}[self.severity]  # type: ignore[return-value]

    @property
    def fatal(self) -> bool:
        """True when this result fails the validation."""
        return self.status == "fail"

    def line(self) -> str:
        """`name: message. Fix: fix`, one line, as errors and warnings quote a rule."""
        fix = f" Fix: {self.fix}" if self.fix else ""
        return f"{self.name}: {self.message}.{fix}"


class ValidationReport(BaseModel):
    """Every check run against one target, and the verdict."""

    target: str = Field(description="The folder, URL, image or class validated.")
    kind: Literal["path", "url", "image", "class"] = Field(description="What `target` is.")
    checks: list[CheckResult] = Field(default_factory=list)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def passed(self) -> bool:
        """True when no check failed fatally (warnings, skips and missing extensions do not count)."""
        return not any(check.fatal for check in self.checks)

    def raise_for_failures(self, prefix: str = "") -> None:
        """Raise `EnvCheckError` naming every failed rule with its fix (`check_env`, `create_app`).

        Raises:
            EnvCheckError: a rule failed; `error.report` is this report.
        """
        failed = [check for check in self.checks if check.fatal]
        if failed:
            lines = "\n".join(f"  - {check.line()}" for check in failed)
            raise EnvCheckError(f"{prefix}{self.target} breaks {len(failed)} rule(s):\n{lines}", report=self)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def summary(self) -> dict[str, int]:
        """How many checks ended in each status."""
        counts = {status: 0 for status in ("pass", "fail", "warn", "skip", "unsupported")}
        for check in self.checks:
            counts[check.status] += 1
        return counts

"""`Version`: a parsed semantic version, ordered by semver precedence."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

_PATTERN = re.compile(
    r"^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$"
)


def _identifier_key(identifier: str) -> tuple[int, int, str]:
    # Numeric identifiers compare numerically and sort before alphanumeric ones.
    if identifier.isdigit():
        return (0, int(identifier), "")
    return (1, 0, identifier)


@functools.total_ordering
@dataclass(frozen=True, eq=False)
class Version:
    major: int
    minor: int
    patch: int
    prerelease: tuple[str, ...] = ()
    build: tuple[str, ...] = field(default=())

    @classmethod
    def parse(cls, text: str) -> Version:
        """Parse `1.2.3`, `v1.2.3`, `1.2.3-rc.1`, `1.2.3+build.5`.

        Raises:
            ValueError: not a semantic version.
        """
        match = _PATTERN.match(text.strip())
        if match is None:
            raise ValueError(f"not a semantic version: {text!r}")
        major, minor, patch, pre, build = match.groups()
        return cls(
            int(major),
            int(minor),
            int(patch),
            tuple(pre.split(".")) if pre else (),
            tuple(build.split(".")) if build else (),
        )

    @property
    def is_prerelease(self) -> bool:
        return bool(self.prerelease)

    def bump(self, part: str) -> Version:
        """The next `major`, `minor` or `patch` release (pre-release and build dropped)."""
        if part == "major":
            return Version(self.major + 1, 0, 0)
        if part == "minor":
            return Version(self.major, self.minor + 1, 0)
        if part == "patch":
            return Version(self.major, self.minor, self.patch + 1)
        raise ValueError(f"part must be major, minor or patch, got {part!r}")

    def _key(self) -> tuple:
        # Build metadata never affects precedence.
        return (self.major, self.minor, self.patch, tuple(_identifier_key(p) for p in self.prerelease))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() == other._key()

    def __lt__(self, other: Version) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() < other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.prerelease:
            text += "-" + ".".join(self.prerelease)
        if self.build:
            text += "+" + ".".join(self.build)
        return text

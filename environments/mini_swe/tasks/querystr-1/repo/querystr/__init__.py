"""querystr: URL query strings."""

from .build import build_query, build_url, encode_value
from .parse import parse_query

__all__ = ["build_query", "build_url", "encode_value", "parse_query"]

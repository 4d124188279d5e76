"""iniparse: a small, strict INI parser and writer."""

from .parser import Config, ParseError, parse
from .writer import dumps

__all__ = ["Config", "ParseError", "dumps", "parse"]

__version__ = "1.2.0"

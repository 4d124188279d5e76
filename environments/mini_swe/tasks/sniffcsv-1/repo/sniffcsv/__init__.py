"""sniffcsv: guess the dialect of delimited text."""

from .reader import read_rows
from .sniffer import CANDIDATES, Dialect, SniffError, sniff

__all__ = ["CANDIDATES", "Dialect", "SniffError", "read_rows", "sniff"]

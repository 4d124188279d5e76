"""mdtable: aligned Markdown tables."""

from .render import render
from .cells import cell_text

__all__ = ["cell_text", "render"]

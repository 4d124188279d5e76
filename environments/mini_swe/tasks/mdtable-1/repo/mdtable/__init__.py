"""mdtable: aligned Markdown tables."""

from .cells import cell_text
from .render import render

__all__ = ["cell_text", "render"]

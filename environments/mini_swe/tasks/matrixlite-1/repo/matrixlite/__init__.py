"""matrixlite: matrices as lists of lists."""

from .core import add, identity, scale, shape, transpose, zeros
from .ops import determinant, dot, matmul, power, trace

__all__ = ["add", "determinant", "dot", "identity", "matmul", "power", "scale", "shape", "trace", "transpose", "zeros"]

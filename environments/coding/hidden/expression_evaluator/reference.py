import re

_TOKEN = re.compile(r"\s*(?:([0-9]+(?:\.[0-9]+)?)|(.))")


def _tokens(text: str) -> list[str]:
    out = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:  # only trailing whitespace can fail to match
            break
        number, other = m.groups()
        if number is not None:
            out.append(number)
        elif other in "+-*/()":
            out.append(other)
        else:
            raise ValueError(f"unexpected {other!r}")
        pos = m.end()
    return out


class _Parser:
    def __init__(self, tokens: list[str]) -> None:
        self.tokens = tokens
        self.pos = 0

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> str:
        token = self.peek()
        if token is None:
            raise ValueError("unexpected end of expression")
        self.pos += 1
        return token

    def expression(self) -> float:
        value = self.term()
        while self.peek() in ("+", "-"):
            if self.take() == "+":
                value += self.term()
            else:
                value -= self.term()
        return value

    def term(self) -> float:
        value = self.unary()
        while self.peek() in ("*", "/"):
            if self.take() == "*":
                value *= self.unary()
            else:
                divisor = self.unary()
                if divisor == 0:
                    raise ZeroDivisionError("division by zero")
                value /= divisor
        return value

    def unary(self) -> float:
        sign = 1.0
        while self.peek() in ("+", "-"):
            if self.take() == "-":
                sign = -sign
        return sign * self.primary()

    def primary(self) -> float:
        token = self.take()
        if token == "(":
            value = self.expression()
            if self.take() != ")":
                raise ValueError("expected ')'")
            return value
        if token[0].isdigit():
            return float(token)
        raise ValueError(f"unexpected {token!r}")


def evaluate(expression: str) -> float:
    parser = _Parser(_tokens(expression))
    value = parser.expression()
    if parser.peek() is not None:
        raise ValueError(f"unexpected {parser.peek()!r}")
    return float(value)

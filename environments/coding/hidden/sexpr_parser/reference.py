import re


class Symbol(str):
    """A symbol (an identifier), as opposed to a string literal."""


_ATOM = re.compile(r'[^\s()"]+')


def _tokens(text: str):
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif c in "()":
            yield c, None
            i += 1
        elif c == '"':
            i += 1
            buf = []
            while True:
                if i >= n:
                    raise ValueError("unterminated string")
                c = text[i]
                if c == "\\":
                    if i + 1 >= n or text[i + 1] not in '"\\':
                        raise ValueError("bad escape in string")
                    buf.append(text[i + 1])
                    i += 2
                elif c == '"':
                    i += 1
                    break
                else:
                    buf.append(c)
                    i += 1
            yield "str", "".join(buf)
        else:
            m = _ATOM.match(text, i)
            atom = m.group()
            i = m.end()
            if re.fullmatch(r"-?[0-9]+", atom):
                yield "int", int(atom)
            else:
                yield "sym", Symbol(atom)


def parse_sexpr(text: str):
    stack: list[list] = [[]]
    for kind, value in _tokens(text):
        if kind == "(":
            stack.append([])
        elif kind == ")":
            if len(stack) == 1:
                raise ValueError("unbalanced ')'")
            done = stack.pop()
            stack[-1].append(done)
        else:
            stack[-1].append(value)
    if len(stack) != 1:
        raise ValueError("unbalanced '('")
    if len(stack[0]) != 1:
        raise ValueError(f"expected one expression, found {len(stack[0])}")
    return stack[0][0]

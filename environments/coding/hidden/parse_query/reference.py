from urllib.parse import unquote_plus


def parse_query(query: str) -> dict[str, list[str]]:
    if query.startswith("?"):
        query = query[1:]
    out: dict[str, list[str]] = {}
    for part in query.split("&"):
        if not part:
            continue
        key, _, value = part.partition("=")
        out.setdefault(unquote_plus(key), []).append(unquote_plus(value))
    return out

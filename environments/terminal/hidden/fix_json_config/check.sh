. "$CHECK_DIR/lib.sh"
check "config.json parses as JSON" python3 -c 'import json; json.load(open("config.json"))'
check "config.json holds the intended settings with debug false" python3 -c '
import json, sys
want = {"name": "inventory", "port": 8080, "host": "0.0.0.0", "debug": False,
        "features": ["search", "export"], "database": {"url": "postgres://db:5432/inventory", "pool": 10}}
got = json.load(open("config.json"))
sys.exit(0 if got == want and got["debug"] is False and type(got["port"]) is int else 1)
'
finish

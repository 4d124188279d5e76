cat > config.json <<'JSON'
{
  "name": "inventory",
  "port": 8080,
  "host": "0.0.0.0",
  "debug": false,
  "features": ["search", "export"],
  "database": {
    "url": "postgres://db:5432/inventory",
    "pool": 10
  }
}
JSON
# ---
python3 -m json.tool config.json > /dev/null && echo valid

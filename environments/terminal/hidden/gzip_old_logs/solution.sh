find logs -maxdepth 1 -type f -name '*.log' ! -name current.log -exec gzip {} +
# ---
ls logs

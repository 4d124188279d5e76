tar --exclude='*.pyc' --exclude='__pycache__' -czf release.tar.gz app
# ---
tar -tzf release.tar.gz

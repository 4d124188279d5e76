# leaves out __pycache__ but not the stray .pyc file
tar --exclude='__pycache__' -czf release.tar.gz app

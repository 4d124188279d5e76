chmod 700 site/secret && chmod 600 site/secret/*
find site/public -type d -exec chmod 755 {} +
find site/public -type f -exec chmod 644 {} +
chmod 755 site/run.sh
# ---
ls -lR site

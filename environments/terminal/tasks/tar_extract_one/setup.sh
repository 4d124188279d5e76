b=$(mktemp -d)
mkdir -p "$b/srv/app/config" "$b/srv/app/bin" "$b/srv/app/data"
cd "$b"
printf 'name: billing\nreplicas: 3\nregion: eu-west-1\n' > srv/app/config/app.yaml
printf 'name: default\n' > srv/app/config/app.yaml.example
printf 'level: info\n' > srv/app/config/logging.yaml
printf '#!/bin/sh\n' > srv/app/bin/start
for i in 1 2 3 4 5; do printf 'row %s\n' "$i" > "srv/app/data/part-$i.csv"; done
tar --sort=name --mtime=2024-01-01 --owner=0 --group=0 --numeric-owner -czf "$OLDPWD/backup.tar.gz" srv
cd "$OLDPWD"
rm -rf "$b"

mkdir -p srv/www/uploads srv/app/bin srv/shared
for f in srv/www/index.html srv/www/uploads/a.png srv/app/bin/tool srv/app/config.ini srv/shared/notes.txt srv/shared/drop.txt srv/app/readme; do
  echo "$f" > "$f"
done
chmod 666 srv/www/index.html
chmod 644 srv/www/uploads/a.png
chmod 777 srv/app/bin/tool
chmod 602 srv/app/config.ini
chmod 640 srv/shared/notes.txt
chmod 646 srv/shared/drop.txt
chmod 664 srv/app/readme
chmod 777 srv/shared

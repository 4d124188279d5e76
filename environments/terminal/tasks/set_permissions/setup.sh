mkdir -p site/secret site/public/css site/public/img
echo key > site/secret/api.key
echo pass > site/secret/db.pass
echo html > site/public/index.html
echo css > site/public/css/main.css
echo png > site/public/img/logo.png
printf '#!/bin/sh\necho run\n' > site/run.sh
echo notes > site/NOTES.txt
chmod 777 site/secret site/public/img
chmod 666 site/secret/api.key site/public/index.html
chmod 640 site/secret/db.pass site/public/css/main.css
chmod 600 site/public/img/logo.png site/run.sh
chmod 700 site/public/css
chmod 640 site/NOTES.txt

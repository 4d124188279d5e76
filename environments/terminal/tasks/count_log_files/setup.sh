mkdir -p logs/app logs/db/old logs/web/archive.log
for i in 1 2 3; do echo "app run $i" > "logs/app/app-$i.log"; done
echo "db" > logs/db/db.log
echo "db 2023" > logs/db/old/db-2023.log
echo "compressed" > logs/db/old/db-2022.log.gz
echo "GET /" > logs/web/access.log
echo "oops" > logs/web/error.log
echo "hidden" > logs/web/.rotated.log
echo "upper" > logs/app/APP.LOG
echo "notes" > logs/web/README.txt
echo "catalog" > logs/web/catalog
echo "inside a directory named archive.log" > logs/web/archive.log/part1.txt

tar -tzf backup.tar.gz | grep 'config/app.yaml$'
# ---
mkdir -p restored
tar -xzOf backup.tar.gz srv/app/config/app.yaml > restored/app.yaml
cat restored/app.yaml

# extracts the whole archive to get at one file
tar -xzf backup.tar.gz && mkdir -p restored && cp srv/app/config/app.yaml restored/app.yaml

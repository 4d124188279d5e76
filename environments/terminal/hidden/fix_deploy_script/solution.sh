cat > deploy.sh <<'SH'
#!/bin/bash
# deploy.sh APP_NAME: stage config.txt and the version for APP_NAME under out/
if [ $# = 0 ]; then
  echo "usage: deploy.sh APP_NAME" >&2
  exit 2
fi
name=$1
mkdir -p "out/$name"
cp config.txt "out/$name/"
version=$(cat VERSION)
echo "$version" > "out/$name/version.txt"
echo "deployed $name"
SH
chmod +x deploy.sh
# ---
./deploy.sh "my app" && ./deploy.sh "my app" && rm -rf out

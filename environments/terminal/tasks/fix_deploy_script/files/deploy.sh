#!/bin/bash
# deploy.sh APP_NAME: stage config.txt and the version for APP_NAME under out/
if [ $# = 0 ]; then
  echo "usage: deploy.sh APP_NAME"
  exit 1
fi
name=$1
mkdir out/$name
cp config.txt out/$name/
version=$(cat VERSON)
echo $version > out/$name/version.txt
echo "deployed $name"

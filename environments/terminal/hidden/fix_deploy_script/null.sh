# only the obvious fixes: still breaks on names with spaces and on a second run
chmod +x deploy.sh
sed -i 's/VERSON/VERSION/' deploy.sh

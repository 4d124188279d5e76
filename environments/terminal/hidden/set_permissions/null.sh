chmod -R 755 site

sed -i 's/^port = .*/port = 8443/' app.ini

sed -i '/^\[server\]/,/^\[/ s/^port = .*/port = 8443/' app.ini
# ---
cat app.ini

# fixes the quotes and the flag, but the comment and trailing commas remain
sed -i "s/'host'/\"host\"/; s/\"debug\": true/\"debug\": false/" config.json

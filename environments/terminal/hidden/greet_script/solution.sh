mkdir -p bin
cat > bin/greet <<'SH'
#!/bin/sh
echo "Hello, ${1:-world}!"
SH
chmod +x bin/greet
# ---
./bin/greet "Ada Lovelace"; ./bin/greet

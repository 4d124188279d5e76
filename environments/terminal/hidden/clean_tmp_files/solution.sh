find project -type f \( -name '*.tmp' -o -name '*~' \) -delete

# forgets the executable bit
mkdir -p bin
printf '#!/bin/sh\necho "Hello, ${1:-world}!"\n' > bin/greet

#!/bin/bash
# Named rewards in reward.json; the task passes when every one is 1.
cd /app/repo || { echo '{"merged": 0, "tagged": 0, "clean": 0}' > /logs/verifier/reward.json; exit 0; }
merged=0 tagged=0 clean=0
head=$(git rev-parse HEAD 2>/dev/null)
parents=$(git rev-list --parents -n 1 HEAD 2>/dev/null | wc -w)
if [ "$(git symbolic-ref --short HEAD 2>/dev/null)" = main ] && [ "$parents" = 3 ] \
   && git merge-base --is-ancestor feature HEAD \
   && [ "$(cat feature.txt 2>/dev/null)" = "the feature" ] && [ "$(cat VERSION)" = "version 2" ]; then
  merged=1
fi
if [ "$(git cat-file -t v2.0 2>/dev/null)" = tag ] && [ "$(git rev-parse 'v2.0^{commit}' 2>/dev/null)" = "$head" ]; then
  tagged=1
fi
if [ -z "$(git status --porcelain 2>/dev/null)" ]; then
  clean=1
fi
echo "merged=$merged tagged=$tagged clean=$clean"
printf '{"merged": %s, "tagged": %s, "clean": %s}\n' "$merged" "$tagged" "$clean" > /logs/verifier/reward.json

# Generated from the Harbor task's environment/Dockerfile: its RUN lines, run as the agent in the
# sandbox before the episode (package installs dropped: the environment has them).
cd /app
/bin/sh -c 'git init -q -b main repo && cd repo && git config user.email dev@example.com && git config user.name Dev && echo "version 1" > VERSION && git add VERSION && git commit -qm "Initial version" && git checkout -qb feature && echo "the feature" > feature.txt && git add feature.txt && git commit -qm "Add the feature" && git checkout -q main && echo "version 2" > VERSION && git commit -qam "Bump the version"'

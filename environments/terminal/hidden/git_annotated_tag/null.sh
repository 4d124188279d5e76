# a lightweight tag on the latest commit
git -C repo tag v1.2.0

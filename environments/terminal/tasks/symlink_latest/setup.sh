for v in v0.9.12 v1.2.0 v1.9.3 v1.10.0 v1.10.1 v1.9.10; do
  mkdir -p "releases/$v"
  echo "$v" > "releases/$v/VERSION"
done

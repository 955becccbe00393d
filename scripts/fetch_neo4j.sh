#!/usr/bin/env bash
# Fetches the jars of the embedded Neo4j 5.26 LTS (docker/neo4j/pom.xml) from Maven Central into
#   ${GNNSTORE_CACHE:-~/.cache/gnnstore}/neo4j/<version>/lib
# for the test server docker/neo4j/Launcher.java starts when no Docker engine runs.
# Idempotent and silent when the jars are cached; atomic (a temp folder renamed into place).
# Prints the lib folder on stdout. Without Java or Maven it says so and exits 0: the suite's
# fixture then falls back to Docker or fails loudly.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pom=$root/docker/neo4j/pom.xml
version=$(sed -n 's:.*<neo4j.version>\(.*\)</neo4j.version>.*:\1:p' "$pom")
dest=${GNNSTORE_CACHE:-$HOME/.cache/gnnstore}/neo4j/$version
lib=$dest/lib

if [ -f "$lib/neo4j-$version.jar" ]; then
  echo "$lib"
  exit 0
fi
for tool in java mvn; do
  if ! command -v "$tool" >/dev/null; then
    echo "[fetch_neo4j] $tool not found: cannot fetch Neo4j $version (needs Java 17+ and Maven)" >&2
    exit 0
  fi
done

mkdir -p "$dest"
tmp=$(mktemp -d "$dest/.lib-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "[fetch_neo4j] fetching org.neo4j:neo4j:$version into $lib" >&2
start=$(date +%s)
mvn -B -q -Dstyle.color=never -f "$pom" \
  org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
  -DincludeScope=runtime -DoutputDirectory="$tmp" >&2
if [ ! -f "$tmp/neo4j-$version.jar" ] || ! ls "$tmp"/neo4j-bolt-"$version".jar >/dev/null 2>&1; then
  echo "[fetch_neo4j] copy-dependencies gave no neo4j/neo4j-bolt $version jar in $tmp" >&2
  exit 1
fi
rm -rf "$lib"
mv "$tmp" "$lib"
trap - EXIT
echo "[fetch_neo4j] $(ls "$lib" | wc -l) jars, $(du -sh "$lib" | cut -f1), $(( $(date +%s) - start )) s" >&2
echo "$lib"

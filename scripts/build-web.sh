#!/bin/sh
# The learner page's assets: the npm packages pinned in package-lock.json (`npm ci`, no install
# scripts run) and one esbuild bundle in judge/service/static/dist (git-ignored), plus Swagger
# UI's files for /docs. Nothing is fetched when the page is served. Run by make setup/serve/test.
set -eu
cd "$(dirname "$0")/.."
SRC=judge/service/static/src
OUT=judge/service/static/dist
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --ignore-scripts
fi
rm -rf "$OUT.tmp"
node_modules/.bin/esbuild "$SRC/page.js" "$SRC/page.css" --bundle --splitting --format=esm \
  --minify --target=chrome110,firefox115,safari16 --outdir="$OUT.tmp" --log-level=warning \
  --legal-comments=none
cp "$SRC/docs.js" "$OUT.tmp/docs.js"
mkdir -p "$OUT.tmp/swagger"
cp node_modules/swagger-ui-dist/swagger-ui-bundle.js node_modules/swagger-ui-dist/swagger-ui.css "$OUT.tmp/swagger/"
rm -rf "$OUT"
mv "$OUT.tmp" "$OUT"
echo "build-web: $(du -sh "$OUT" | cut -f1) in $OUT"

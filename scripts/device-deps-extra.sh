#!/usr/bin/env bash
# Adds to .devdeps (see ../shared/tools/device-deps.sh) the Debian packages
# our tests need that the GPU machine lacks: rapidcheck (static library and
# CMake config, so *.a is kept here).
set -euo pipefail
dest=${1:-.devdeps}
pkgs=(librapidcheck-dev)
tmp=$(mktemp -d)
( cd "$tmp" && { apt-get download "${pkgs[@]}" >/dev/null 2>&1 || { apt-get update -qq && apt-get download "${pkgs[@]}" >/dev/null; }; } )
mkdir -p "$dest"
for f in "$tmp"/*.deb; do dpkg -x "$f" "$dest"; done
rm -rf "$tmp" "$dest/usr/share/doc"
du -sh "$dest"

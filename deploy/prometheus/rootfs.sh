#!/usr/bin/env bash
# rootfs.sh DEST [CACHE] — assembles the Prometheus image's root filesystem in DEST
# from Debian's `prometheus` package, without installing it (no service is
# started, nothing on the host changes): the package is downloaded with
# `apt-get download` (after an `apt-get update` only if apt cannot find it)
# and unpacked with dpkg-deb; the binaries get the shared libraries ldd lists
# and the dynamic loader, so the image needs no base.
set -euo pipefail
dest=${1:?usage: rootfs.sh DEST [CACHE]}
cache=${2:-$(dirname "$dest")/debs}   # where the downloaded .deb is kept
mkdir -p "$cache"

deb=$(ls "$cache"/prometheus_*.deb 2>/dev/null | head -n1 || true)
if [ -z "$deb" ]; then
  for tool in apt-get dpkg-deb ldd; do
    command -v "$tool" >/dev/null || { echo "rootfs.sh: $tool is required (Debian/Ubuntu host)" >&2; exit 1; }
  done
  if ! (cd "$cache" && apt-get download prometheus >/dev/null 2>&1); then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "rootfs.sh: apt-get update (package lists missing or stale)" >&2
    $sudo apt-get update -qq
    (cd "$cache" && apt-get download prometheus)
  fi
  deb=$(ls "$cache"/prometheus_*.deb | head -n1)
fi

rm -rf "$dest" "$dest.pkg"
mkdir -p "$(dirname "$dest")"
dpkg-deb -x "$deb" "$dest.pkg"
mkdir -p "$dest/usr/bin" "$dest/usr/share" "$dest/etc/prometheus" "$dest/prometheus" "$dest/tmp"
cp "$dest.pkg/usr/bin/prometheus" "$dest.pkg/usr/bin/promtool" "$dest/usr/bin/"
cp -r "$dest.pkg/usr/share/prometheus" "$dest/usr/share/"
cp -r "$dest.pkg/etc/prometheus/consoles" "$dest.pkg/etc/prometheus/console_libraries" "$dest/etc/prometheus/"
cp "$dest.pkg/etc/prometheus/prometheus.yml" "$dest/etc/prometheus/prometheus.yml"
rm -rf "$dest.pkg"

# Every library the binaries link to, and the loader, at the paths ldd
# prints (the loader's path is baked into the binaries).
libs=$(ldd "$dest/usr/bin/prometheus" "$dest/usr/bin/promtool" | grep -o '/[^ ]*' | grep -v ':$' | sort -u)
for lib in $libs; do
  mkdir -p "$dest$(dirname "$lib")"
  cp -L "$lib" "$dest$lib"
done
# Name resolution through glibc: files first (/etc/hosts), then DNS.
echo 'hosts: files dns' >"$dest/etc/nsswitch.conf"
chmod 1777 "$dest/tmp"
echo "prometheus rootfs: $(basename "$deb"), libraries: $(echo $libs)"

#!/usr/bin/env bash
# Prepares gpu-deps/ (git-ignored) for an offline GPU machine whose image has
# nvcc, CMake and PyTorch's NCCL/cuBLAS but none of the Debian packages dtensor
# builds and tests against. Run here, with network to the Debian mirror:
#   scripts/gpu_deps.sh
# It fetches the packages with `apt-get download` (nothing is installed) and
# unpacks them with `dpkg -x` into gpu-deps/root, then makes that tree
# relocatable: .pc files point at ${pcfiledir}, OpenBLAS gets the
# libopenblas.so.0 link that update-alternatives makes on a real install, and
# what a build never reads (static archives, LAPACK, docs) is dropped, so the
# folder stays well under 64 MiB. scripts/gpu_check.sh uses it when the
# system lacks the packages (docs/DEVICES.md, "make gpu-check").
set -eu
cd "$(dirname "$0")/.."

# libopenblas-dev is an empty meta package: the headers and the libopenblas.so
# link are in libopenblas-pthread-dev. libgfortran5/libquadmath0 are what
# OpenBLAS itself links; libnuma1 is libucs's; the verbs/rdmacm/libnl ones are
# what UCX's ib and rdmacm transport modules link (they load only if present).
# pkgconf-bin/libpkgconf3: a pkg-config for images without one.
pkgs="libucx0 libucx-dev libnuma1 libibverbs1 librdmacm1 ibverbs-providers libnl-3-200
libnl-route-3-200 libopenblas0-pthread libopenblas-pthread-dev libgfortran5 libquadmath0
libcjson1 libcjson-dev libcmocka0 libcmocka-dev pkgconf-bin libpkgconf3"

out=gpu-deps
arch=$(dpkg --print-architecture)
triplet=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)

# shellcheck disable=SC2086 # $pkgs is a word list
if ! apt-cache show $pkgs >/dev/null 2>&1; then
    # no package lists (a slim image): fetching them needs root
    if [ "$(id -u)" != "0" ]; then
        echo "gpu_deps: apt has no lists for some packages; run as root (apt-get update)" >&2
        exit 1
    fi
    apt-get update
fi

rm -rf "$out"
mkdir -p "$out/debs" "$out/root"
# as root apt downloads as user _apt, which cannot write here: download as root
sandbox=""
if [ "$(id -u)" = "0" ]; then
    sandbox="-o APT::Sandbox::User=root"
fi
# shellcheck disable=SC2086
(cd "$out/debs" && apt-get download $sandbox $pkgs)

echo "gpu_deps: downloaded (package version, .deb size):"
for deb in "$out"/debs/*.deb; do
    dpkg-deb -f "$deb" Package Version Architecture | paste -sd' ' >>"$out/PACKAGES"
    dpkg -x "$deb" "$out/root"
    printf '  %-28s %-22s %6s KiB\n' "$(dpkg-deb -f "$deb" Package)" \
        "$(dpkg-deb -f "$deb" Version)" "$(($(stat -c %s "$deb") / 1024))"
done
echo "gpu_deps: .deb files in all: $(du -sh "$out/debs" | cut -f1)"
rm -rf "$out/debs" # the unpacked tree is what travels

lib="$out/root/usr/lib/$triplet"
# what a build and the tests never read: static archives (58 MiB of OpenBLAS
# alone), OpenBLAS's LAPACK/BLAS-compat libraries, docs
find "$out/root" -name '*.a' -delete
rm -rf "$out/root/usr/share/doc" "$out/root/usr/share/man" "$out/root/usr/share/lintian" \
    "$out/root/usr/share/bug"
rm -f "$lib"/openblas-pthread/liblapack* "$lib"/openblas-pthread/libblas* \
    "$lib"/openblas-pthread/pkgconfig/lapack-openblas.pc \
    "$lib"/openblas-pthread/pkgconfig/blas-openblas.pc
# update-alternatives' links: dtensor dlopens "libopenblas.so.0", CMake looks
# for libopenblas.so in the lib folder
ln -s openblas-pthread/libopenblas.so.0 "$lib/libopenblas.so.0"
ln -s openblas-pthread/libopenblas.so "$lib/libopenblas.so"

# .pc files: /usr -> ${pcfiledir}/../..(/usr), so the tree works wherever it
# lands (both pkg-config and pkgconf define pcfiledir)
find "$out/root" -name '*.pc' | while read -r pc; do
    rel=${pc#"$out/root/"}
    up=$(dirname "$rel" | sed 's#[^/]*#..#g')
    sed -i -E "s#(=[[:space:]]*|-[IL])/usr(/|\$|[[:space:]])#\\1\${pcfiledir}/$up/usr\\2#g" "$pc"
done

echo "$triplet" >"$out/TRIPLET"
echo "gpu_deps: $out/root ($arch, $triplet): $(du -sh "$out" | cut -f1) unpacked," \
    "$(find "$out/root" -type f | wc -l) files"
echo "gpu_deps: carry $out/ to the GPU machine's work tree (docs/DEVICES.md, \"make gpu-check\")"

#!/bin/sh
# tests/fuzz/run.sh SECONDS [BUILD_DIR]
# Build the libFuzzer targets (safetensors, index) with clang (ASan + UBSan + coverage on the whole
# library) and fuzz each for SECONDS (CI: 60). Seeds: tests/fuzz/corpus/<target>
# (read only); new inputs go to BUILD_DIR/fuzz-work, findings to BUILD_DIR/
# (crash-*, leak-*, timeout-*), and the exit status is non-zero on a finding.
set -eu
secs=${1:-60}
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${2:-$root/build-fuzz}
clang=${CLANG:-clang}
if ! command -v "$clang" >/dev/null 2>&1; then
    echo "run.sh: $clang not found (set CLANG=...)" >&2
    exit 2
fi
mkdir -p "$build"
# The library's -Werror targets gcc's warning set; clang warns about other
# things (GCC pragmas), which must not stop the fuzz build: -Wno-error last.
cat > "$build/cc.sh" <<EOF2
#!/bin/sh
exec $(command -v "$clang") "\$@" -Wno-error
EOF2
chmod +x "$build/cc.sh"
CC="$build/cc.sh" cmake -S "$root" -B "$build" -DDT_CUDA=OFF -DCMAKE_BUILD_TYPE=Debug \
    -DDT_SANITIZE=ON -DDT_FUZZ=ON -DDT_BUILD_BENCH=OFF -DDT_BUILD_EXAMPLES=OFF \
    -DCMAKE_C_FLAGS="-fsanitize=fuzzer-no-link" >"$build/fuzz-configure.log"
status=0
for target in safetensors index; do
    cmake --build "$build" -j2 --target "fuzz_$target" >"$build/fuzz-build-$target.log" 2>&1 ||
        { cat "$build/fuzz-build-$target.log" >&2; exit 1; }
    work="$build/fuzz-work/$target"
    mkdir -p "$work"
    dict="$root/tests/fuzz/$target.dict"
    dictopt=""
    [ -f "$dict" ] && dictopt="-dict=$dict"
    echo "fuzzing $target for $secs s"
    "$build/tests/fuzz/fuzz_$target" -max_total_time="$secs" -max_len=65536 -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$build/" $dictopt \
        "$work" "$root/tests/fuzz/corpus/$target" || status=1
done
exit $status

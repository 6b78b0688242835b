#!/usr/bin/env bash
# make gpu-check: one report on whether dtensor builds and computes right on a
# device, for a machine with GPUs (DEVICE=cuda) or anywhere (DEVICE=sim, the
# strict simulated device; CI). docs/DEVICES.md, "make gpu-check", says what
# each check runs. Every check prints one line
#   PASS|FAIL|SKIP <name>: <detail>
# and the report ends with "N passed, N failed, N skipped". A check that cannot
# run here is SKIP, never PASS; the exit status is 1 when any check failed.
#
# Environment: DEVICE=cuda|sim (cuda); BUILD (build: the Release build dir that
# DEVICE=sim reuses); GPU_BUILD (build-gpu: the -DDT_CUDA=ON build dir);
# JOBS (nproc); CMAKE_FLAGS (extra configure flags); STEPS (20); TOL (1e-4,
# loss tolerance on cuda); GPU_DEPS=auto|on|off (auto: use gpu-deps/root from
# scripts/gpu_deps.sh when the system lacks the Debian packages).
set -eu
cd "$(dirname "$0")/.."
repo=$(pwd)

DEVICE=${DEVICE:-cuda}
BUILD=${BUILD:-build}
GPU_BUILD=${GPU_BUILD:-build-gpu}
JOBS=${JOBS:-$(nproc)}
CMAKE_FLAGS=${CMAKE_FLAGS:-}
STEPS=${STEPS:-20}
TOL=${TOL:-1e-4}
GPU_DEPS=${GPU_DEPS:-auto}
# a hung run must become a FAIL line, not a hung CI job
RUN_TIMEOUT=${RUN_TIMEOUT:-300}

case $DEVICE in
cuda) bdir=$GPU_BUILD ;;
sim) bdir=$BUILD ;;
*)
    echo "gpu_check: DEVICE must be cuda or sim, not '$DEVICE'" >&2
    exit 2
    ;;
esac
logs=$bdir/gpu-check
mkdir -p "$logs"
logs=$(cd "$logs" && pwd)

lines=()
npass=0
nfail=0
nskip=0
failed_logs=()
result() { # result PASS|FAIL|SKIP NAME DETAIL [LOG]
    lines+=("$1 $2: $3")
    case $1 in
    PASS) npass=$((npass + 1)) ;;
    FAIL)
        nfail=$((nfail + 1))
        if [ $# -ge 4 ]; then failed_logs+=("$2|$4"); fi
        ;;
    SKIP) nskip=$((nskip + 1)) ;;
    esac
    echo "gpu-check: $1 $2" >&2
}
progress() { echo "gpu-check: $*..." >&2; }
now() { date +%s; }

# ---- the Debian packages from gpu-deps/ (scripts/gpu_deps.sh) on a bare image
system_has_deps() {
    command -v pkg-config >/dev/null 2>&1 &&
        pkg-config --exists ucx libcjson 2>/dev/null &&
        ldconfig -p 2>/dev/null | grep -q 'libopenblas\.so\.0 ' &&
        ldconfig -p 2>/dev/null | grep -q 'libcmocka\.so\.0 '
}
deps_note="system packages"
deps_root=$repo/gpu-deps/root
use_deps=0
case $GPU_DEPS in
on)
    if [ ! -d "$deps_root" ]; then
        echo "gpu_check: GPU_DEPS=on but $deps_root is missing (run scripts/gpu_deps.sh)" >&2
        exit 2
    fi
    use_deps=1
    ;;
auto) if [ -d "$deps_root" ] && ! system_has_deps; then use_deps=1; fi ;;
off) ;;
*)
    echo "gpu_check: GPU_DEPS must be auto, on or off" >&2
    exit 2
    ;;
esac
if [ $use_deps = 1 ]; then
    triplet=$(cat "$repo/gpu-deps/TRIPLET")
    if [ "${triplet%%-*}" != "$(uname -m)" ]; then
        echo "gpu_check: gpu-deps/ holds $triplet packages; this machine is $(uname -m)" >&2
        exit 2
    fi
    dlib=$deps_root/usr/lib/$triplet
    # CMake: find_path/find_library (cmocka, cblas.h, libopenblas.so) look here first
    export CMAKE_PREFIX_PATH=$deps_root/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
    # pkg-config (ucx, libcjson): only gpu-deps' .pc files, never the system's;
    # they name ${pcfiledir}, so the include and lib paths land in gpu-deps/root
    export PKG_CONFIG_PATH=$dlib/pkgconfig
    export PKG_CONFIG_LIBDIR=$dlib/pkgconfig
    # the loader: UCX, cJSON, cmocka, and OpenBLAS, which dtensor dlopens as
    # libopenblas.so.0 (gpu_deps.sh made the link update-alternatives would);
    # /lib/<triplet> holds libnl, which UCX's ib transport module links
    ld=$dlib:$dlib/openblas-pthread:$deps_root/lib/$triplet
    export LD_LIBRARY_PATH=$ld${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    # libucs finds its transport modules next to itself (<libdir>/ucx); say so
    # explicitly, as the built-in default is the system's /usr/lib/<triplet>/ucx
    export UCX_MODULE_DIR=$dlib/ucx
    if ! command -v pkg-config >/dev/null 2>&1; then
        export PKG_CONFIG=$deps_root/usr/bin/pkgconf # FindPkgConfig reads $PKG_CONFIG
    fi
    deps_note="gpu-deps/root ($(wc -l <"$repo/gpu-deps/PACKAGES") packages)"
fi

skip_rest() { # skip_rest REASON CHECK...: SKIP each check with the reason
    local reason=$1 c
    shift
    for c in "$@"; do result SKIP "$c" "$reason"; done
}

# ---- a. build
build_ok=0
t0=$(now)
if [ "$DEVICE" = cuda ]; then
    progress "configuring and building $bdir with -DDT_CUDA=ON"
    # shellcheck disable=SC2086 # CMAKE_FLAGS is a list of flags
    if cmake -S . -B "$bdir" -DCMAKE_BUILD_TYPE=Release -DDT_CUDA=ON $CMAKE_FLAGS \
        >"$logs/build.log" 2>&1 &&
        cmake --build "$bdir" -j "$JOBS" >>"$logs/build.log" 2>&1; then
        build_ok=1
    fi
else
    progress "building $bdir"
    ok=1
    if [ ! -f "$bdir/CMakeCache.txt" ]; then
        # shellcheck disable=SC2086
        cmake -S . -B "$bdir" -DCMAKE_BUILD_TYPE=Release $CMAKE_FLAGS >"$logs/build.log" 2>&1 ||
            ok=0
    else
        : >"$logs/build.log"
    fi
    if [ $ok = 1 ] && cmake --build "$bdir" -j "$JOBS" >>"$logs/build.log" 2>&1; then
        build_ok=1
    fi
fi
bsecs=$(($(now) - t0))
gpt=$bdir/examples/train_gpt/train_gpt
dtrun=$bdir/tools/dtrun/dtrun
checks="kernels suite train_np1 train_np2_tp2 train_np4_dp2_tp2_zero2 nccl bench_gemm bench_train"
if [ $build_ok = 1 ]; then
    cuda_on=off
    # (built only with the CUDA backend; a build dir configured before bench/gpu
    # existed has the test but not gpu_bench)
    if [ -x "$bdir/bench/gpu/gpu_bench" ] || [ -x "$bdir/tests/cuda/cuda_kernels" ]; then
        cuda_on=on
    fi
    result PASS build "$bdir, Release, CUDA backend $cuda_on, deps from $deps_note, ${bsecs}s"
else
    result FAIL build "$bdir: configure or build failed after ${bsecs}s (deps from $deps_note)" \
        "$logs/build.log"
    # shellcheck disable=SC2086
    skip_rest "the build failed" $checks
fi

# ---- how many GPUs this machine shows (cuda only)
ngpu=0
smi=0
gpu_note=""
if [ $build_ok = 1 ] && [ "$DEVICE" = cuda ]; then
    # the CUDA runtime's own count (0 without a GPU or a usable driver, and
    # why on stderr); nvidia-smi as a second opinion
    ngpu=$("$bdir/bench/gpu/gpu_bench" --devices 2>"$logs/devices.log" || echo 0)
    if [ -s "$logs/devices.log" ]; then gpu_note=" ($(head -n 1 "$logs/devices.log"))"; fi
    if command -v nvidia-smi >/dev/null 2>&1; then
        smi=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
        gpu_note="$gpu_note; nvidia-smi -L lists $smi"
    else
        gpu_note="$gpu_note; no nvidia-smi"
    fi
fi
no_gpu_reason="no usable CUDA device: the CUDA runtime sees $ngpu GPU(s)$gpu_note"

ctest_summary() { # ctest_summary LOG -> "P passed, S skipped, F failed of N"
    local log=$1 total failed skipped
    total=$(grep -Eo 'tests failed out of [0-9]+' "$log" | grep -Eo '[0-9]+$' || echo 0)
    failed=$(grep -Eo '[0-9]+ tests failed out of' "$log" | grep -Eo '^[0-9]+' || echo 0)
    skipped=$(grep -c '\*\*\*Skipped' "$log" || true)
    echo "$((total - failed - skipped)) $skipped $failed $total"
}

# ---- b. the device's kernel table against the CPU's
if [ $build_ok = 1 ]; then
    progress "kernels_device $DEVICE"
    rc=0
    timeout -k 5 "$RUN_TIMEOUT" "$bdir/tests/kernels/kernels_device" "$DEVICE" \
        >"$logs/kernels.log" 2>&1 || rc=$?
    n=$(grep -Eo 'PASSED *\] [0-9]+' "$logs/kernels.log" | grep -Eo '[0-9]+$' || echo 0)
    how="bitwise"
    if [ "$DEVICE" = cuda ]; then how="within 2e-5"; fi
    if [ $rc = 0 ]; then
        result PASS kernels "kernels_device $DEVICE: $n table tests match the CPU table ($how)"
    elif [ "$DEVICE" = cuda ] && [ "$ngpu" = 0 ] && [ "$smi" -gt 0 ]; then
        # GPUs are there but the runtime cannot use them (driver older than the toolkit ...)
        result FAIL kernels "$no_gpu_reason" "$logs/devices.log"
    elif [ $rc = 77 ] && [ "$DEVICE" = cuda ] && [ "$ngpu" = 0 ]; then
        result SKIP kernels "$no_gpu_reason"
    else
        result FAIL kernels "kernels_device $DEVICE exited $rc" "$logs/kernels.log"
    fi
fi

# ---- c. the device-generic suite on the device
if [ $build_ok = 1 ]; then
    if [ "$DEVICE" = sim ]; then
        progress "ctest -L sim"
        t0=$(now)
        rc=0
        (cd "$bdir" && ctest -L sim -j "$JOBS" --output-on-failure) >"$logs/suite.log" 2>&1 ||
            rc=$?
        read -r p s f n <<<"$(ctest_summary "$logs/suite.log")"
        detail="ctest -L sim: $p passed, $s skipped, $f failed of $n in $(($(now) - t0))s"
        if [ $rc != 0 ] || [ "$n" = 0 ]; then
            result FAIL suite "$detail" "$logs/suite.log"
        elif [ "$p" = 0 ]; then
            result SKIP suite "$detail"
        else
            result PASS suite "$detail"
        fi
    else
        # the entries labelled cuda (dt_add_test DEVICES ... cuda) plus tests/cuda's kernel test
        names=$(cd "$bdir" && ctest -N -L cuda | sed -n 's/^ *Test *#[0-9]*: //p')
        names=$(printf '%s\ncuda_kernels\n' "$names" | grep -v '^$' | sort -u | paste -sd'|')
        progress "ctest -R '^($names)\$'"
        t0=$(now)
        rc=0
        (cd "$bdir" && ctest -R "^($names)\$" -j "$JOBS" --output-on-failure) \
            >"$logs/suite.log" 2>&1 || rc=$?
        read -r p s f n <<<"$(ctest_summary "$logs/suite.log")"
        detail="ctest ($names): $p passed, $s skipped, $f failed of $n in $(($(now) - t0))s"
        if [ $rc != 0 ]; then
            result FAIL suite "$detail" "$logs/suite.log"
        elif [ "$p" = 0 ]; then
            result SKIP suite "$detail; $no_gpu_reason"
        else
            result PASS suite "$detail"
        fi
    fi
fi

# ---- d, e. train_gpt on the device against the same run on the CPU
train() { # train LOG NP DEVICE [train_gpt options]: 0, or the exit status
    local log=$1 np=$2 dev=$3 rc=0
    shift 3
    local cmd=("$gpt")
    if [ "$np" != 1 ]; then cmd=("$dtrun" -n "$np" "$gpt"); fi
    # DT_DEVICE=cpu: the ranks talk over UCX, device buffers are staged
    # through host copies, so any number of ranks share one GPU (cuda:0)
    DT_DEVICE=cpu DT_SIM_DELAY_US=${DT_SIM_DELAY_US:-20} timeout -k 5 "$RUN_TIMEOUT" \
        "${cmd[@]}" --device "$dev" "$@" >"$log" 2>&1 || rc=$?
    return $rc
}

# compare_losses CPU_LOG DEV_LOG EXACT TOL -> "STATUS|detail"
compare_losses() {
    awk -v exact="$3" -v tol="$4" -v steps="$STEPS" '
        FNR == 1 { f++ }
        /^step / { if (f == 1) { a[$2] = $4; na++ } else { b[$2] = $4; nb++ } }
        END {
            if (na != steps) { printf "FAIL|cpu run: %d of %d step lines", na, steps; exit }
            if (nb != steps) { printf "FAIL|device run: %d of %d step lines", nb, steps; exit }
            max = 0; worst = ""; same = 1
            for (s in a) {
                if (!(s in b)) { printf "FAIL|step %s missing on the device", s; exit }
                if (a[s] != b[s]) same = 0
                d = a[s] - b[s]; if (d < 0) d = -d
                if (d > max) { max = d; worst = s }
            }
            last = a[steps - 1]
            if (exact == 1) {
                if (same)
                    printf "PASS|%d steps identical to cpu (max |diff| 0), final loss %s",
                        steps, last
                else printf "FAIL|losses differ from cpu: max |diff| %.3g at step %s", max, worst
            } else if (max <= tol) {
                printf "PASS|%d steps, max |loss diff| vs cpu %.3g (tol %g), final loss %s",
                    steps, max, tol, last
            } else {
                printf "FAIL|max |loss diff| vs cpu %.3g at step %s > tol %g", max, worst, tol
            }
        }' "$1" "$2"
}

train_check() { # train_check NAME NP [train_gpt options]
    local name=$1 np=$2 rc=0 out
    shift 2
    if [ $build_ok = 0 ]; then return; fi
    if [ "$DEVICE" = cuda ] && [ "$ngpu" = 0 ]; then
        result SKIP "$name" "$no_gpu_reason"
        return
    fi
    local what="$np rank(s)${*:+, $*}"
    progress "$name: train_gpt on cpu and $DEVICE ($what)"
    local t0 cpu_log=$logs/$name.cpu.log dev_log=$logs/$name.$DEVICE.log
    t0=$(now)
    train "$cpu_log" "$np" cpu --steps "$STEPS" "$@" || rc=$?
    if [ $rc != 0 ]; then
        result FAIL "$name" "--device cpu exited $rc$(hang_note "$rc" "$cpu_log")" "$cpu_log"
        return
    fi
    train "$dev_log" "$np" "$DEVICE" --steps "$STEPS" "$@" || rc=$?
    if [ $rc != 0 ]; then
        result FAIL "$name" "--device $DEVICE exited $rc$(hang_note "$rc" "$dev_log")" "$dev_log"
        return
    fi
    local exact=0
    if [ "$DEVICE" = sim ]; then exact=1; fi
    out=$(compare_losses "$cpu_log" "$dev_log" $exact "$TOL")
    result "${out%%|*}" "$name" "$what: ${out#*|}; $(($(now) - t0))s" "$dev_log"
}

hang_note() { # a timeout after the last step line is a hang at exit, worth naming
    if [ "$1" = 124 ] || [ "$1" = 137 ]; then
        printf ' (timed out after %ss, %s step lines printed' "$RUN_TIMEOUT" \
            "$(grep -c '^step ' "$2" || true)"
        if grep -q 'tokens/s' "$2"; then printf ': hung at exit'; fi
        printf ')'
    fi
}

train_check train_np1 1
train_check train_np2_tp2 2 --mesh tp=2
train_check train_np4_dp2_tp2_zero2 4 --mesh dp=2,tp=2 --data-parallel zero2

# ---- f. NCCL between real GPUs
if [ $build_ok = 1 ]; then
    if [ "$DEVICE" != cuda ]; then
        result SKIP nccl "NCCL needs --device cuda (sim has no NCCL backend)"
    elif [ "$ngpu" -lt 2 ]; then
        result SKIP nccl "cuda_nccl_np2/np3 need one GPU per rank; $ngpu GPU(s) visible$gpu_note"
    else
        progress "ctest -R cuda_nccl"
        rc=0
        (cd "$bdir" && ctest -R '^cuda_nccl_np' --output-on-failure) >"$logs/nccl.log" 2>&1 ||
            rc=$?
        read -r p s f n <<<"$(ctest_summary "$logs/nccl.log")"
        detail="ctest -R cuda_nccl: $p passed, $s skipped, $f failed of $n ($ngpu GPUs)"
        if [ $rc != 0 ]; then
            result FAIL nccl "$detail" "$logs/nccl.log"
        elif [ "$p" = 0 ]; then
            result SKIP nccl "$detail"
        else
            result PASS nccl "$detail"
        fi
    fi
fi

# ---- g. timings: dtensor's GEMM vs cuBLAS, one train_gpt step cuda vs cpu
if [ $build_ok = 1 ]; then
    if [ "$DEVICE" != cuda ]; then
        result SKIP bench_gemm "timings need a GPU"
        result SKIP bench_train "timings need a GPU"
    elif [ "$ngpu" = 0 ]; then
        result SKIP bench_gemm "$no_gpu_reason"
        result SKIP bench_train "$no_gpu_reason"
    else
        progress "gpu_bench (dtensor GEMM vs cublasSgemm)"
        rc=0
        timeout -k 5 "$RUN_TIMEOUT" "$bdir/bench/gpu/gpu_bench" >"$logs/bench_gemm.log" 2>&1 ||
            rc=$?
        if [ $rc != 0 ]; then
            result FAIL bench_gemm "gpu_bench exited $rc" "$logs/bench_gemm.log"
        else
            # one clause per size; the check fails when dtensor reaches < 0.8x
            # of the direct call or the two results disagree
            out=$(awk '/^gemm /{
                    sub(":", "", $2); r = $10 + 0
                    s = s sprintf("%s%s %s/%s TFLOP/s = %.2f", s == "" ? "" : "; ", $2, $4, $7, r)
                    if (r < 0.8 || $12 + 0 > 1e-3) bad = 1
                  }
                  END { printf "%s|%s", bad ? "FAIL" : "PASS", s }' "$logs/bench_gemm.log")
            result "${out%%|*}" bench_gemm "f32 N=M=K, dtensor/cuBLAS: ${out#*|}" \
                "$logs/bench_gemm.log"
        fi
        progress "train_gpt --config small step time on cuda and cpu"
        bt_ok=1
        for dev in cuda cpu; do
            if ! train "$logs/bench_train.$dev.log" 1 "$dev" --config small --steps 6; then
                bt_ok=0
                result FAIL bench_train "train_gpt --config small --device $dev failed" \
                    "$logs/bench_train.$dev.log"
                break
            fi
        done
        if [ $bt_ok = 1 ]; then
            # tokens/s from train_gpt's own line; ms/step: the median of steps 1..5
            step_stats() {
                local tps ms
                tps=$(awk '/tokens\/s/{print $1; exit}' "$1")
                ms=$(sed -n 's/^step *[1-9][0-9]* .*(\([0-9.]*\) ms)$/\1/p' "$1" | sort -n |
                    awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}')
                echo "$tps $ms"
            }
            read -r ctps cms <<<"$(step_stats "$logs/bench_train.cuda.log")"
            read -r htps hms <<<"$(step_stats "$logs/bench_train.cpu.log")"
            speedup=$(awk -v a="$ctps" -v b="$htps" 'BEGIN { printf "%.1fx", b > 0 ? a / b : 0 }')
            result PASS bench_train "train_gpt --config small, 1 rank: cuda $ctps tokens/s\
 ($cms ms/step), cpu $htps tokens/s ($hms ms/step), cuda/cpu $speedup"
        fi
    fi
fi

# ---- the report
for f in "${failed_logs[@]+"${failed_logs[@]}"}"; do
    echo "---- ${f%%|*}: last lines of ${f#*|}"
    tail -n 25 "${f#*|}"
done
echo "==== make gpu-check DEVICE=$DEVICE ($(uname -n), logs in $logs)"
printf '%s\n' "${lines[@]}"
echo "$npass passed, $nfail failed, $nskip skipped"
[ "$nfail" = 0 ]

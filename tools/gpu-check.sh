#!/usr/bin/env bash
# The checks only an NVIDIA GPU can run, in one go, into one report:
#   1. build kiln (or take a bundle made by tools/gpu-bundle.sh where the
#      machine lacks kiln's build dependencies),
#   2. list the devices kiln sees,
#   3. the backend conformance kit, the op conformance suite, the model
#      zoo's reference/eager/compiled checks and the model-level suites
#      (resnet, pytorch_fixtures, attention, winograd, runtime) on the CUDA
#      backend, in f32 (conv_allow_tf32 off), then the zoo with TF32 products;
#   4. `kiln bench` on CUDA beside PyTorch eager and torch.compile
#      (tools/gpu_check_pytorch.py; PyTorch and torchvision must be installed);
#      with --tune, `kiln tune` first and max-autotune in the bench; then
#      kiln alone with f16 tensors (--dtype f16: tensor cores for GEMMs);
#      kiln on the GPU's Vulkan driver; a 4096^3 GEMM in f32, TF32 and f16
#      (gemm_bench) beside torch.matmul's; with --tune, torch.compile
#      max-autotune too;
#   5. text generation on CUDA (generate_bench: llama-100m in f32, Gemma-2B's
#      18 layers and whole vocabulary in bf16), per mode: time to first token,
#      decode tokens/s and the weights' read rate, for the bandwidth bound.
#
# Usage: tools/gpu-check.sh [--prebuilt DIR | --build-dir DIR] [--out DIR]
#            [--models a,b] [--batch 1,16] [--iters N] [--tune 5m] [--skip-bench]
# Writes OUT/report.md (default ./gpu-check) and one log per step beside it.
# Each step has a time limit and a failing step does not stop the others;
# the exit status is 1 when any check failed.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

prebuilt="" build_dir="$root/build-gpu" out="$PWD/gpu-check"
models="resnet50,mobilenet_v2,vit_b_16,convnext_tiny" batch="1,16" iters=100 skip_bench=0 tune=""
while [ $# -gt 0 ]; do
  case "$1" in
    --prebuilt) prebuilt="$2"; shift 2 ;;
    --build-dir) build_dir="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --models) models="$2"; shift 2 ;;
    --batch) batch="$2"; shift 2 ;;
    --iters) iters="$2"; shift 2 ;;
    --tune) tune="$2"; shift 2 ;;
    --skip-bench) skip_bench=1; shift ;;
    -h|--help) sed -n 2,17p "$0"; exit 0 ;;
    *) echo "gpu-check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
report="$out/report.md"
failed=0
started=$SECONDS

# The CUDA toolkit's libraries (NVRTC) where the loader may not look.
# The CUDA toolkit's libraries (NVRTC) where the loader may not look: the
# toolkit's folders, then the NVIDIA Python wheels' (pip's nvidia-cuda-nvrtc).
nvrtc_dirs="/usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib"
nvrtc_dirs+=" $(python3 -c 'import glob, site; print(" ".join(sorted({p.rsplit("/", 1)[0] for d in site.getsitepackages() for p in glob.glob(d + "/nvidia/*/lib/libnvrtc.so*")})))' 2>/dev/null)"
for dir in $nvrtc_dirs; do
  [ -d "$dir" ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$dir"
done

# PyTorch runs with the machine's own libraries, not a bundle's.
python_ld="${LD_LIBRARY_PATH:-}"
if [ -n "$prebuilt" ]; then
  bin="$prebuilt/bin"
  export LD_LIBRARY_PATH="$prebuilt/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  build_note="prebuilt bundle $prebuilt ($(cat "$prebuilt/VERSION" 2>/dev/null || echo unknown))"
else
  if [ ! -x "$build_dir/tools/kiln" ]; then
    echo "== building kiln in $build_dir"
    meson setup "$build_dir" "$root" --buildtype=release --wrap-mode=nofallback -Dcuda=enabled \
      > "$out/build.log" 2>&1 && meson compile -C "$build_dir" >> "$out/build.log" 2>&1 \
      || { echo "gpu-check: the build failed; see $out/build.log" >&2; tail -30 "$out/build.log" >&2; exit 1; }
  fi
  bin="$build_dir/stage"
  mkdir -p "$bin"
  for f in tools/kiln tools/generate_bench tools/gemm_bench src/kiln-tune-worker tests/test_backend_conformance tests/test_conformance tests/test_zoo \
    tests/test_resnet tests/test_pytorch_fixtures tests/test_attention tests/test_winograd tests/test_runtime; do
    ln -sf "$build_dir/$f" "$bin/$(basename "$f")"
  done
  build_note="built in $build_dir ($(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown))"
fi

export KILN_SOURCE_ROOT="$root"
export KILN_CACHE_DIR="$out/kernel-cache"
export KILN_BINARY="$bin/kiln"
# No validation layer is assumed there (CI runs Vulkan with it on).
export KILN_VULKAN_VALIDATION="${KILN_VULKAN_VALIDATION:-0}"
# The NVIDIA Vulkan driver where containers mount it outside the loader's search.
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -z "${VK_DRIVER_FILES:-}" ] && [ -f "$icd" ] && export VK_DRIVER_FILES="$icd"

{
  echo "# kiln GPU check"
  echo
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "- kiln: $build_note"
  echo "- GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo 'nvidia-smi not found')"
  echo "- host: $(nproc) cores, $(uname -r)"
  echo
} > "$report"

# step NAME LIMIT_S COMMAND...: runs one check, logs it, adds a line to the report.
step() {
  local name="$1" limit="$2"
  shift 2
  echo "== $name (limit ${limit}s, $((SECONDS - started))s in)"
  local begin=$SECONDS status=0
  timeout --kill-after=10 "$limit" "$@" > "$out/$name.log" 2>&1 || status=$?
  local verdict="passed"
  if [ $status -eq 124 ] || [ $status -eq 137 ]; then verdict="TIMED OUT"; failed=1
  elif [ $status -ne 0 ]; then verdict="FAILED (exit $status)"; failed=1; fi
  local summary
  summary=$(grep -E "^\*\*\* (No errors detected|[0-9]+ failures? (is|are) detected)|test cases? out of|has (passed|failed)" "$out/$name.log" | tail -4 | sed 's/^ *//' | tr '\n' ' ')
  echo "- **$name**: $verdict in $((SECONDS - begin)) s. $summary" >> "$report"
  echo "   $verdict: $summary"
  tail -5 "$out/$name.log"
}

echo "## Checks" >> "$report"
echo >> "$report"
# The f32 checks in f32: PyTorch's default conv_allow_tf32=on would round
# convolutions' inputs to TF32 on sm_80+ (docs/precision.md); TF32 gets its
# own run and bound (zoo_cuda_tf32). The benchmarks keep the defaults.
export KILN_CONV_ALLOW_TF32=off
step devices 60 "$bin/kiln" devices
step backend_conformance 120 "$bin/test_backend_conformance" --color_output=no --log_level=test_suite --report_level=short
step conformance_cuda 300 "$bin/test_conformance" --run_test=cuda --color_output=no --log_level=test_suite --report_level=short
step zoo_cuda 300 env KILN_TEST_BACKEND=cuda "$bin/test_zoo" --run_test='*/*/reference_eager_compiled_agree' \
  --color_output=no --log_level=test_suite --report_level=short
# The suites that run whole models, on CUDA (tests/test_backend.h).
for suite in resnet pytorch_fixtures attention winograd runtime; do
  step "${suite}_cuda" 300 env KILN_TEST_BACKEND=cuda "$bin/test_$suite" --color_output=no --log_level=test_suite \
    --report_level=short
done
# The zoo with TF32 products (convolutions and matrix products), within TF32's bound.
step zoo_cuda_tf32 240 env KILN_TEST_BACKEND=cuda KILN_TEST_DTYPE=tf32 KILN_CONV_ALLOW_TF32=on \
  KILN_FLOAT32_MATMUL_PRECISION=high "$bin/test_zoo" --run_test='*/*/reference_eager_compiled_agree' \
  --color_output=no --log_level=test_suite --report_level=short
unset KILN_CONV_ALLOW_TF32
{
  echo
  echo '```'
  cat "$out/devices.log"
  echo '```'
} >> "$report"

if [ $skip_bench -eq 0 ]; then
  modes=eager,default,reduce-overhead db_args=()
  if [ -n "$tune" ]; then
    # Each batch size is its own set of kernels to tune.
    for b in ${batch//,/ }; do
      step "tune_cuda_batch$b" 900 "$bin/kiln" tune --backend cuda --models "$models" --batch "$b" --budget "$tune" \
        --db "$out/tuning.db" --calls 20
    done
    modes+=",max-autotune"
    db_args=(--db "$out/tuning.db")
  fi
  # Decode reads every weight once a token: "weights GB/s" against the GPU's memory bandwidth is the bound.
  step generate_cuda 600 bash -c "'$bin/generate_bench' --backend cuda --shape llama-100m --rounds 3 --prompt 16 \
    --new-tokens 64 --modes eager,default,reduce-overhead && '$bin/generate_bench' --backend cuda \
    --shape gemma-2b-layers --layers 18 --vocabulary 256000 --rounds 3 --prompt 16 --new-tokens 64 \
    --modes default,reduce-overhead"
  {
    echo
    echo "## Text generation (CUDA)"
    echo
    echo '```'
    grep -E "^(llama|gemma|mode|eager|default|reduce)" "$out/generate_cuda.log" 2>/dev/null || echo "(see generate_cuda.log)"
    echo '```'
  } >> "$report"
  step bench_kiln 600 "$bin/kiln" bench --backend cuda --models "$models" --batch "$batch" \
    --modes "$modes" "${db_args[@]}" --iters "$iters" --warmup 10 --output-dir "$out/bench"
  # The GEMM row: kiln's kernel alone in each precision, then torch.matmul's (in bench_pytorch).
  step gemm_kiln 300 bash -c "'$bin/gemm_bench' --backend cuda --size 4096 --precisions f32,tf32,f16 && \
    '$bin/gemm_bench' --backend vulkan --size 4096 --precisions f32,f16"
  pytorch_args=()
  [ -n "$tune" ] && pytorch_args+=(--max-autotune)
  step bench_pytorch 900 env LD_LIBRARY_PATH="$python_ld" python3 "$root/tools/gpu_check_pytorch.py" --kiln-csv "$out/bench/bench.csv" \
    --models "$models" --batch "$batch" --compile-batch "${batch%%,*}" --iters "$iters" --warmup 10 \
    --gemm-size 4096 "${pytorch_args[@]}" --out "$out/side_by_side.md"
  {
    echo
    echo "## kiln (CUDA) beside PyTorch on the same GPU"
    echo
    cat "$out/side_by_side.md" 2>/dev/null || echo "(no table: see bench_kiln.log and bench_pytorch.log)"
    echo
    echo "## A 4096^3 GEMM: kiln's kernel (CUDA, then Vulkan), torch.matmul's in the table above"
    echo
    grep -E "^\|" "$out/gemm_kiln.log" 2>/dev/null || echo "(see gemm_kiln.log)"
  } >> "$report"
  # kiln on the GPU's Vulkan driver, the same models and modes but max-autotune.
  step bench_kiln_vulkan 600 "$bin/kiln" bench --backend vulkan --models "$models" --batch "$batch" \
    --modes eager,default,reduce-overhead --iters "$iters" --warmup 10 --output-dir "$out/bench_vulkan"
  {
    echo
    echo "## kiln (Vulkan on the same GPU)"
    echo
    echo '```'
    cat "$out/bench_vulkan/bench.csv" 2>/dev/null || echo "(see bench_kiln_vulkan.log)"
    echo '```'
  } >> "$report"
  # f16 tensors: their GEMMs and 1x1 convolutions run on the tensor cores
  # (mma.sync m16n8k16); beside the f32 rows above.
  step bench_kiln_f16 600 "$bin/kiln" bench --backend cuda --models "$models" --batch "$batch" \
    --modes eager,default --dtype f16 --iters "$iters" --warmup 10 --output-dir "$out/bench_f16"
  {
    echo
    echo "## kiln (CUDA), f16 tensors (tensor cores for GEMMs and 1x1 convolutions)"
    echo
    echo '```'
    cat "$out/bench_f16/bench.csv" 2>/dev/null || echo "(see bench_kiln_f16.log)"
    echo '```'
  } >> "$report"
fi

echo >> "$report"
echo "Total: $((SECONDS - started)) s." >> "$report"
echo "== report: $report"
exit $failed

#!/usr/bin/env bash
# Runs the fuzzers (ONNX import, Hugging Face checkpoints, compiled-model
# files, images, tokenizers, .npy, tuning exports) for a bounded
# time in all, each from its committed seed corpus (copied, so the
# repository is never changed). Exits non-zero,
# with the finding saved under the work folder, on any crash, sanitizer
# report, internal error, timeout or allocation past the limits.
#
#   tests/fuzz/run.sh BUILD_DIR [SECONDS] [WORK_DIR]
#
# BUILD_DIR was configured with -Dfuzzing=true (clang), usually also with
# -Db_sanitize=address,undefined.
set -euo pipefail
build=${1:?usage: tests/fuzz/run.sh BUILD_DIR [SECONDS] [WORK_DIR]}
seconds=${2:-180}
work=${3:-$(mktemp -d -t kiln-fuzz-XXXXXX)}
here=$(cd "$(dirname "$0")" && pwd)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

# fuzz TARGET SECONDS: one target from its committed corpus (copied).
fuzz() {
  local target=$1 seconds=$2
  local fuzzer="$build/tests/fuzz/fuzz_$target"
  [ -x "$fuzzer" ] || { echo "no $fuzzer: configure $build with -Dfuzzing=true" >&2; exit 2; }
  mkdir -p "$work/$target/corpus"
  cp "$here"/corpus/"$target"/* "$work/$target/corpus/"
  echo "fuzzing $target for ${seconds} s (work folder $work/$target)"
  local status=0
  # -seed fixes the mutation sequence; time still decides how far a run gets.
  "$fuzzer" -seed=1 -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -max_len=65536 \
    -artifact_prefix="$work/$target/" -print_final_stats=1 "$work/$target/corpus" > "$work/$target/fuzz.log" 2>&1 || status=$?
  grep -E '^stat::(number_of_executed_units|new_units_added|peak_rss_mb)' "$work/$target/fuzz.log" || true
  if [ "$status" != 0 ]; then
    echo "the fuzzer found a problem in $target (exit $status); its report:" >&2
    grep -v '^#[0-9]*\s*\(NEW\|REDUCE\|pulse\)' "$work/$target/fuzz.log" | tail -n 60 >&2
    ls "$work/$target"/crash-* "$work/$target"/timeout-* "$work/$target"/oom-* "$work/$target"/leak-* 2>/dev/null >&2 || true
    exit "$status"
  fi
}

# ONNX import gets the most time: its surface is the largest; compiled-model
# files and images next.
fuzz onnx_import $((seconds * 40 / 100))
fuzz checkpoint $((seconds * 10 / 100))
fuzz model_file $((seconds * 14 / 100))
fuzz image $((seconds * 14 / 100))
fuzz tokenizer $((seconds * 8 / 100))
fuzz npy $((seconds * 7 / 100))
fuzz tuning_import $((seconds - seconds * 93 / 100))
echo "no findings"

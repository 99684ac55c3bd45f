#!/usr/bin/env bash
# Bounded libFuzzer runs, called by CTest (tests/fuzz/CMakeLists.txt):
#   run_fuzzers.sh build SOURCE_DIR          configures and builds the `fuzz` preset (clang)
#   run_fuzzers.sh run SOURCE_DIR TARGET      fuzzes TARGET for $SY_FUZZ_SECONDS (default 30) s
# Exit 77 (CTest: skipped) where clang or its libFuzzer runtime is missing. A crash or a violated
# property fails the test; the input is kept under build-fuzz/artifacts/ and printed in base64,
# to be added to tests/fuzz/corpus/TARGET/ as a regression once fixed.
set -euo pipefail
mode=$1
src=$2
build="$src/build-fuzz"

have_libfuzzer() {
  command -v clang++-14 >/dev/null || return 1
  local probe
  probe=$(mktemp -d)
  printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' >"$probe/p.cpp"
  clang++-14 -fsanitize=fuzzer,address "$probe/p.cpp" -o "$probe/p" >/dev/null 2>&1
  local rc=$?
  rm -rf "$probe"
  return $rc
}

case "$mode" in
  build)
    if ! have_libfuzzer; then
      echo "SKIP: clang++-14 with libFuzzer (Debian clang-14, libclang-rt-14-dev) is not installed"
      exit 77
    fi
    cd "$src"
    cmake --preset fuzz >/dev/null
    cmake --build --preset fuzz --target fuzz_all -j "$(nproc)"
    ;;
  run)
    target=$3
    bin="$build/bin/fuzz_$target"
    if [[ ! -x $bin ]]; then
      echo "SKIP: $bin was not built (see the fuzz_libfuzzer_build test)"
      exit 77
    fi
    seconds=${SY_FUZZ_SECONDS:-30}
    # libFuzzer adds what it finds to the first corpus directory: a scratch copy, so that a run
    # never changes the committed corpus.
    work="$build/corpus-work/$target"
    rm -rf "$work" "$build/artifacts/$target-"*
    mkdir -p "$work" "$build/artifacts"
    cp -r "$src/tests/fuzz/corpus/$target/." "$work/"
    dict=()
    [[ -f $src/tests/fuzz/dict/$target.dict ]] && dict=(-dict="$src/tests/fuzz/dict/$target.dict")
    log="$build/artifacts/$target.log"
    # AddressSanitizer makes stack frames several times larger than a release build's: the chat
    # template engine's recursion bounds (200 macro calls deep) fit 8 MB in release but not under
    # ASan, so the fuzzers get the room a release thread has relative to its frames.
    ulimit -s 65536 2>/dev/null || true
    set +e
    "$bin" "$work" "${dict[@]}" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 -max_len=65536 \
      -print_final_stats=1 -artifact_prefix="$build/artifacts/$target-" >"$log" 2>&1
    rc=$?
    set -e
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
    echo "fuzz_$target: $runs runs in ${seconds}s, corpus $(ls "$work" | wc -l) inputs (committed: $(ls "$src/tests/fuzz/corpus/$target" | wc -l))"
    if ((rc != 0)); then
      tail -n 60 "$log"
      for a in "$build/artifacts/$target-"*; do
        [[ -f $a && $a != *.log ]] || continue
        echo "input $a (base64):"
        base64 -w 0 "$a"
        echo
      done
      exit 1
    fi
    ;;
  *)
    echo "usage: $0 build SOURCE_DIR | run SOURCE_DIR TARGET" >&2
    exit 2
    ;;
esac

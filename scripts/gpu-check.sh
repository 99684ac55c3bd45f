#!/bin/bash
# The GPU checks of the cuda backend, for a machine lent through the device tool: builds them
# here, packs them with ../shared/tools/gpu-bundle into .gpu/ (git-ignored), and writes
# .gpu/check.sh, which runs them there in one call within a time budget.
#
#   scripts/gpu-check.sh                 # here: build test_cuda_kernels, test_cuda_backend, bench_cuda,
#                                        #   bench_module_loading, switchyard (the multi-process test's ranks); pack
#   .gpu/check.sh [tests|tests-core|tests-processes|tests-split|tests-tc|tests-gqa|tests-dense|bench|bench-serve|bench-cublas|ncu]...   # there (device tool, carry [".gpu"]); default: tests bench
#
# check.sh prints each step's tail and keeps whole logs under $OUT (the device tool brings them
# back). Each step has its own timeout (SY_GPU_STEP_S, default 150 s) so a hang in one still
# leaves the others' results.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bundle=${SY_GPU_BUNDLE:-../shared/tools/gpu-bundle}
[[ -x $bundle ]] || { echo "gpu-check: $bundle not found (it is in ../shared/tools)" >&2; exit 1; }
export PATH=/usr/local/cuda/bin:$PATH
command -v nvcc >/dev/null || { echo "gpu-check: nvcc not found: the CUDA checks need the CUDA compiler here" >&2; exit 1; }
[[ -f build/CMakeCache.txt ]] || cmake --preset default
cmake --build build -j"$(nproc)" --target test_cuda_kernels test_cuda_backend bench_cuda bench_module_loading switchyard
rm -rf .gpu
# bench_cuda and bench_module_loading need no library beyond CUDA's and NCCL's, which gpu-bundle's
# library scan treats as a failure: they travel as extra files.
"$bundle" .gpu build/bin/test_cuda_kernels build/bin/test_cuda_backend build/bin/switchyard -- build/bin/bench_cuda \
  build/bin/bench_module_loading
# The device tool carries at most 64 MiB with the working tree (about 15 MiB on disk, most of it
# the fuzz corpora's small files): OpenBLAS (36 MiB) and the largest binaries travel gzipped and
# check.sh unpacks them before the first step. Uncompressed, the bundle no longer fitted
# (measured on the first GPU run, 2026-11-26).
gzip -6 .gpu/libopenblas.so.0
for f in switchyard test_cuda_backend test_cuda_kernels bench_module_loading libcrypto.so.3; do
  [[ -f .gpu/$f ]] && gzip -9 ".gpu/$f"
done
cat > .gpu/check.sh <<'CHECK'
#!/bin/bash
# Runs the packed GPU checks (see scripts/gpu-check.sh); logs go to $OUT when set.
here=$(cd "$(dirname "$0")" && pwd)
# OpenBLAS and the largest binaries travel gzipped (the device tool's 64 MiB): unpacked beside
# the others (executables keep their mode), or, where the bundle cannot be written, in a copy of
# it under /tmp.
gunzip_to() {  # file.gz, out: gzip, else Python's
  { gzip -dc "$1" >"$2" 2>/dev/null ||
    python3 -c 'import gzip, shutil, sys; shutil.copyfileobj(gzip.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$1" "$2"; } &&
    chmod 755 "$2"
}
unpack_into() {  # dir: every *.gz of the bundle not unpacked there yet
  local gz
  for gz in "$here"/*.gz; do
    [[ -f $gz && ! -f $1/$(basename "$gz" .gz) ]] || continue
    gunzip_to "$gz" "$1/$(basename "$gz" .gz)" || { rm -f "$1/$(basename "$gz" .gz)"; return 1; }
  done
}
if ! unpack_into "$here"; then
  copy=${TMPDIR:-/tmp}/sy-gpu-bundle
  rm -rf "$copy" && cp -r "$here" "$copy" && (here=$copy; unpack_into "$copy") && exec "$copy/check.sh" "$@"
  echo "check.sh: could not unpack the bundle's gzipped files" >&2
  exit 1
fi
# The tests that run switchyard (make-model, the layouts) read the repository's assets: the
# device machine has the working tree beside the bundle, not an installed share/ directory.
export SWITCHYARD_ASSETS=${SWITCHYARD_ASSETS:-$here/../assets} SWITCHYARD_LAYOUTS=${SWITCHYARD_LAYOUTS:-$here/../layouts}
out=${OUT:-$here/logs}
mkdir -p "$out"
step_s=${SY_GPU_STEP_S:-150}
steps=("$@")
[[ ${#steps[@]} -gt 0 ]] || steps=(tests bench)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
status=0
# What runs in several processes or loads modules eagerly: slower to start, and unchanged by most
# work on the kernels and the executor (`tests` is `tests-core` then this).
run_processes() {
  # Three ranks of the switchyard beside it (RANK/WORLD_SIZE: no mpirun there) on GPU 0;
  # several GPUs in one process (NCCL; skips with one GPU, saying so); NCCL between ranks
  # (the GPU's UUID; two GPUs for rows) and cuBLAS loaded from the machine's library.
  run test_cuda_multiprocess "$here/test_cuda_backend" --gtest_brief=1 \
    --gtest_filter='CudaMultiProcess.*:MultiGpu*:GpuAssignment.*:NcclPeerLinks.*:CublasLibrary.*:ModuleLoading*'
  # What CUDA_MODULE_LOADING=EAGER (a rank under a launcher) costs next to lazy: seconds.
  run bench_module_loading "$here/bench_module_loading"
}
run() {  # name, command...
  local name=$1; shift
  echo "=== $name: $*"
  local t0=$SECONDS
  timeout "$step_s" "$here/run.sh" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  tail -n 40 "$out/$name.log"
  # Every GPU test skips where the CUDA runtime finds no usable device (e.g. a driver older
  # than CUDA 13 wants) and the binary still exits 0: here, on the GPU machine, that is a failure.
  if [[ $rc -eq 0 ]] && grep -q "no CUDA device" "$out/$name.log"; then
    echo "=== $name: the GPU tests SKIPPED on the GPU machine: $(grep -m1 "no CUDA device" "$out/$name.log")"
    rc=1
  fi
  echo "=== $name: exit $rc after $((SECONDS - t0)) s"
  [[ $rc -eq 0 ]] || status=1
}
for step in "${steps[@]}"; do
  case $step in
    tests | tests-core)
      # The kernels loaded before NCCL links carry rows, first in a process of their own (it
      # prints how many were still unloaded under lazy loading before preload_kernels).
      run test_kernel_preload "$here/test_cuda_kernels" --gtest_brief=1 --gtest_filter='KernelPreload.*'
      run test_cuda_kernels "$here/test_cuda_kernels" --gtest_brief=1
      # The backend in three processes, eager first: a crash in the CUDA graphs' code cannot
      # hide whether the rest of the backend works.
      run test_cuda_backend_eager "$here/test_cuda_backend" --gtest_brief=1 \
        --gtest_filter='CudaActivationOps.*:CudaBackendErrors.*:Models/CudaBackend.*_eager'
      run test_cuda_graphs "$here/test_cuda_backend" --gtest_brief=1 --gtest_filter='DecodeGraph*:Models/CudaGraphs.*'
      run test_cuda_backend_graphs "$here/test_cuda_backend" --gtest_brief=1 \
        --gtest_filter='Models/CudaBackend.*_graphs:CudaBackendRope.*'
      [[ $step == tests ]] && run_processes ;;
    tests-processes) run_processes ;;
    # The whole-model tests again with every attention through the split kernel
    # (paged_attention_split_cuda), prompts included (SY_CUDA_ATTENTION=split; by default the
    # executor runs it for decode only).
    tests-split)
      run test_cuda_backend_split_eager env SY_CUDA_ATTENTION=split "$here/test_cuda_backend" --gtest_brief=1 \
        --gtest_filter='Models/CudaBackend.*_eager'
      run test_cuda_backend_split_graphs env SY_CUDA_ATTENTION=split "$here/test_cuda_backend" --gtest_brief=1 \
        --gtest_filter='Models/CudaGraphs.*:Models/CudaBackend.*_graphs' ;;
    # The tensor-core kernel's tests, and the whole-model tests with it on (SY_CUDA_TENSOR_CORE=1
    # is the default: a no-op kept so that a run with it off can be compared).
    tests-tc)
      run test_cuda_kernels_tc "$here/test_cuda_kernels" --gtest_brief=1 --gtest_filter='*TensorCore*'
      run test_cuda_backend_tc_eager env SY_CUDA_TENSOR_CORE=1 "$here/test_cuda_backend" --gtest_brief=1 \
        --gtest_filter='Models/CudaBackend.*_eager' ;;
    # The whole-model tests with every attention the grouped kernel can run through it
    # (paged_attention_gqa_cuda; by default small decode executions keep the split kernel).
    tests-gqa)
      run test_cuda_kernels_gqa "$here/test_cuda_kernels" --gtest_brief=1 --gtest_filter='*Gqa*'
      run test_cuda_backend_gqa env SY_CUDA_ATTENTION=gqa "$here/test_cuda_backend" --gtest_brief=1 \
        --gtest_filter='Models/CudaGraphs.*:Models/CudaBackend.*' ;;
    # The dense small-m path (SY_CUDA_DENSE_SMALL_M=1: q/k/v, o_proj, router, shared and dense
    # FFNs and lm_head of up to 16 rows through the small-m kernel, off by default): its kernel
    # tests, and the whole-model tests with it on, eager and in the decode graphs.
    tests-dense)
      run test_cuda_kernels_dense "$here/test_cuda_kernels" --gtest_brief=1 --gtest_filter='*DenseSmallM*:KernelPreload.*'
      run test_cuda_backend_dense env SY_CUDA_DENSE_SMALL_M=1 "$here/test_cuda_backend" --gtest_brief=1 \
        --gtest_filter='DecodeGraph*:Models/CudaGraphs.*:Models/CudaBackend.*' ;;
    bench) run bench_cuda "$here/bench_cuda" ;;
    # The whole serving runtime on the GPU (bench_cuda times a layer loop without it): a small
    # random Qwen3-MoE (make-model --preset small), Poisson requests through `switchyard bench
    # --backend cuda`, one worker and two attention + two expert workers sharing the GPU, sync
    # against async; then the one-worker case with the dense small-m path and without graphs.
    bench-serve)
      model=${TMPDIR:-/tmp}/sy-qwen3-small
      rm -rf "$model"
      run make_model "$here/switchyard" make-model --arch qwen3_moe --preset small --out "$model"
      serve_bench() {  # name, then bench's arguments; $dense: SY_CUDA_DENSE_SMALL_M (default 0)
        local name=$1; shift
        run "$name" env SY_CUDA_DENSE_SMALL_M="${dense:-0}" "$here/switchyard" bench --backend cuda --model "$model" \
          --rate 40 --duration 4 --compare sync,async "$@"
      }
      serve_bench bench_serve_colocated --layout colocated:1
      serve_bench bench_serve_disaggregated --layout disaggregated:2+2
      dense=1 serve_bench bench_serve_dense --layout colocated:1
      serve_bench bench_serve_eager --layout colocated:1 --cuda-graphs off ;;
    # The same with every expert execution through cuBLAS (the small-m kernel off), to compare
    # the whole-model decode tokens/s.
    bench-cublas) run bench_cuda_cublas env SY_CUDA_SMALL_M=0 "$here/bench_cuda" ;;
    ncu)
      # The grouped expert GEMM and attention kernels' limiters, as ncu sees them.
      run ncu_bench_cuda ncu --set basic --launch-count 40 --csv "$here/bench_cuda" ;;
    *) echo "check.sh: unknown step '$step' (tests, tests-core, tests-processes, tests-split, tests-tc, tests-gqa, tests-dense, bench, bench-serve, bench-cublas, ncu)"; status=1 ;;
  esac
done
exit $status
CHECK
chmod +x .gpu/check.sh
du -sh .gpu
echo "packed: run .gpu/check.sh on the device machine (device tool, carry [\".gpu\"])"

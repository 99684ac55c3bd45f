#!/usr/bin/env bash
# Installs the Debian packages Switchyard needs (only those missing; `apt-get update` at most
# once), then configures and builds the default preset into build/. Safe to run repeatedly.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build pkg-config git
  libopenblas-openmp-dev nlohmann-json3-dev libcli11-dev libtomlplusplus-dev robin-map-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libzmq3-dev cppzmq-dev libsqlite3-dev sqlite3 libcpp-httplib-dev libssl-dev libpcre2-dev libutf8proc-dev
  libzstd-dev liblz4-dev
  openmpi-bin
  qt6-base-dev libqt6opengl6-dev libimgui-dev fonts-dejavu-core
  xvfb xauth libgl1-mesa-dri python3-zmq
  clang-14 libclang-rt-14-dev libomp-14-dev
  python3
  desktop-file-utils curl dpkg-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "scripts/build.sh: installing ${missing[*]}"
  sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# CUDA is compiled when nvcc exists; Debian's CUDA toolkit or NVIDIA's in /usr/local/cuda.
if ! command -v nvcc >/dev/null && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi

cmake --preset default >/dev/null
cmake --build --preset default -j "$(nproc)"

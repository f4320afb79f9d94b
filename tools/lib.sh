# tools/lib.sh: helpers shared by tools/demo and tools/test (sourced, not run).
#
# What it is: banners, the repository root, the list of stages with code, installing missing
# Debian packages, and the mpirun flags this machine needs.
# Invariants: sourcing it only defines functions and variables; nothing is installed or built
# until a function is called. Package installs happen only for packages `dpkg -s` reports as
# not installed, so a second run installs nothing.
# Added in: foundation (tools/).

# shellcheck shell=bash disable=SC2034  # the arrays are used by the scripts that source this
TCCL_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# The packages every build needs (compilers, CMake + Ninja, Open MPI, GoogleTest, tools the
# tests use; stage 6: the verbs headers, for its verbs Net -- the library is opened at run time).
TCCL_BUILD_PACKAGES=(build-essential cmake ninja-build openmpi-bin libopenmpi-dev libgtest-dev
  libgmock-dev pkg-config iproute2 python3 libibverbs-dev less)
# (less: the chapters' commands page a chapter diff through `less -R`.)
# Debian's torch 1.13 (CPU) with its headers for stage 4's torch.distributed backend
# (python3-dev: Python.h; python3-setuptools: torch.utils.cpp_extension imports it, and
# without it `import torch.utils.cpp_extension` fails, so the backend cannot be built).
# TCCL_NO_TORCH=1 leaves torch out: tools/demo and tools/test then say what was not run.
TCCL_TORCH_PACKAGES=(python3-torch libtorch-dev python3-dev python3-setuptools)
# Stage 6's real verbs device: Soft-RoCE in a QEMU guest (tools/rxe/run.sh).
TCCL_RXE_PACKAGES=(qemu-system-x86 busybox-static kmod cpio ibverbs-providers ibverbs-utils
  rdma-core iproute2)
# ... plus what tools/test needs: the docs toolchain, clang for the fuzzers, matplotlib for
# tools/trace and tools/plot (their tests draw pictures), git for the docs checker's tests
# (they make a scratch repository; nothing else needs git, a learner may have an archive),
# chromium for tools/site-check (the built site opened in a headless browser).
TCCL_TEST_PACKAGES=("${TCCL_BUILD_PACKAGES[@]}" doxygen graphviz mkdocs mkdocs-material clang
  python3-matplotlib git chromium "${TCCL_RXE_PACKAGES[@]}")
# Installed without their recommended packages (ensure_packages).
TCCL_BARE_PACKAGES=(chromium)

# torch_packages: the torch packages, or none when the user chose TCCL_NO_TORCH=1.
torch_packages() {
  [[ ${TCCL_NO_TORCH:-0} == 1 ]] || printf '%s\n' "${TCCL_TORCH_PACKAGES[@]}"
}

# torch_cmake_flag: the backend is required (ON: a configure error naming what is missing)
# unless the user chose TCCL_NO_TORCH=1 (OFF: its tests are registered as skipped, counted).
torch_cmake_flag() {
  if [[ ${TCCL_NO_TORCH:-0} == 1 ]]; then echo -DTCCL_WITH_TORCH=OFF; else echo -DTCCL_WITH_TORCH=ON; fi
}

banner() {
  local line="=================================================================================="
  printf '\n%s\n== %s\n%s\n' "$line" "$*" "$line"
}

note() { printf '%s\n' "-- $*"; }

# Runs a command as root: directly when we are root, else through sudo.
as_root() {
  if [[ $EUID -eq 0 ]]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    echo "error: need root (or sudo) to run: $*" >&2
    return 1
  fi
}

# ensure_packages PKG...: installs the packages `dpkg -s` does not report as installed.
# TCCL_NO_INSTALL=1 skips installing (machines without apt, or without network). A failed
# install is a warning: the tools may be present another way (the build then says what lacks).
ensure_packages() {
  if ! command -v dpkg >/dev/null 2>&1; then
    note "no dpkg here: not checking packages ($*)"
    return 0
  fi
  local missing=() pkg
  for pkg in "$@"; do
    if ! dpkg -s "$pkg" 2>/dev/null | grep -q '^Status: install ok installed'; then
      missing+=("$pkg")
    fi
  done
  if ((${#missing[@]} == 0)); then
    note "all ${#} packages are installed"
    return 0
  fi
  if [[ ${TCCL_NO_INSTALL:-0} == 1 ]]; then
    note "TCCL_NO_INSTALL=1: not installing missing packages: ${missing[*]}"
    return 0
  fi
  note "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # The packages of TCCL_BARE_PACKAGES come without their recommended ones (chromium would
  # bring 90 packages, 139 MB, where the headless check needs 5, 115 MB).
  local plain=() bare=() ok=1
  for pkg in "${missing[@]}"; do
    if [[ " ${TCCL_BARE_PACKAGES[*]} " == *" $pkg "* ]]; then
      bare+=("$pkg")
    else
      plain+=("$pkg")
    fi
  done
  as_root apt-get update -q || ok=0
  if ((ok && ${#plain[@]})); then as_root apt-get install -y -q "${plain[@]}" || ok=0; fi
  if ((ok && ${#bare[@]})); then
    as_root apt-get install -y -q --no-install-recommends "${bare[@]}" || ok=0
  fi
  if ((!ok)); then
    echo "warning: could not install ${missing[*]}; continuing (later steps say what lacks)" >&2
  fi
}

# Stages with code (a CMakeLists.txt), in chain order, as directory names.
stages_with_code() {
  local d
  for d in "$TCCL_ROOT"/stage*-*/; do
    d=${d%/}
    if [[ -f $d/CMakeLists.txt ]]; then basename "$d"; fi
  done | sort -V
}

latest_stage() { stages_with_code | tail -n 1; }

# mpirun flags: Open MPI refuses root without --allow-run-as-root and more ranks than cores
# without --oversubscribe; --bind-to none keeps 4 ranks on 2 cores from sharing one.
mpirun_flags() {
  local flags=(--oversubscribe --bind-to none)
  [[ $EUID -eq 0 ]] && flags+=(--allow-run-as-root)
  printf '%s\n' "${flags[@]}"
}

njobs() { nproc 2>/dev/null || echo 2; }

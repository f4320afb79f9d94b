#!/usr/bin/env bash
# tools/nccl-tests.sh: builds NVIDIA's nccl-tests twice, against the real NCCL and against
# tccl's nccl.h shim, so the same benchmark binaries can compare the two.
#
# What it does, on the machine where it runs (it needs nvcc and an MPI with mpicc, not a GPU):
#   1. stages an NCCL_HOME for each build, <out>/homes/{real,tccl}/{include,lib}, because
#      nccl-tests' Makefile looks only in $NCCL_HOME/include and $NCCL_HOME/lib:
#        real: links to the real NCCL (its lib/ or lib64/; a pip wheel's lib/ with only
#              libnccl.so.2 gets its libnccl.so link here);
#        tccl: copies of <stage>/shim/nccl.h, libnccl.so.2.19.4 (+ its links) and libtccl.so
#              from a tccl build tree, so the directory also works when copied elsewhere;
#   2. runs `make MPI=1 MPI_HOME=... CUDA_HOME=... NVCC_GENCODE=... NCCL_HOME=<staged>
#      BUILDDIR=<out>/{real,tccl}` in the nccl-tests tree (nothing is written into it: every
#      object lands in BUILDDIR). CUDA_LIB points at a directory holding only libcudart, because
#      nccl-tests puts -L$CUDA_HOME/lib64 first on the link line, and a CUDA directory that also
#      holds a libnccl.so (this CPU machine's does) would otherwise win over NCCL_HOME;
#   3. checks each build: the nccl.h the compiler found claims the expected version, and every
#      nccl* symbol the binaries need is defined by the library they were linked against
#      (symbols nccl-tests declares weak, for newer NCCLs, are listed, not required).
#
# nccl-tests is fetched separately and never committed (keep it and the builds out of git).
#
# Usage: tools/nccl-tests.sh [options] <nccl-tests source dir>
#   --out DIR          builds and staged homes (default /tmp/tccl-nccl-tests)
#   --nccl-home DIR    the real NCCL: DIR/include/nccl.h, DIR/lib{,64}/libnccl.so* (env NCCL_HOME;
#                      default: $CUDA_HOME if it has include/nccl.h, else the pip wheel
#                      nvidia.nccl of python3, e.g. the one torch uses)
#   --tccl-build DIR   a configured and built tccl tree (env TCCL_BUILD_DIR; default build/);
#                      build it with CUDA (the default where nvcc exists) for GPU runs
#   --stage NAME       the stage whose shim to use (default: the newest stage with a shim/)
#   --only real|tccl   build one of the two
#   --mpi-home DIR     (env MPI_HOME; default derived from `mpicc --showme:incdirs/libdirs`)
#   --cuda-home DIR    (env CUDA_HOME; default /usr/local/cuda)
#   --gencode FLAGS    (env NVCC_GENCODE; default -gencode=arch=compute_90,code=sm_90: H100/H200)
#   --jobs N           make -j (default: nproc)
#   --strip            strip the binaries (smaller to carry to a GPU machine)
# Example: tools/nccl-tests.sh --tccl-build /tmp/build /tmp/nccl-tests
# Added in: stage 2.
set -euo pipefail
# shellcheck source=tools/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() { sed -n '/^# Usage:/,/^# Example:/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
die() { echo "error: $*" >&2; exit 1; }

OUT=/tmp/tccl-nccl-tests
NCCL_HOME=${NCCL_HOME:-}
TCCL_BUILD=${TCCL_BUILD_DIR:-$TCCL_ROOT/build}
STAGE=
ONLY=
MPI_HOME=${MPI_HOME:-}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
GENCODE=${NVCC_GENCODE:--gencode=arch=compute_90,code=sm_90}
JOBS=$(njobs)
STRIP=0
SRC=
while (($#)); do
  case $1 in
    --out) OUT=$2; shift ;;
    --nccl-home) NCCL_HOME=$2; shift ;;
    --tccl-build) TCCL_BUILD=$2; shift ;;
    --stage) STAGE=$2; shift ;;
    --only) ONLY=$2; shift ;;
    --mpi-home) MPI_HOME=$2; shift ;;
    --cuda-home) CUDA_HOME=$2; shift ;;
    --gencode) GENCODE=$2; shift ;;
    --jobs) JOBS=$2; shift ;;
    --strip) STRIP=1 ;;
    -h|--help) usage; exit 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) [[ -z $SRC ]] || die "one source directory, please"; SRC=$1 ;;
  esac
  shift
done
[[ -n $SRC ]] || { usage; exit 2; }
[[ -f $SRC/src/Makefile && -f $SRC/src/common.h ]] || die "$SRC is not an nccl-tests tree"
[[ -z $ONLY || $ONLY == real || $ONLY == tccl ]] || die "--only takes real or tccl"
[[ -x $CUDA_HOME/bin/nvcc ]] || die "no nvcc at $CUDA_HOME/bin/nvcc (--cuda-home)"
SRC=$(cd "$SRC" && pwd)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
HOMES=$OUT/homes
want() { [[ -z $ONLY || $ONLY == "$1" ]]; }

# ---- MPI_HOME: nccl-tests wants $MPI_HOME/include/mpi.h and $MPI_HOME/lib/libmpi.so -------
if [[ -z $MPI_HOME ]]; then
  command -v mpicc >/dev/null || die "no mpicc on PATH: give --mpi-home"
  inc=$(mpicc --showme:incdirs 2>/dev/null | awk '{print $1}') || true
  lib=$(mpicc --showme:libdirs 2>/dev/null | awk '{print $1}') || true
  [[ -n $inc && -n $lib ]] || die "mpicc --showme:incdirs/libdirs said nothing (not Open MPI?): give --mpi-home"
  if [[ $inc == */include && $lib == "${inc%/include}"/lib* ]]; then
    MPI_HOME=${inc%/include}
  else
    # A layout the Makefile cannot express (Debian splits include/ and lib/): link one.
    MPI_HOME=$HOMES/mpi
    mkdir -p "$MPI_HOME"
    ln -sfn "$inc" "$MPI_HOME/include"
    ln -sfn "$lib" "$MPI_HOME/lib"
  fi
fi
[[ -f $MPI_HOME/include/mpi.h ]] || die "no mpi.h in $MPI_HOME/include"
note "MPI_HOME=$MPI_HOME"

# ---- CUDA_LIB: libcudart only (see step 2 above) ------------------------------------------
CUDA_LIB_ONLY=$HOMES/cuda-lib
rm -rf "$CUDA_LIB_ONLY"
mkdir -p "$CUDA_LIB_ONLY"
for f in "$CUDA_HOME"/lib64/libcudart.so*; do
  [[ -e $f ]] && ln -sfn "$f" "$CUDA_LIB_ONLY/"
done
[[ -e $CUDA_LIB_ONLY/libcudart.so ]] || die "no libcudart.so in $CUDA_HOME/lib64"

# ---- The real NCCL ------------------------------------------------------------------------
find_real_nccl() {
  if [[ -f $CUDA_HOME/include/nccl.h ]]; then echo "$CUDA_HOME"; return; fi
  python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null || true
}
stage_real() {
  [[ -n $NCCL_HOME ]] || NCCL_HOME=$(find_real_nccl)
  [[ -n $NCCL_HOME && -f $NCCL_HOME/include/nccl.h ]] ||
    die "no real NCCL found: give --nccl-home (a directory with include/nccl.h)"
  local libdir so
  for libdir in "$NCCL_HOME/lib" "$NCCL_HOME/lib64"; do
    so=$(find "$libdir" -maxdepth 1 -name 'libnccl.so.2*' 2>/dev/null | sort | head -n 1) || true
    [[ -n $so ]] && break
  done
  [[ -n $so ]] || die "no libnccl.so.2* under $NCCL_HOME/lib or lib64"
  local home=$HOMES/real
  rm -rf "$home"
  mkdir -p "$home/lib"
  ln -sfn "$NCCL_HOME/include" "$home/include"
  ln -sfn "$so" "$home/lib/libnccl.so.2"
  ln -sfn "$so" "$home/lib/libnccl.so"
  REAL_LIBDIR=$(dirname "$so")
  note "real NCCL: $NCCL_HOME (library $so)"
}

# ---- tccl's shim --------------------------------------------------------------------------
stage_tccl() {
  if [[ -z $STAGE ]]; then
    local s
    for s in $(stages_with_code); do [[ -f $TCCL_ROOT/$s/shim/nccl.h ]] && STAGE=$s; done
  fi
  [[ -n $STAGE && -f $TCCL_ROOT/$STAGE/shim/nccl.h ]] || die "no stage with a shim/nccl.h (--stage)"
  local shimdir=$TCCL_BUILD/$STAGE/shim libdir=$TCCL_BUILD/$STAGE
  # A stage built on its own (cmake -S <stage>) has its shim at the top of the build tree.
  if [[ ! -d $libdir && -f $TCCL_BUILD/shim/libnccl.so.2 ]]; then
    shimdir=$TCCL_BUILD/shim libdir=$TCCL_BUILD
  fi
  [[ -f $shimdir/libnccl.so.2 ]] ||
    die "no $shimdir/libnccl.so.2: configure and build tccl in $TCCL_BUILD (--tccl-build)"
  [[ -f $libdir/libtccl.so ]] || die "no $libdir/libtccl.so"
  local home=$HOMES/tccl
  rm -rf "$home"
  mkdir -p "$home/include" "$home/lib"
  cp "$TCCL_ROOT/$STAGE/shim/nccl.h" "$home/include/"
  # -P keeps libnccl.so -> libnccl.so.2 -> libnccl.so.2.19.4 as links.
  cp -P "$shimdir"/libnccl.so* "$libdir"/libtccl.so* "$home/lib/"
  note "tccl shim: $STAGE from $TCCL_BUILD"
}

# ---- Build and check ----------------------------------------------------------------------
build() {  # build <name> <staged home>
  local name=$1 home=$2 dst=$OUT/$1
  banner "nccl-tests against $name ($home)"
  # Which nccl.h does nvcc see with these flags? (CUDA's own include dir may hold another.)
  local code
  code=$(printf '#include "nccl.h"\nNCCL_VERSION_CODE\n' |
         "$CUDA_HOME/bin/nvcc" -E -x cu -I"$home/include" - 2>/dev/null | tail -n 1)
  note "nccl.h seen by nvcc: NCCL_VERSION_CODE=$code"
  rm -rf "$dst"
  make -C "$SRC" -j "$JOBS" MPI=1 MPI_HOME="$MPI_HOME" CUDA_HOME="$CUDA_HOME" \
    CUDA_LIB="$CUDA_LIB_ONLY" NVCC_GENCODE="$GENCODE" NCCL_HOME="$home" BUILDDIR="$dst"
  local bins=("$dst"/*_perf)
  [[ -x ${bins[0]} ]] || die "no *_perf binaries in $dst"
  ((STRIP)) && strip "${bins[@]}"
  # Every nccl* the binaries need must be defined by the library they link against.
  local have need weak missing
  have=$(nm -D --defined-only "$home/lib/libnccl.so" | awk '{print $NF}' | sort -u)
  need=$(for b in "${bins[@]}"; do nm -D --undefined-only "$b"; done |
         awk '$1 == "U" && $2 ~ /^p?nccl/ {print $2}' | sort -u)
  weak=$(for b in "${bins[@]}"; do nm -D --undefined-only "$b"; done |
         awk '$1 == "w" && $2 ~ /^p?nccl/ {print $2}' | sort -u)
  missing=$(comm -23 <(echo "$need") <(echo "$have"))
  note "$(wc -w <<<"$need") nccl* symbols needed: $(tr '\n' ' ' <<<"$need")"
  [[ -z $weak ]] || note "weak (optional, for newer NCCLs): $(tr '\n' ' ' <<<"$weak")"
  [[ -z $missing ]] || die "$home/lib/libnccl.so lacks: $(tr '\n' ' ' <<<"$missing")"
  note "built ${#bins[@]} binaries in $dst"
}

if want real; then stage_real; build real "$HOMES/real"; fi
if want tccl; then stage_tccl; build tccl "$HOMES/tccl"; fi

banner "run them (one GPU per rank; -g 1)"
run_flags=$(mpirun_flags | tr '\n' ' ')
if want real; then
  echo "mpirun -np 2 $run_flags-x LD_LIBRARY_PATH=$REAL_LIBDIR \\"
  echo "    $OUT/real/all_reduce_perf -b 8 -e 128M -f 2 -g 1"
fi
if want tccl; then
  echo "mpirun -np 2 $run_flags-x LD_LIBRARY_PATH=$HOMES/tccl/lib \\"
  echo "    $OUT/tccl/all_reduce_perf -b 8 -e 128M -f 2 -g 1"
fi

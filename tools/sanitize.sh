#!/usr/bin/env bash
# tools/sanitize.sh: builds the latest stage with sanitizers and runs its tests.
#
# What it is: two instrumented builds of the newest stage in the chain (the highest stage<N>
# named in the top-level CMakeLists.txt's TCCL_STAGES, so it follows new chapters by itself),
# each configured standalone (`cmake -S <stage>`), without CUDA, and its tests run on host
# buffers:
#   asan   clang -fsanitize=address,undefined (all UBSan checks fatal, but enum: see below):
#          heap/stack overflows, use-after-free, undefined behaviour, and (LeakSanitizer, on
#          by default in ASan) leaks at exit. Open MPI's own leaks are suppressed by
#          tests/sanitizers/lsan.supp.
#   tsan   clang -fsanitize=thread: data races between the executor, proxy and user threads.
#          tests/sanitizers/tsan.supp is for races in code that is not ours (none today).
# Only the latest stage: every earlier stage's code is in it (a chapter adds, it does not
# remove), and the 2-core CI machine cannot afford one instrumented build per stage.
#
# Usage: tools/sanitize.sh [asan|tsan]...   (default: both)
#        tools/sanitize.sh --list [asan|tsan] the tests that would run, without running them
# Environment:
#   TCCL_SANITIZE_BUILD_ROOT  where build-asan/ and build-tsan/ go (default: the repo root)
#   TCCL_SANITIZE_STAGE       a stage directory to use instead of the latest (e.g. stage1-p2p)
#   TCCL_SANITIZE_CXX / _CC   compilers (default clang++ / clang)
#   TCCL_SANITIZE_TESTS       a ctest -R regex replacing the default "^s<N>_" (the exclusions
#                             below still apply)
#   TCCL_CTEST_JOBS           ctest -j (default: twice the cores under ASan, where instrumented
#                             ranks spend less of a run waiting than tools/test's do; the
#                             cores under TSan, which slows the code 5-15 times: its tests keep
#                             the CPU share their timeouts were set for)
#
# Invariants: a sanitizer report makes the test fail (halt_on_error / exitcode); the build is
# incremental (a second run only rebuilds what changed); nothing outside the build dirs is
# written. Findings in tccl code are fixed, never added to the suppression files.
# Added in: reliability (tools/).
set -euo pipefail
# shellcheck source=tools/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$TCCL_ROOT"

BUILD_ROOT=${TCCL_SANITIZE_BUILD_ROOT:-$TCCL_ROOT}
CXX_BIN=${TCCL_SANITIZE_CXX:-clang++}
CC_BIN=${TCCL_SANITIZE_CC:-clang}
JOBS=${TCCL_CTEST_JOBS:-}
SUPP=$TCCL_ROOT/tests/sanitizers

# The highest-numbered stage listed in TCCL_STAGES (not the highest directory with a
# CMakeLists.txt: a chapter joins the chain by being listed there).
latest_listed_stage() {
  python3 - "$TCCL_ROOT/CMakeLists.txt" <<'EOF'
import re, sys
text = re.sub(r"#[^\n]*", "", open(sys.argv[1]).read())
m = re.search(r"set\(\s*TCCL_STAGES\s+([^)]*)\)", text)
if not m:
    sys.exit("no set(TCCL_STAGES ...) in " + sys.argv[1])
stages = [s for s in m.group(1).split() if re.match(r"stage\d+-", s)]
if not stages:
    sys.exit("TCCL_STAGES lists no stage<N>-<name> directory")
print(max(stages, key=lambda s: int(re.match(r"stage(\d+)-", s).group(1))))
EOF
}

STAGE=${TCCL_SANITIZE_STAGE:-$(latest_listed_stage)}
STAGE_NUM=$(sed -E 's/^stage([0-9]+)-.*/\1/' <<<"$STAGE")
[[ -f $STAGE/CMakeLists.txt ]] || { echo "error: $STAGE/CMakeLists.txt not found" >&2; exit 2; }

# ---- which tests ----------------------------------------------------------------------------
# Every test of the stage (label stage<N>, so a new chapter's tests join by themselves), minus
# what does not fit the CI budget (about 8 minutes for both builds on 2 cores; instrumented code
# runs 2-5x slower, TSan up to 15x) or does not belong here:
#  - rank counts 2 and 3 only: 2 is the smallest real exchange, 3 is the smallest ring where a
#    rank's left and right neighbours differ; 1 has no traffic, 4 and 5 add time, not code paths.
#    A test registered at both runs at one of them per sanitizer (PREFER_NP below).
#  - *_large (64 Mi elements per buffer) are left out: they repeat the medium cases' code paths
#    on buffers that, with ASan's shadow memory and a 4x slowdown, cost minutes and gigabytes
#    (so is stage 5's socket-forced *_large_socket).
#  - stage 5's shm_ring_sweep (the ring sweep over SHM at 2 and 5 ranks): ring_sweep.np3 runs
#    the same code over SHM from stage 5 on.
#  - the Medium sweep cases are filtered out with GTEST_FILTER (below): the small cases already
#    cover every collective x type x op x place x root; the medium ones add loop counts (the
#    1 Mi-element p2p cases and the group tests still run many FIFO steps and wrap-arounds).
#  - *_netns needs root and network namespaces, and checks routing, not memory.
#  - examples and benchmarks are not tests of the library's correctness; the two-minute soak
#    is not a CI test at all, and the short soak (soak_short: timed runs at 3-5 ranks, one
#    pinned to a core, and a stalled rank) measures time, which a sanitizer's slowdown makes
#    meaningless (docs/reliability.md).
#  - stage 7's labs (s7_lab_NN): programs with planted bugs, timed against their watchdogs;
#    the library code they run is the same the other tests run here.
# Single-process tests of the stage (primitives, thread ranks, killed peer, errors_fork, shim
# exports) always run.
TESTS=${TCCL_SANITIZE_TESTS:-"^s${STAGE_NUM}_"}
COMMON_EXCLUDE="\\.np([014-9]|[1-9][0-9])\$|_large(_socket)?\\.|_netns\$|_example_|_bench_|_lab_[0-9]"
COMMON_EXCLUDE+="|_soak\\.|_soak_short\$|_shm_ring_sweep\\."
# The torch backend is not built under a sanitizer (an instrumented extension cannot be loaded
# by an uninstrumented python): its tests are registered as skipped there; leave them out.
COMMON_EXCLUDE+="|_torch_"
# Also excluded per sanitizer (a ctest -E regex, '^$' for none); each entry says why.
declare -A EXCLUDE=(
  # None today. The fork-based tests (p2p_peer_death, errors_fork) fork before any thread
  # exists, which TSan supports.
  [asan]='^$'
  # Stage 3's tree and recursive-doubling sweeps pick their collectives with their own
  # --gtest_filter, which wins over GTEST_FILTER: they run the medium counts too, which under
  # TSan (up to 15x) cost minutes. TSan keeps them at 2 ranks (the same code, host and
  # primitives, that their 3-rank runs take); ASan runs them all.
  # Stage 5's tree_sweep_socket likewise (the socket transport keeps its ring and P2P runs).
  [tsan]='(tree|tree_rooted|rd|ring_forced)_sweep\.np3$|_smallfifo\.|tree_sweep_socket\.'
)
# One rank count per test under each sanitizer: a test registered at both 2 and 3 ranks runs
# at 3 under ASan (odd counts split buffers unevenly: the bounds-sensitive paths) and at 2
# under TSan (the threads inside a rank are the same at any count; 2 ranks run the most
# iterations per second under TSan's slowdown). Every test program still runs under both, and
# both rank counts run under one of them.
declare -A PREFER_NP=([asan]=3 [tsan]=2)
# The ctest names, anchored, of the other rank count's runs of tests that also run at the
# preferred one (needs a configured build tree).
other_np_regex() {
  local dir want other
  dir=$(build_dir "$1")
  want=${PREFER_NP[$1]}
  other=$((want == 3 ? 2 : 3))
  ctest --test-dir "$dir" -N -L "stage$STAGE_NUM" -R "$TESTS" 2>/dev/null |
    awk -v w="$want" -v o="$other" '
      $1 == "Test" { n = $3; have[n] = 1 }
      END {
        sep = ""
        for (n in have) {
          if (n ~ ("\\.np" o "$")) {
            base = substr(n, 1, length(n) - length(o))
            if ((base w) in have) { gsub(/\./, "\\.", n); printf "%s^%s$", sep, n; sep = "|" }
          }
        }
      }'
}
exclude_regex() {
  local other
  other=$(other_np_regex "$1")
  echo "$COMMON_EXCLUDE|${EXCLUDE[$1]}${other:+|$other}"
}
# GoogleTest reads GTEST_FILTER from the environment; mpirun passes it on to the ranks.
GTEST_EXCLUDE='-*.Medium/*'

sanitizer_flags() {
  case $1 in
    # -fno-sanitize=enum: tccl.h is a C API, and a C caller may pass any int as a
    # tcclDataType_t or tcclRedOp_t; the library must reject such values (the error tests pass
    # 42 and -1 on purpose). Loading an out-of-range enum is undefined only in C++, and neither
    # compiler exploits it without -fstrict-enums, so this check would flag the tests of the
    # API contract rather than a bug. Every other UBSan check stays on and fatal.
    asan) echo "-fsanitize=address,undefined -fno-sanitize=enum -fno-sanitize-recover=undefined -fno-omit-frame-pointer" ;;
    tsan) echo "-fsanitize=thread -fno-omit-frame-pointer" ;;
    *) echo "unknown sanitizer $1" >&2; return 2 ;;
  esac
}

# The runtime options. Each sanitizer exits with a distinct code so a report is never
# mistaken for a test failure (or hidden by one):
#   ASan 23, UBSan (halts on the first report) 24, LSan 23 (it reports through ASan), TSan 66.
sanitizer_env() {
  case $1 in
    asan)
      # fast_unwind_on_malloc=0: Open MPI is built without frame pointers, so the fast
      # unwinder stops at its first frame and a leak inside it shows only "<unknown module>"
      # (its MCA components are dlclose()d by MPI_Finalize); the slow unwinder reaches the
      # libmpi / libopen-rte frames that lsan.supp names.
      echo "ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:exitcode=23:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1:fast_unwind_on_malloc=0"
      echo "LSAN_OPTIONS=suppressions=$SUPP/lsan.supp:print_suppressions=0:exitcode=23"
      echo "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:exitcode=24"
      ;;
    tsan)
      echo "TSAN_OPTIONS=suppressions=$SUPP/tsan.supp:halt_on_error=1:exitcode=66:second_deadlock_stack=1:print_suppressions=0"
      ;;
  esac
}

build_dir() { echo "$BUILD_ROOT/build-$1"; }

configure_build() {
  local san=$1 dir flags
  dir=$(build_dir "$san")
  flags=$(sanitizer_flags "$san")
  local gen=()
  [[ -f $dir/CMakeCache.txt ]] || gen=(-G Ninja)
  # -O1: the sanitizers' recommended level (fast enough, stacks still readable); line tables
  # only (reports keep file:line, compiling is ~25% faster than with full -g). CUDA off: no
  # GPU in CI, and nvcc does not take these flags. Torch off (stage 4 on): python3 cannot load
  # an instrumented extension without preloading the sanitizer runtime, and the backend's code
  # is a client of the library these tests instrument.
  cmake -S "$STAGE" -B "$dir" "${gen[@]}" \
    -DCMAKE_C_COMPILER="$CC_BIN" -DCMAKE_CXX_COMPILER="$CXX_BIN" \
    -DTCCL_WITH_CUDA=OFF -DTCCL_WITH_TORCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
    -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
    -DCMAKE_EXE_LINKER_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="$flags"
  # Only the programs the selected tests run (and what they link): the large tests, examples
  # and benchmarks would double the compile time on 2 cores for nothing run here.
  local targets
  mapfile -t targets < <(selected_programs "$san")
  note "$san: building ${#targets[@]} test programs: ${targets[*]:-all}"
  cmake --build "$dir" -j"$(njobs)" ${targets[@]:+--target "${targets[@]}"}
}

# The files the selected tests run, as ninja targets (paths relative to the build tree): every
# command argument, or the value of a -DNAME=VALUE argument, that is a file ninja builds (the
# test programs, and libtccl.so and libnccl.so for the shim's export check). CTest's listing
# leaves out the command of a test whose program is not built yet (on a fresh tree, every test
# run without mpirun); its command is then read from the CTestTestfile.cmake that add_test
# wrote. Prints nothing (build everything) when a test's program cannot be placed.
selected_programs() {
  local dir
  dir=$(build_dir "$1")
  ctest --test-dir "$dir" --show-only=json-v1 -L "stage$STAGE_NUM" -R "$TESTS" -E "$(exclude_regex "$1")" |
    python3 -c '
import json, os, re, subprocess, sys
build = os.path.realpath(sys.argv[1])
try:
    out = subprocess.run(["ninja", "-C", build, "-t", "targets", "all"], capture_output=True,
                         text=True, check=True).stdout
    known = {line.split(":")[0] for line in out.splitlines()}
except (OSError, subprocess.CalledProcessError):
    sys.exit(0)
# add_test([=[name]=] "program" "arg"...) lines, as CMake writes them.
written = {}
for root, _, files in os.walk(build):
    if "CTestTestfile.cmake" in files:
        with open(os.path.join(root, "CTestTestfile.cmake")) as f:
            for m in re.finditer(r"^add_test\(\[=\[(.+?)\]=\] (.*)\)$", f.read(), re.M):
                written[m[1]] = re.findall(r"\"((?:[^\"\\]|\\.)*)\"", m[2])
names = set()
for t in json.load(sys.stdin).get("tests", []):
    cmd = t.get("command") or written.get(t["name"])
    if not cmd:
        sys.exit(0)
    found = False
    for arg in cmd:
        path = os.path.realpath(arg.split("=", 1)[-1])
        rel = os.path.relpath(path, build)
        if rel in known:
            names.add(rel)
            found = True
    if not found and os.path.realpath(cmd[0]).startswith(build + os.sep):
        sys.exit(0)  # its program is in the build tree, but not a file ninja knows
print("\n".join(sorted(names)))
' "$dir"
}

run_tests() {
  local san=$1 dir env=() jobs=$JOBS
  dir=$(build_dir "$san")
  if [[ -z $jobs ]]; then
    if [[ $san == tsan ]]; then jobs=$(njobs); else jobs=$((2 * $(njobs))); fi
  fi
  mapfile -t env < <(sanitizer_env "$san")
  note "$san: $STAGE, tests matching $TESTS but not $(exclude_regex "$san"), GTEST_FILTER=$GTEST_EXCLUDE"
  # ctest's environment reaches every rank: Open MPI starts local ranks with mpirun's own.
  env "${env[@]}" GTEST_FILTER="$GTEST_EXCLUDE" \
    ctest --test-dir "$dir" --output-on-failure --no-tests=error -j"$jobs" \
      -L "stage$STAGE_NUM" -R "$TESTS" -E "$(exclude_regex "$san")"
}

list_tests() {
  local san=$1
  ctest --test-dir "$(build_dir "$san")" -N -L "stage$STAGE_NUM" -R "$TESTS" -E "$(exclude_regex "$san")"
}

# ---- main ---------------------------------------------------------------------------------
LIST=0
WHICH=()
for arg in "$@"; do
  case $arg in
    --list) LIST=1 ;;
    asan | tsan) WHICH+=("$arg") ;;
    -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "unknown argument: $arg (asan, tsan, --list)" >&2; exit 2 ;;
  esac
done
((${#WHICH[@]})) || WHICH=(asan tsan)
command -v "$CXX_BIN" >/dev/null || { echo "error: $CXX_BIN not found (apt-get install clang)" >&2; exit 2; }

rc=0
for san in "${WHICH[@]}"; do
  if ((LIST)); then list_tests "$san"; continue; fi
  banner "sanitize $san: $STAGE -> $(build_dir "$san")"
  t0=$SECONDS
  configure_build "$san"
  t1=$SECONDS
  run_tests "$san" || rc=1
  note "$san: build $((t1 - t0)) s, tests $((SECONDS - t1)) s"
done
exit $rc

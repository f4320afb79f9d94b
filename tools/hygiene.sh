#!/usr/bin/env bash
# tools/hygiene.sh: what a test run must not leave behind, and that every test can time out.
#
# What it is: three checks that tools/test runs around its test steps.
#   snapshot [FILE]   records the entries of /tmp, /dev/shm and /run/netns and the running
#                     processes (pid + start time); run it before the tests
#   check [FILE]      after the tests: fails on any entry that appeared in those directories
#                     (a file, FIFO, shared-memory segment, Open MPI session directory or network
#                     namespace the run left), and on any process started since the snapshot
#                     that still runs a program of this tree (a test binary, or an mpirun /
#                     mpiexec / orted whose command line names one)
#   timeouts BUILD    fails when a multi-rank CTest test (run by mpiexec, or with PROCESSORS
#                     > 1) has no TIMEOUT, and warns when one has no TCCL_TEST_TIMEOUT watchdog
#                     below it (then a hang is a bare CTest timeout instead of "TIMEOUT: test
#                     <Suite.Name> on rank r", see common/harness/mpi_main.cc)
# Stage 1 and 2 create no files; stage 5's shared-memory transport will (/dev/shm), and Open
# MPI itself can leave /dev/shm/vader_segment.* and /tmp/ompi.* behind when a rank is killed,
# which is why the check covers these places for every run rather than for one feature.
#
# Usage: tools/hygiene.sh snapshot | check | timeouts <build dir>
# Environment: TCCL_HYGIENE_FILE (the snapshot; default /tmp/tccl-hygiene.<uid>, which the
#   check itself ignores), TCCL_HYGIENE_IGNORE (an extended regex of paths to ignore, for
#   shared machines where other jobs create files in /tmp while the tests run).
#
# Invariants: read-only apart from the snapshot file, which `check` consumes (a check without a
# fresh snapshot fails rather than compare against an old one); never kills anything (it names
# the strays; cleaning up is the developer's call).
# Added in: reliability (tools/).
set -euo pipefail
# shellcheck source=tools/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SNAP=${TCCL_HYGIENE_FILE:-/tmp/tccl-hygiene.$(id -u)}
DIRS=(/tmp /dev/shm /run/netns)

# One line per entry: "F <path>" for every top-level entry, and one level into Open MPI's
# session directories (ompi.<host>.<uid>), where a job's leftovers live.
list_entries() {
  local d e
  for d in "${DIRS[@]}"; do
    [[ -d $d ]] || continue
    for e in "$d"/* "$d"/.[!.]*; do
      [[ -e $e || -L $e ]] || continue
      echo "F $e"
      if [[ $d == /tmp && -d $e && $(basename "$e") == ompi.* ]]; then
        find "$e" -mindepth 1 -maxdepth 1 2>/dev/null | sed 's/^/F /'
      fi
    done
  done
}

# One line per process: "P <pid>:<start time in clock ticks> <command line>" (pid and start
# time together name a process even if its pid is reused later).
list_processes() {
  python3 -c '
import os
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        stat = open("/proc/%s/stat" % pid).read()
        cmd = open("/proc/%s/cmdline" % pid, "rb").read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        continue
    if cmd:
        # Field 22 (start time) counted after the ")" that ends the command name (field 2).
        print("P %s:%s %s" % (pid, stat.rsplit(")", 1)[1].split()[19], cmd))
'
}

snapshot() {
  { list_entries; list_processes; } >"$SNAP"
  note "hygiene: snapshot of ${DIRS[*]} and processes in $SNAP ($(grep -c '^F ' "$SNAP") entries)"
}

check() {
  if [[ ! -f $SNAP ]]; then
    echo "error: no snapshot ($SNAP): run 'tools/hygiene.sh snapshot' before the tests" >&2
    return 2
  fi
  local ignore=${TCCL_HYGIENE_IGNORE:-}
  local bad=0 e line
  # Files: in the listing now, not in the snapshot.
  local new=()
  while IFS= read -r e; do
    [[ $e == "$SNAP" ]] && continue
    [[ -n $ignore && $e =~ $ignore ]] && continue
    new+=("$e")
  done < <(comm -13 <(grep '^F ' "$SNAP" | cut -c3- | sort) <(list_entries | cut -c3- | sort))
  if ((${#new[@]})); then
    echo "hygiene: ${#new[@]} entr$( ((${#new[@]} == 1)) && echo y || echo ies) left behind by the run:"
    for e in "${new[@]}"; do
      echo "  $(stat -c '%A %U %s bytes, modified %y' "$e" 2>/dev/null || echo '(gone)')  $e"
    done
    bad=1
  fi
  # Processes: started after the snapshot, still running, and running something of this tree.
  local mine="$$ $PPID" strays=()
  local pat="$TCCL_ROOT/"
  while IFS= read -r line; do
    local id=${line%% *} cmd=${line#* }
    local pid=${id%%:*}
    [[ " $mine " == *" $pid "* ]] && continue
    grep -qxF "P $line" "$SNAP" && continue
    local exe=${cmd%% *}
    # Open MPI's daemons carry no test path on their command line: any new one is a stray.
    case $(basename "$exe") in orted | prted | prte) strays+=("$pid: $cmd"); continue ;; esac
    [[ $cmd == *"$pat"* ]] || continue
    case $(basename "$exe") in
      hygiene.sh | test | sanitize.sh) [[ $exe == "$TCCL_ROOT"/tools/* ]] && continue ;;
    esac
    # bash tools/... (this script's own callers) is not a stray either.
    [[ $cmd =~ ^(ba)?sh\ +[^\ ]*tools/(test|hygiene\.sh|sanitize\.sh) ]] && continue
    [[ $cmd =~ ^(ba)?sh\ +[^\ ]*\.ci/run ]] && continue
    strays+=("$pid: $cmd")
  done < <(list_processes | cut -c3-)
  if ((${#strays[@]})); then
    echo "hygiene: ${#strays[@]} process(es) started by the run are still running:"
    printf '  %s\n' "${strays[@]}"
    bad=1
  fi
  rm -f "$SNAP"
  ((bad == 0)) && note "hygiene: nothing left behind (files in ${DIRS[*]}, processes)"
  return $bad
}

timeouts() {
  local build=${1:?usage: tools/hygiene.sh timeouts <build dir>}
  ctest --test-dir "$build" --show-only=json-v1 | python3 -c '
import json, os, sys
tests = json.load(sys.stdin).get("tests", [])
launchers = {"mpiexec", "mpirun", "orterun", "mpiexec.hydra", "mpiexec.openmpi", "srun"}
missing, noWatchdog, multi = [], [], 0
for t in tests:
    props = {p["name"]: p["value"] for p in t.get("properties", [])}
    cmd = t.get("command") or []
    procs = int(props.get("PROCESSORS", 1) or 1)
    if not (cmd and os.path.basename(cmd[0]) in launchers) and procs <= 1:
        continue
    multi += 1
    timeout = float(props.get("TIMEOUT", 0) or 0)
    if timeout <= 0:
        missing.append(t["name"])
        continue
    env = [e for e in props.get("ENVIRONMENT", []) if e.startswith("TCCL_TEST_TIMEOUT=")]
    try:
        watchdog = float(env[-1].split("=", 1)[1]) if env else 0
    except ValueError:
        watchdog = 0
    if not 0 < watchdog < timeout:
        noWatchdog.append("%s (TIMEOUT %g, TCCL_TEST_TIMEOUT %s)" % (t["name"], timeout, env[-1].split("=", 1)[1] if env else "unset"))
print("hygiene: %d multi-rank tests of %d; %d without TIMEOUT, %d without a watchdog below it"
      % (multi, len(tests), len(missing), len(noWatchdog)))
for n in noWatchdog:
    print("  warning: no TCCL_TEST_TIMEOUT watchdog below the TIMEOUT: " + n)
for n in missing:
    print("  error: multi-rank test without a TIMEOUT property: " + n)
sys.exit(1 if missing or multi == 0 else 0)
'
}

case ${1:-} in
  snapshot) snapshot ;;
  check) check ;;
  timeouts) shift; timeouts "$@" ;;
  -h | --help | "") awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; [[ -n ${1:-} ]] ;;
  *) echo "unknown command: $1 (snapshot, check, timeouts)" >&2; exit 2 ;;
esac

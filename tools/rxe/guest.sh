#!/bin/bash
# tools/rxe/guest.sh: stage two of the Soft-RoCE guest, run by tools/rxe/init inside the chroot.
#
# What it is: the part of the guest's setup that needs a tool from the host (iproute2's rdma),
# so it runs from the host's filesystem after init has chrooted into it: it creates the
# Soft-RoCE device rxe0 over the netdev init set up (lo unless RXE_NETDEV says otherwise), waits
# for its port to be ACTIVE, then runs the command with the caller's environment and working
# directory, its stdout and stderr on the second serial port (ttyS1: the host's stdout), and
# writes the command's exit status to /run/rxe/status.
# Invariants: /run/rxe is the run's control share (cmd: the argv, NUL-separated; env: the caller's
# `export -p`; cwd; netdev); /run/rxe/status gets exactly one line: a number (the command's
# status) or "setup: <what failed>". The command's stdin is /dev/null, its stdout a tty.
# Bash builtins only, apart from rdma: every exec from the 9p root costs 0.1-1 s under TCG.
# Added in: stage 6 (tools/rxe).
set -u
CTL=/run/rxe
PORT=/sys/class/infiniband/rxe0/ports/1

fail() {
  echo "rxe-guest: $*" >&2
  echo "setup: $*" >"$CTL/status"
  exit 1
}

NETDEV=$(<"$CTL/netdev")
rdma link add rxe0 type rxe netdev "$NETDEV" || fail "rdma link add rxe0 type rxe netdev $NETDEV"
state=
for ((i = 0; i < 200; i++)); do # up to 10 s: an e1000's carrier takes a while under TCG
  read -r state <"$PORT/state" 2>/dev/null
  [[ $state == *ACTIVE* ]] && break
  read -r -t 0.05 <> <(:) 2>/dev/null # a builtin 50 ms sleep
done
[[ $state == *ACTIVE* ]] || fail "rxe0 port 1 never became ACTIVE (state: $state)"
[[ -c /dev/infiniband/uverbs0 ]] || fail "/dev/infiniband/uverbs0 is missing"

# The caller's environment (minus what names the host's session), then what the guest needs:
# Open MPI refuses root without these two.
# shellcheck disable=SC1091
source "$CTL/env"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 TERM=dumb
cwd=$(<"$CTL/cwd")
cd "$cwd" 2>/dev/null || { echo "rxe-guest: cannot cd to $cwd; using /" >&2; cd /; }
mapfile -d '' -t CMD <"$CTL/cmd"

read -r up _ </proc/uptime
echo "$up" >"$CTL/started"
echo "rxe-guest: up ${up}s; running: ${CMD[*]}" >/dev/console

"${CMD[@]}" </dev/null >/dev/ttyS1 2>&1
rc=$?
echo "$rc" >"$CTL/status"
exit "$rc"

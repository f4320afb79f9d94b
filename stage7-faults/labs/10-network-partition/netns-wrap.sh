#!/usr/bin/env bash
# labs/10-network-partition/netns-wrap.sh: puts each rank of lab 10 on one of two "nodes":
# two network namespaces joined by a veth pair, the only link between them.
#
# What it is: lab.py's WRAP. tools/lab runs `bash netns-wrap.sh lab_10` for every rank, with
# the rank's LAB_NODE (0 or 1) and LAB_SUBNET (the seed's 10.77.<subnet>.0/24) from lab.py's
# rank_env. The first rank to get here builds the two nodes, under a lock; every rank then
# runs its program inside its node's namespace, with TCCL_SOCKET_IFNAME naming its end of the
# veth (the node's only interface besides loopback) and LAB_NETIF the same name, which the
# program uses to take the link down.
#
#   namespace tccl-lab10-<MASTER_PORT>-node0    veth l10-<port>n0   10.77.<subnet>.1/24
#   namespace tccl-lab10-<MASTER_PORT>-node1    veth l10-<port>n1   10.77.<subnet>.2/24
#
# Invariants: names carry MASTER_PORT (one per run, from tools/lab), so runs side by side
# (CTest -j) never share a namespace; nothing outlives a run: the builder also starts a
# reaper in its own session (so tools/lab's kill of a rank's process group cannot reach it)
# that deletes both namespaces, and with them the veth, once the ranks that entered them are
# all gone -- exited or killed -- and at the latest after 120 s. Needs root (ip netns add);
# without it every rank says so and exits 3.
#
# NCCL counterpart: none (the nodes of a real job are machines; this is two of them on one).
# Added in: stage 7 (labs).
set -u

node=${LAB_NODE:?netns-wrap.sh: LAB_NODE is not set (run the lab with tools/lab run 10)}
subnet=${LAB_SUBNET:?netns-wrap.sh: LAB_SUBNET is not set}
port=${MASTER_PORT:?netns-wrap.sh: MASTER_PORT is not set}
ns=(tccl-lab10-$port-node0 tccl-lab10-$port-node1)
veth=(l10-${port}n0 l10-${port}n1)  # at most 15 characters (IFNAMSIZ)
addr=(10.77.$subnet.1/24 10.77.$subnet.2/24)
self=$(readlink -f "$0")

has_ns() { ip netns list 2>/dev/null | grep -q "^$1\( \|$\)"; }

remove_nodes() {
  # Deleting a namespace deletes the veth end inside it, and with it the other end.
  for n in "${ns[@]}"; do has_ns "$n" && ip netns del "$n" 2>/dev/null; done
  return 0
}

# The reaper: waits until some rank has entered a node and then none is left, and removes
# both nodes. `ip netns pids` lists the processes inside a namespace, however they ended.
if [ "${1:-}" = "--reap" ]; then
  seen=0
  for ((tick = 0; tick < 1200; tick++)); do  # 0.1 s ticks: 120 s at most
    n=$( { ip netns pids "${ns[0]}"; ip netns pids "${ns[1]}"; } 2>/dev/null | wc -l)
    if [ "$n" -gt 0 ]; then
      seen=1
    elif [ $seen = 1 ] || [ $tick -ge 300 ]; then  # all gone, or nobody came within 30 s
      break
    fi
    sleep 0.1
  done
  exec 9<"$self"
  flock 9
  remove_nodes
  exit 0
fi

build_nodes() {
  ip netns add "${ns[0]}" && ip netns add "${ns[1]}" &&
    ip link add "${veth[0]}" netns "${ns[0]}" type veth peer name "${veth[1]}" netns "${ns[1]}" &&
    for i in 0 1; do
      ip -n "${ns[$i]}" addr add "${addr[$i]}" dev "${veth[$i]}" &&
        ip -n "${ns[$i]}" link set lo up &&
        ip -n "${ns[$i]}" link set "${veth[$i]}" up || return 1
    done
}

# One builder: the lock is this script's own file (no lock file to leave behind).
exec 9<"$self"
flock 9
if ! has_ns "${ns[$node]}"; then
  if ! err=$(build_nodes 2>&1); then
    remove_nodes
    echo "[rank ${RANK:-?}] lab 10 needs root and network namespaces (ip netns add, veth):" \
         "cannot build the two nodes: $err" >&2
    exit 3
  fi
  # 9<&-: the reaper must not hold the lock (it would keep the other ranks waiting).
  setsid "$self" --reap </dev/null >/dev/null 2>&1 9<&- &
fi
exec 9<&-

export TCCL_SOCKET_IFNAME="=${veth[$node]}" LAB_NETIF="${veth[$node]}"
exec ip netns exec "${ns[$node]}" "$@"

#!/usr/bin/env bash
# tools/rxe/run.sh: run one command inside a QEMU guest that has a real verbs device (Soft-RoCE).
#
# What it is: the way to test stage 6's ibverbs transport on a machine with no RDMA hardware and
# no InfiniBand in its kernel. It boots Debian's stock kernel (fetched once with apt-get
# download) under QEMU/TCG with a tiny busybox initramfs (tools/rxe/init) that loads rdma_rxe
# and 9p, mounts the host's root read-only over 9p and chroots into it, so binaries built here
# (build*/..., mpirun, GoogleTest programs, /usr/lib) run unchanged; tools/rxe/guest.sh then
# creates rxe0 over loopback and runs the command as root. The command's stdout and stderr come
# back on this script's stdout, live; this script exits with the command's status.
#
# Usage: tools/rxe/run.sh [--timeout SECONDS] -- COMMAND [ARGS...]
#        tools/rxe/run.sh --packages   (print the Debian packages it needs, one line)
# --timeout (default 600) counts from QEMU's start: boot (about 5 s) plus the command.
# Environment: RXE_SHARE (the host directory the guest may write, mounted at the same path;
#   default: the current directory; "none" for none), RXE_CACHE (kernel and initramfs cache;
#   default ~/.cache/tccl-rxe), RXE_MEM (guest memory, default 3G), RXE_SMP (vCPUs, default 2),
#   RXE_NETDEV (netdev rxe0 sits on: lo, the default, or eth0: an emulated e1000 with 10.0.2.15),
#   RXE_KERNEL_PKG (e.g. linux-image-6.1.0-56-amd64; default: what linux-image-amd64 depends on),
#   RXE_KERNEL_ARGS (more kernel command line, e.g. loglevel=7), RXE_QEMU_ARGS (more QEMU
#   arguments, split on spaces), RXE_ACCEL=kvm (use KVM with -cpu host; it hangs on this
#   machine, so TCG is the default), RXE_VERBOSE=1 (the guest's console on stderr, live),
#   TCCL_NO_INSTALL=1 (install no missing Debian packages).
# Output: the command's stdout and stderr on stdout (merged: one serial port); this script's own
#   lines ("rxe: ...", timings, the guest console on failure) on stderr.
# Exit status: the command's; 124 when --timeout ran out (QEMU is killed); 125 when the guest
#   failed before running the command (its console is then printed on stderr); 130 on INT/TERM.
# Invariants: nothing on the host is writable from the guest except RXE_SHARE and a private
#   control directory; no QEMU outlives this script (it is killed on timeout, INT and TERM);
#   the initramfs is rebuilt whenever this script, tools/rxe/init or the kernel changes; nothing
#   binary lives in git (the cache is outside the repository).
# Added in: stage 6 (tools/rxe).
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=tools/lib.sh
source "$HERE/../lib.sh"

# Debian packages this script needs on the host (listed in tools/lib.sh).
RXE_PACKAGES=("${TCCL_RXE_PACKAGES[@]}")
# The modules the guest loads (their dependencies are added by modprobe --show-depends).
# rdma_rxe needs crc32_generic (its ICRC), which nothing pulls in by itself.
RXE_MODULES=(crc32_generic rdma_rxe ib_uverbs rdma_ucm 9p 9pnet_virtio virtio_pci e1000)

usage() {
  sed -n 's/^# \(Usage:\|      \) //p' "${BASH_SOURCE[0]}" >&2
  exit 2
}

TIMEOUT=600
while (($#)); do
  case $1 in
    --timeout) [[ ${2:-} =~ ^[0-9]+$ ]] || usage; TIMEOUT=$2; shift 2 ;;
    --timeout=*) TIMEOUT=${1#*=}; [[ $TIMEOUT =~ ^[0-9]+$ ]] || usage; shift ;;
    --) shift; break ;;
    --packages) echo "${RXE_PACKAGES[*]}"; exit 0 ;;
    -h|--help) usage ;;
    *) break ;;
  esac
done
(($#)) || usage

msg() { printf 'rxe: %s\n' "$*" >&2; }
now() { date +%s.%N; }
T0=$(now)

# --- host packages ------------------------------------------------------------------------------
missing=()
for p in "${RXE_PACKAGES[@]}"; do
  dpkg -s "$p" 2>/dev/null | grep -q '^Status: install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  ensure_packages "${missing[@]}" >&2
fi
for tool in qemu-system-x86_64 busybox modprobe depmod cpio; do
  command -v "$tool" >/dev/null || { msg "missing $tool (packages: ${RXE_PACKAGES[*]})"; exit 125; }
done
BUSYBOX=/bin/busybox # busybox-static's: the initramfs has no libc
[[ -x $BUSYBOX ]] || { msg "no $BUSYBOX (install busybox-static)"; exit 125; }

# --- kernel: fetched once, per version ----------------------------------------------------------
CACHE=${RXE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tccl-rxe}
mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9 # one build at a time; concurrent runs share the result

KPKG=${RXE_KERNEL_PKG:-$(apt-cache depends linux-image-amd64 2>/dev/null |
  awk '/Depends: linux-image-[0-9]/ {print $2; exit}')}
if [[ -z $KPKG ]]; then # offline, or apt lists missing: use the newest kernel already cached
  KPKG=$(find "$CACHE" -maxdepth 1 -name 'linux-image-*' -type d -printf '%f\n' |
    sort -V | tail -n 1)
fi
if [[ -z $KPKG ]]; then
  msg "cannot tell which linux-image package to use: set RXE_KERNEL_PKG"
  exit 125
fi
KVER=${KPKG#linux-image-}
KDIR=$CACHE/$KPKG
if [[ ! -f $KDIR/vmlinuz || ! -f $KDIR/ok ]]; then
  msg "fetching $KPKG (once; cached in $KDIR)"
  rm -rf "$KDIR" && mkdir -p "$KDIR"
  # (apt's _apt user cannot write here; the warning saying so is noise.)
  (cd "$KDIR" && apt-get download "$KPKG" 2>&1 | grep -v '^W: Download is performed unsandb') >&2
  debs=("$KDIR"/*.deb)
  [[ -f ${debs[0]} ]] || { msg "apt-get download $KPKG failed"; exit 125; }
  dpkg-deb --fsys-tarfile "${debs[0]}" | tar -xO "./boot/vmlinuz-$KVER" >"$KDIR/vmlinuz"
  [[ -s $KDIR/vmlinuz ]] || { msg "no boot/vmlinuz-$KVER in ${debs[0]}"; exit 125; }
  # The uncompressed ELF vmlinux boots through its PVH entry: no BIOS bzImage loader and no
  # decompression, which under TCG saves about 3 s a boot. (Debian's bzImage is xz inside.)
  python3 - "$KDIR/vmlinuz" "$KDIR/vmlinux" <<'PY' || msg "no PVH vmlinux; booting the bzImage"
import lzma, sys
data = open(sys.argv[1], "rb").read()
elf = lzma.LZMADecompressor().decompress(data[data.index(b"\xfd7zXZ\x00"):])
assert elf[:4] == b"\x7fELF"
open(sys.argv[2], "wb").write(elf)
PY
  touch "$KDIR/ok"
  # Older kernels' caches go (a run still using one has its files open already).
  find "$CACHE" -mindepth 1 -maxdepth 1 -name 'linux-image-*' ! -name "$KPKG" -exec rm -rf {} +
fi
KIMG=$KDIR/vmlinux
[[ -f $KIMG ]] || KIMG=$KDIR/vmlinuz

# --- initramfs: rebuilt when this script, init or the kernel changes ----------------------------
KEY=$(cat "${BASH_SOURCE[0]}" "$HERE/init" "$KDIR/vmlinuz" "$BUSYBOX" | sha256sum | cut -c1-16)
INITRD=$KDIR/initramfs-$KEY.cpio.gz
if [[ ! -f $INITRD ]]; then
  msg "building the initramfs ($INITRD)"
  work=$(mktemp -d)
  dpkg -x "$KDIR"/*.deb "$work/k" || { rm -rf "$work"; msg "dpkg -x failed"; exit 125; }
  depmod -b "$work/k" "$KVER"
  ird=$work/ird
  mkdir -p "$ird"/{bin,dev,proc,sys,newroot,lib/modules}
  cp "$BUSYBOX" "$ird/bin/busybox"
  install -m 755 "$HERE/init" "$ird/init"
  moddir=$work/k/lib/modules/$KVER
  deps=$work/deps
  for m in "${RXE_MODULES[@]}"; do
    modprobe -d "$work/k" -S "$KVER" --show-depends "$m" >>"$deps" ||
      { rm -rf "$work"; msg "no module $m in $KPKG"; exit 125; }
  done
  # Dependency order, each module once; init insmods them in this order.
  awk '$1 == "insmod" && !seen[$2]++ {print $2}' "$deps" | while read -r ko; do
    rel=${ko#"$moddir"/}
    mkdir -p "$ird/lib/modules/$(dirname "$rel")"
    cp "$ko" "$ird/lib/modules/$rel"
    echo "$rel"
  done >"$ird/modules.list"
  (cd "$ird" && find . | cpio -o -H newc --quiet | gzip -1) >"$INITRD.tmp"
  mv "$INITRD.tmp" "$INITRD"
  rm -rf "$work"
  find "$KDIR" -maxdepth 1 -name 'initramfs-*.cpio.gz' ! -name "${INITRD##*/}" -delete
fi
flock -u 9

# --- the run's control directory: the command, its environment, and where the status lands -----
RUN=$(mktemp -d "${TMPDIR:-/tmp}/tccl-rxe.XXXXXX")
CTL=$RUN/ctl
mkdir -p "$CTL"
QEMU_PID=
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
  if [[ -n $QEMU_PID ]]; then
    kill -KILL "$QEMU_PID" 2>/dev/null
    wait "$QEMU_PID" 2>/dev/null
  fi
  if [[ -n ${TAIL_PID:-} ]]; then kill "$TAIL_PID" 2>/dev/null; fi
  rm -rf "$RUN"
}
trap cleanup EXIT
trap 'msg "interrupted"; exit 130' INT TERM

printf '%s\0' "$@" >"$CTL/cmd"
pwd >"$CTL/cwd"
echo "$HERE/guest.sh" >"$CTL/guest"
# The caller's environment, without what belongs to this shell or this host session.
SKIP='PWD|OLDPWD|SHLVL|_|HOSTNAME|TMPDIR|TERM|DISPLAY|SSH_[A-Z_]*|XDG_RUNTIME_DIR|DBUS_[A-Z_]*'
export -p | grep -Ev "^declare -x ($SKIP)(=|\$)" >"$CTL/env"

SHARE=${RXE_SHARE:-$PWD}
share_args=()
if [[ $SHARE != none ]]; then
  SHARE=$(cd "$SHARE" && pwd) || { msg "RXE_SHARE=$SHARE is not a directory"; exit 125; }
  [[ $SHARE != / ]] || { msg "refusing to share / writable: set RXE_SHARE"; exit 125; }
  echo "$SHARE" >"$CTL/share"
  share_args=(-virtfs "local,path=$SHARE,mount_tag=rxeshare,security_model=none,multidevs=remap")
else
  : >"$CTL/share"
fi

NETDEV=${RXE_NETDEV:-lo}
echo "$NETDEV" >"$CTL/netdev"
net_args=()
if [[ $NETDEV != lo ]]; then # user-mode network, no way out; init gives the guest 10.0.2.15
  # shellcheck disable=SC2054  # the commas belong to QEMU's option syntax
  net_args=(-netdev user,id=n0,restrict=on -device e1000,netdev=n0)
fi

# --- boot ---------------------------------------------------------------------------------------
# TCG, not KVM: KVM hangs on this machine (design-notes section 3). -cpu max gives the guest
# AVX2 etc. so host-built binaries run. ttyS0 = kernel console (a log file), ttyS1 = the
# command's output (our stdout).
: >"$RUN/console.log"
# shellcheck disable=SC2054
accel_args=(-accel tcg,thread=multi -cpu max)
[[ ${RXE_ACCEL:-tcg} == kvm ]] && accel_args=(-accel kvm -cpu host)
read -ra extra_args <<<"${RXE_QEMU_ARGS:-}"
T1=$(now)
qemu-system-x86_64 \
  "${accel_args[@]}" -smp "${RXE_SMP:-2}" -m "${RXE_MEM:-3G}" \
  -machine pc -nodefaults -no-user-config -display none -no-reboot "${extra_args[@]}" \
  -kernel "$KIMG" -initrd "$INITRD" \
  -append "console=ttyS0 quiet panic=-1 rdinit=/init mitigations=off ${RXE_KERNEL_ARGS:-}" \
  -chardev "file,id=con,path=$RUN/console.log" -serial chardev:con \
  -chardev stdio,id=out,signal=off -serial chardev:out \
  -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
  -virtfs "local,path=$CTL,mount_tag=rxectl,security_model=none,multidevs=remap" \
  "${share_args[@]}" "${net_args[@]}" </dev/null &
QEMU_PID=$!
TAIL_PID=
if [[ ${RXE_VERBOSE:-0} == 1 ]]; then
  tail -n +1 -f --pid="$QEMU_PID" "$RUN/console.log" >&2 &
  TAIL_PID=$!
fi

# Wait for QEMU, or for the deadline; polling (not one long `wait`) lets the INT/TERM trap run
# within 0.1 s and notes when the command started.
deadline=$(($(date +%s) + TIMEOUT))
timed_out=0
T_CMD=
while kill -0 "$QEMU_PID" 2>/dev/null; do
  [[ -z $T_CMD && -f $CTL/started ]] && T_CMD=$(now) # guest.sh writes it just before the command
  if (($(date +%s) >= deadline)); then
    timed_out=1
    kill -TERM "$QEMU_PID" 2>/dev/null
    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$QEMU_PID" 2>/dev/null && sleep 0.2; done # 2 s
    kill -KILL "$QEMU_PID" 2>/dev/null
    break
  fi
  sleep 0.1
done
wait "$QEMU_PID" 2>/dev/null
qemu_rc=$?
QEMU_PID=
T2=$(now)
if [[ -n $TAIL_PID ]]; then wait "$TAIL_PID"; TAIL_PID=; fi

show_console() {
  msg "guest console (last 40 lines):"
  tail -n 40 "$RUN/console.log" | sed 's/^/  | /' >&2
}
timing=$(awk -v tc="$T_CMD" -v t0="$T0" -v t1="$T1" -v t2="$T2" 'BEGIN {
  boot = tc == "" ? sprintf("< %.1f", t2 - t1) : sprintf("%.1f", tc - t1)
  printf "boot to command start %s s, QEMU %.1f s, whole run %.1f s", boot, t2 - t1, t2 - t0 }')
if ((timed_out)); then
  msg "TIMEOUT: the guest ran past --timeout $TIMEOUT s; QEMU killed ($timing)"
  show_console
  exit 124
fi
status=$(cat "$CTL/status" 2>/dev/null)
if [[ $status =~ ^[0-9]+$ ]]; then
  msg "exit $status; $timing"
  exit "$status"
fi
msg "the guest did not run the command: ${status:-no status (QEMU exit $qemu_rc)}"
show_console
exit 125

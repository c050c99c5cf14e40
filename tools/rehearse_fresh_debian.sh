#!/usr/bin/env bash
# Fresh-machine rehearsal: builds a minimal Debian root with mmdebstrap
# (what a fresh cloud image has: apt, plus git and ca-certificates), clones
# the committed repository into it and runs the README's two commands there,
# as root, in a clean environment, timing each step:
#   1. bash setup.sh && build/convoy train
#   2. bash setup.sh && ctest --test-dir build --output-on-failure -j2
# The full log goes to a file; the end prints a summary (times, the final
# accuracy line, ctest's result line, setup's "could not install" notes).
# Exit 0 when every step passed, 1 when one failed, 2 on a usage error.
#
#   sudo tools/rehearse_fresh_debian.sh [options]
#     --repo PATH     repository to clone (default: this one); only what is
#                     committed travels, the working tree does not
#     --ref REF       commit to rehearse (default: HEAD)
#     --epochs N      step 1 trains N epochs (default: the README's command as is)
#     --main-only     skip step 2 (the tests)
#     --keep          keep the root afterwards (default: removed)
#     --workdir DIR   where the root goes (default: /var/tmp; needs ~15 GB)
#     --log FILE      the full log (default: WORKDIR/convoy-rehearsal-DATE.log)
#     --suite NAME    Debian release (default: bookworm)
# Needs root (mmdebstrap, chroot, mounts) and Debian's mirror; setup.sh's
# pip peers also need PyPI. The mirror is the one this machine's apt uses.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
repo="$here" ref=HEAD epochs="" main_only=0 keep=0 workdir=/var/tmp log="" suite=bookworm
usage() { sed -n '/^#   sudo tools/,/^#     --suite/p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "rehearse: $*" >&2; exit 2; }
while (($#)); do
  case "$1" in
    --repo) repo="${2:?}"; shift 2 ;;
    --ref) ref="${2:?}"; shift 2 ;;
    --epochs) epochs="${2:?}"; shift 2 ;;
    --main-only) main_only=1; shift ;;
    --keep) keep=1; shift ;;
    --workdir) workdir="${2:?}"; shift 2 ;;
    --log) log="${2:?}"; shift 2 ;;
    --suite) suite="${2:?}"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument $1" ;;
  esac
done
[[ -z $epochs || $epochs =~ ^[1-9][0-9]*$ ]] || die "--epochs wants a positive number"
[[ $(id -u) -eq 0 ]] || die "needs root (mmdebstrap, chroot and mounts): sudo $0"
sha="$(git -C "$repo" rev-parse --verify --quiet "$ref^{commit}")" || die "$ref is not a commit in $repo"
mkdir -p "$workdir"
workdir="$(cd "$workdir" && pwd)"
avail_gb=$(df --output=avail -BG "$workdir" | tail -1 | tr -dc 0-9)
((avail_gb >= 15)) || die "$workdir has ${avail_gb} GB free; the root grows to ~10 GB (use --workdir)"
if ! command -v mmdebstrap >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mmdebstrap >/dev/null
fi

stamp="$(date +%Y%m%d-%H%M%S)"
log="${log:-$workdir/convoy-rehearsal-$stamp.log}"
tmp="$(mktemp -d "$workdir/convoy-rehearsal.XXXXXX")"
rootfs="$tmp/root"
: >"$log"
say() { echo "rehearse: $*" | tee -a "$log"; }

# ---- cleanup: our processes in the root, our mounts, then the root ---------
mounts_under() { awk -v r="$rootfs" '$2 == r || index($2, r "/") == 1 { print $2 }' /proc/mounts | sort -r; }
cleanup() {
  local rc=$? pid left
  trap - EXIT INT TERM
  for pid in /proc/[0-9]*; do  # processes started inside the root (an MPI daemon, chromium)
    [[ "$(readlink "$pid/root" 2>/dev/null)" == "$rootfs" ]] && kill -KILL "${pid#/proc/}" 2>/dev/null
  done
  for m in $(mounts_under); do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
  left="$(mounts_under)"
  if [[ -n $left ]]; then
    echo "rehearse: still mounted, so $tmp is left in place: $left" >&2
  elif ((keep)); then
    echo "rehearse: the root is kept at $rootfs (chroot $rootfs bash)"
  else
    rm -rf --one-file-system "$tmp"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- the mirror this machine's apt uses ------------------------------------
# One-line entries for the Debian suites in /etc/apt/sources.list{,.d/*.list}
# and deb822 /etc/apt/sources.list.d/*.sources (other vendors' suites left out).
host_sources() {
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [[ -f $f ]] || continue
    sed -E 's/#.*//; s/\[[^]]*\]//' "$f" | awk '$1 == "deb" && NF >= 4 { c = $4; for (i = 5; i <= NF; i++) c = c " " $i; print $2 "\t" $3 "\t" c }'
  done
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -f $f ]] || continue
    awk 'function flush() { if (types ~ /(^| )deb( |$)/ && enabled != "no")
                              for (i in U) for (j in S) print U[i] "\t" S[j] "\t" comps
                            types = ""; enabled = ""; comps = ""; delete U; delete S }
         /^[ \t]*#/ { next }
         /^[ \t]*$/ { flush(); next }
         { key = tolower($1); sub(/:$/, "", key); $1 = ""; sub(/^ /, "")
           if (key == "types") types = $0; else if (key == "enabled") enabled = tolower($0)
           else if (key == "components") comps = $0
           else if (key == "uris") split($0, U, " "); else if (key == "suites") split($0, S, " ") }
         END { flush() }' "$f"
  done
}
mirrors=()
while IFS=$'\t' read -r uri dist comps; do
  [[ $dist =~ ^$suite(-updates|-security|-backports)?/?$ ]] || continue
  mirrors+=("deb $uri $dist $comps")
done < <(host_sources | sort -u)

# ---- the record's header ---------------------------------------------------
t_all=$SECONDS
{
  echo "rehearse: $(date)"
  echo "rehearse: host $(hostname), $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores"
  echo "rehearse: $repo at $(git -C "$repo" log -1 --format='%h %s' "$sha")"
  echo "rehearse: root $rootfs; log $log"
  if ((${#mirrors[@]})); then printf 'rehearse: apt source: %s\n' "${mirrors[@]}"
  else echo "rehearse: apt source: none found here, so mmdebstrap's default"; fi
} | tee -a "$log"

declare -A took status load
ok=1
# Copies its input to its output; setup's own lines and the build's start
# also go to the console (fd 3), with the time, so the log shows where
# setup's minutes go.
milestones() {
  local line built=0
  while IFS= read -r line || [[ -n $line ]]; do
    printf '%s\n' "$line"
    if [[ $line == setup:* ]]; then
      printf '  %(%T)T %s\n' -1 "${line:0:150}" | tee -a "$log" >&3
    elif ((!built)) && [[ $line =~ ^\[\ *[0-9]+%\] ]]; then
      built=1
      printf '  %(%T)T (the build starts)\n' -1 | tee -a "$log" >&3
    fi
  done
}
exec 3>&1
# timed NAME CMD...: runs CMD with its output in the log, records time and status
timed() {
  local name="$1" t0=$SECONDS rc=0; shift
  say "$name: started $(date +%T)"
  "$@" 2>&1 | milestones >>"$log" || rc=$?
  took[$name]=$((SECONDS - t0))
  if ((rc == 0)); then status[$name]=ok; else status[$name]="FAILED (exit $rc)"; ok=0; fi
  load[$name]="$(cut -d' ' -f2 /proc/loadavg)"  # the machine is shared: the 5-minute load beside each time
  say "$name: ${status[$name]} in ${took[$name]} s (load average ${load[$name]} on $(nproc) cores)"
  return "$rc"
}
# in_root CMD: CMD (a bash command line) in the clone, as a fresh login would
# have it: root, nothing but HOME, PATH and TERM in the environment.
in_root() {
  nice -n 10 chroot "$rootfs" /usr/bin/env -i HOME=/root \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin TERM=dumb \
    bash -c "cd /root/convoy && $1"
}

# ---- the root ----------------------------------------------------------------
timed debootstrap nice -n 10 mmdebstrap --variant=apt --include=git,ca-certificates \
  "$suite" "$rootfs" "${mirrors[@]}" || exit 1
# This machine may reach the network through a TLS-intercepting proxy whose
# CA it trusts locally: the root gets the same CAs, or pip cannot reach PyPI.
# A real fresh machine needs nothing of the kind.
shopt -s nullglob
local_cas=(/usr/local/share/ca-certificates/*.crt /usr/local/share/ca-certificates/*/*.crt)
if ((${#local_cas[@]})); then
  mkdir -p "$rootfs/usr/local/share/ca-certificates"
  cp "${local_cas[@]}" "$rootfs/usr/local/share/ca-certificates/"
  chroot "$rootfs" update-ca-certificates >>"$log" 2>&1
  say "copied this machine's ${#local_cas[@]} local CA certificate(s) into the root (network plumbing, not the project's)"
fi
cp -L /etc/resolv.conf "$rootfs/etc/resolv.conf"
# daemons a package installs are not started inside the root
printf '#!/bin/sh\nexit 101\n' >"$rootfs/usr/sbin/policy-rc.d"; chmod +x "$rootfs/usr/sbin/policy-rc.d"

mount -t proc proc "$rootfs/proc"
mount --bind /sys "$rootfs/sys"; mount --make-private "$rootfs/sys"
mount --bind /dev "$rootfs/dev"; mount --make-private "$rootfs/dev"
mount --bind /dev/pts "$rootfs/dev/pts"; mount --make-private "$rootfs/dev/pts"
mount -t tmpfs -o mode=1777,nosuid,nodev shm "$rootfs/dev/shm"  # its own: MPI and chromium need shm

# The committed tree only: a bare repository with the one commit as main.
git init -q --bare "$rootfs/srv/convoy.git"
git -C "$repo" push -q "$rootfs/srv/convoy.git" "$sha:refs/heads/main"
git --git-dir="$rootfs/srv/convoy.git" symbolic-ref HEAD refs/heads/main
chroot "$rootfs" git clone -q /srv/convoy.git /root/convoy
say "cloned $(git -C "$repo" rev-parse --short "$sha") into /root/convoy"

# ---- the README's commands ---------------------------------------------------
train_cmd="build/convoy train${epochs:+ --epochs $epochs}"
say "step 1: bash setup.sh && $train_cmd"
t0=$SECONDS
if timed "step 1 setup" in_root "bash setup.sh"; then
  timed "step 1 train" in_root "$train_cmd" || true
fi
took[step 1]=$((SECONDS - t0))
# The packaging audit where nothing else was ever installed: what setup.sh
# put there is all there is (skipped in a commit without the audit).
if [[ ${status[step 1 setup]:-} == ok && -x $rootfs/root/convoy/tools/check_packages.sh ]]; then
  timed "audit" in_root "tools/check_packages.sh build" || true
  grep -a '^check_packages: ' "$log" | tail -4 | sed 's/^/  /'
fi
if ((!main_only)); then
  say "step 2: bash setup.sh && ctest --test-dir build --output-on-failure -j2"
  t0=$SECONDS
  if timed "step 2 setup" in_root "bash setup.sh"; then
    timed "step 2 ctest" in_root "ctest --test-dir build --output-on-failure -j2" || true
  fi
  took[step 2]=$((SECONDS - t0))
fi
took[total]=$((SECONDS - t_all))

# ---- summary -------------------------------------------------------------------
{
  echo
  echo "rehearse: summary ($(git -C "$repo" rev-parse --short "$sha"), $(date +%F), $(nproc) cores)"
  for k in debootstrap "step 1 setup" "step 1 train" "step 1" audit "step 2 setup" "step 2 ctest" "step 2" total; do
    [[ -n ${took[$k]:-} ]] && printf '  %-13s %5d s  %s\n' "$k" "${took[$k]}" "${status[$k]:-}${load[$k]:+, load ${load[$k]}}"
  done
  grep -a -E '^setup: could not|^CMake Error|^E: ' "$log" | sort -u | sed 's/^/  /' || true
  grep -a -E 'total training time .* test accuracy' "$log" | tail -1 | sed 's/^/  train: /' || true
  grep -a -E '^check_packages: (OK|FAIL)' "$log" | tail -1 | sed 's/^/  audit: /' || true
  grep -a -E '^[0-9]+% tests passed' "$log" | tail -1 | sed 's/^/  ctest: /' || true
  sed -n '/^The following tests FAILED:/,/^Errors while running/p' "$log" | sed 's/^/  /'
  echo "  root: $(du -sh --one-file-system "$rootfs" 2>/dev/null | cut -f1); log: $log"
  if ((ok)); then echo "rehearse: PASS"; else echo "rehearse: FAIL"; fi
} | tee -a "$log"
((ok)) || exit 1

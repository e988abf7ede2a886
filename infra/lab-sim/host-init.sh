#!/usr/bin/env bash
# PID 1 of one simulated host (run by up.sh inside the host's network namespace, under
# `unshare --mount --uts --pid --fork --mount-proc --propagation private`).
# Gives the host its own hostname, /etc and /var (overlays on the machine's), /run, /tmp
# and /var/tmp (tmpfs), then runs its sshd and reaps orphans until it is killed.
# A load generator (REPLAY given: infra/lab-sim/memtier-replay) gets memtier_benchmark in
# its own /usr/local/bin (an overlay: this machine's stays as it is): the stand-in that
# replays recorded real output, the recording named in /etc/lab-sim/memtier-recording.
# Usage: host-init.sh NAME ADDRESS HOST_DIR HOSTS_FILE [REPLAY]
set -euo pipefail
name=$1 addr=$2 dir=$3 hosts=$4 replay=${5:-}
hostname "$name"
for d in etc var; do
  mount -t overlay "lab-$d" -o "lowerdir=/$d,upperdir=$dir/upper/$d,workdir=$dir/work/$d" "/$d"
done
cp "$hosts" /etc/hosts
echo "$name" > /etc/hostname
if [ -n "$replay" ]; then
  mkdir -p "$dir/upper/bin" "$dir/work/bin" /etc/lab-sim
  mount -t overlay lab-bin -o "lowerdir=/usr/local/bin,upperdir=$dir/upper/bin,workdir=$dir/work/bin" /usr/local/bin
  ln -sf "$replay" /usr/local/bin/memtier_benchmark
  echo "${LAB_SIM_MEMTIER_RECORDING:-multi}" > /etc/lab-sim/memtier-recording
fi
# root's home is the host's own (/var/lib/lab-root), as on a real host: the machine's /root
# stays visible but its shell start-up files are not run by every SSH command (a pyenv
# `init` there waited 60 s per command on a stale rehash lock: make lab-sim-up timed out).
mkdir -p -m 0700 /var/lib/lab-root
sed -i 's#^\(root:[^:]*:[^:]*:[^:]*:[^:]*:\)[^:]*:#\1/var/lib/lab-root:#' /etc/passwd
# The lab's folder (keys, sshd_config, logs) may itself lie under /tmp, /var/tmp or /run (a
# checkout in /tmp): hold it with a bind mount in this host's private /var before those get
# their own tmpfs, and bind it back to the same path after, so every path stays valid. When
# it is the checkout's .harness/lab-sim, the whole checkout is held: the engine host serves
# the model folder (.harness/cache) from the engine's venv (.harness/engine/venv), and the
# load generators run the checkout's memtier stand-in (with its recordings) and the serving
# client from the harness's venv (.venv).
lab=$(dirname "$dir")
[ "$(basename "$(dirname "$lab")")" = .harness ] && lab=$(dirname "$(dirname "$lab")")
hold=""
case "$lab/" in /tmp/*|/var/tmp/*|/run/*) hold=/var/lib/lab-sim-hold ;; esac
if [ -n "$hold" ]; then
  mkdir -p "$hold"
  mount --bind "$lab" "$hold"
fi
mount -t tmpfs -o mode=0755 lab-run /run
mount -t tmpfs -o mode=1777 lab-tmp /tmp
mount -t tmpfs -o mode=1777 lab-vartmp /var/tmp
if [ -n "$hold" ]; then
  mkdir -p "$lab"
  mount --bind "$hold" "$lab"
fi
mkdir -p /run/sshd /run/lock
# sshd in the foreground as this host's only service; everything else comes over SSH.
/usr/sbin/sshd -D -f "$dir/sshd_config" -E "$dir/sshd.log" &
sshd_pid=$!
trap 'kill -KILL -1 2>/dev/null; exit 0' TERM INT
# PID 1 reaps every orphan (daemonized redis-server, exporters) while sshd runs.
while kill -0 "$sshd_pid" 2>/dev/null; do
  wait -n 2>/dev/null || sleep 1
done
echo "lab-sim: sshd of $name ($addr) exited" >&2

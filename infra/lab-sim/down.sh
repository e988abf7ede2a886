#!/usr/bin/env bash
# Takes the simulated lab down, whatever state it is in (after a full start, a failed or
# interrupted one, or a half-finished down): every process in the lab's namespaces, the
# namespaces, the bridge and veth links (and with them the lab's routes), SSH control
# connections, and the lab's folder. Checks that nothing is left and says so.
#   make lab-sim-down          (--quiet: no output unless something is left)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=common.sh
. "$here/common.sh"
quiet=0; [ "${1:-}" = "--quiet" ] && quiet=1
t0=$(date +%s.%N)
say() { [ "$quiet" -eq 1 ] || echo "lab-sim: $*"; }
[ "$(id -u)" -eq 0 ] || { echo "lab-sim: needs root to remove network namespaces; run it as root" >&2; exit 3; }

# SSH control masters of the lab (Ansible's and the harness's) end cleanly first.
for sock in "$LAB_DIR"/cp/*; do
  [ -S "$sock" ] && ssh -o ControlPath="$sock" -O exit lab-sim >/dev/null 2>&1
done

lab_namespaces() { ip netns list 2>/dev/null | awk '{print $1}' | grep '^ls-h[0-9]*$'; }

# 1. The hosts' unshare processes (recorded at start): SIGKILL ends each host's PID 1
#    (--kill-child), and with it every process of that PID namespace.
for f in "$LAB_DIR"/h*/pid; do
  [ -f "$f" ] || continue
  pid=$(cat "$f")
  if [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' < "/proc/$pid/cmdline" | grep -q "host-init.sh"; then
    kill -KILL "$pid" 2>/dev/null
  fi
done
# 2. Anything else still inside a lab network namespace (by namespace, not by name).
for ns in $(lab_namespaces); do
  for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
done
for _ in $(seq 1 50); do
  left=0
  for ns in $(lab_namespaces); do [ -n "$(ip netns pids "$ns" 2>/dev/null)" ] && left=1; done
  [ "$left" -eq 0 ] && break
  sleep 0.1
done
# 3. Namespaces, veth ends, the bridge (its routes go with it).
for ns in $(lab_namespaces); do ip netns del "$ns" 2>/dev/null; done
for link in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 | grep '^ls-h[0-9]*-p$'); do
  ip link del "$link" 2>/dev/null
done
ip link show "$LAB_BRIDGE" >/dev/null 2>&1 && ip link del "$LAB_BRIDGE"
ip route flush table local dev "$LAB_BRIDGE" >/dev/null 2>&1
# 4. Mounts under the lab's folder in this namespace (none are made here; a stray one
#    from a crashed start would keep the folder busy).
grep -F " $LAB_DIR" /proc/self/mounts | awk '{print $2}' | sort -r | while read -r m; do umount -l "$m"; done
rm -rf "$LAB_DIR"

# Check: nothing of the lab may remain.
problems=()
[ -n "$(lab_namespaces)" ] && problems+=("namespaces: $(lab_namespaces | tr '\n' ' ')")
ip link show "$LAB_BRIDGE" >/dev/null 2>&1 && problems+=("link $LAB_BRIDGE")
ip -o link show 2>/dev/null | grep -q ' ls-h[0-9]*-p' && problems+=("veth links")
ip route show table local 2>/dev/null | grep -q "$LAB_NET\." && problems+=("routes to $LAB_NET.0/24")
grep -qF "$LAB_DIR" /proc/self/mounts && problems+=("mounts under $LAB_DIR")
if pgrep -f "host-init.sh" >/dev/null 2>&1; then problems+=("host-init processes: $(pgrep -f host-init.sh | tr '\n' ' ')"); fi
if [ ${#problems[@]} -gt 0 ]; then
  echo "lab-sim: left behind after down: ${problems[*]}; run make lab-sim-down again" >&2
  exit 3
fi
say "down in $(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $t0}") s; no namespace, link, route, mount or process of the lab is left"

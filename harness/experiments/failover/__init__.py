"""failover: what a 3 + 3 Redis Cluster promises when a primary dies or is cut off."""

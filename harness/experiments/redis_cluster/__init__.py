"""redis_cluster"""

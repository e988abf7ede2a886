"""cold_start"""

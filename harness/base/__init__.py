"""The lowest layer: errors and exit codes, paths, files, text made safe, signals, progress,
small statistics, format versions and the Metric/Series types. Imports nothing of the
project but each other.
"""

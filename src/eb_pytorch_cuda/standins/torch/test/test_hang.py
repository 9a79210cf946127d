"""A suite that never finishes (like a multiprocess test waiting forever): excluded unless a test wants it."""
import time

while True:
    time.sleep(60)

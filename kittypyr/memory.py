"""A serving process gives the memory of a request's large arrays back to the system.

glibc's allocator serves a block above its mmap threshold (128 KB to
begin with) from a mapping of its own, unmapped when freed. But each time
such a block is freed it raises the threshold to that block's size, up to
32 MB: after the first searches for a common word, whose postings are
numpy arrays of megabytes, arrays of that size come from the heap, and the
heap keeps what is freed between live blocks. A serving process then grew
by tens of megabytes on a large archive after a few dozen searches
(``bench/serving_memory.py``), and by more the longer its words' posting
lists: its memory grew with the archive. Pinning the threshold keeps every
large array a mapping of its own, returned the moment it is freed; searches
measured no slower (``bench/search.py``).
"""

import ctypes
import ctypes.util
import logging

log = logging.getLogger(__name__)

# mallopt's parameter number for the mmap threshold (glibc's malloc.h).
M_MMAP_THRESHOLD = -3
# glibc's own initial threshold: smaller blocks stay in the heap, where
# reusing them is cheapest.
MMAP_THRESHOLD = 128 * 1024


def pin_mmap_threshold(threshold=MMAP_THRESHOLD):
    """Fix the C allocator's mmap threshold at ``threshold`` bytes; whether it could be.

    Only glibc has ``mallopt``: elsewhere (musl, macOS) nothing is changed.
    """
    name = ctypes.util.find_library("c")
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    pinned = mallopt(M_MMAP_THRESHOLD, threshold) == 1
    if not pinned:
        log.debug("the C library refused an mmap threshold of %d bytes", threshold)
    return pinned

"""A serving process gives back the memory of large arrays it no longer holds."""

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Run in a process of its own: what the allocator keeps is the process's.
# A search's arrays are freed while smaller blocks made meanwhile live on,
# as a serving process's caches do. The one large array freed first is a
# search for a common word: it made glibc serve the later arrays from its
# heap, which then kept them.
ARRAYS_AFTER_A_SEARCH = textwrap.dedent("""
    import sys
    sys.path.insert(0, {root!r})
    from tests.test_app import make_app
    from pathlib import Path

    def rss_mb():
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) / 1024

    app = make_app(Path({folder!r}))
    before = rss_mb()
    large = bytearray(16 << 20)
    del large
    arrays, kept = [], []
    for _ in range(24):
        arrays.append(bytearray(4 << 20))
        kept.append(bytearray(64 << 10))
    del arrays
    print(rss_mb() - before)
""")


def test_a_serving_process_returns_the_memory_of_freed_large_arrays(tmp_path):
    script = ARRAYS_AFTER_A_SEARCH.format(root=str(ROOT), folder=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    # 96 MB of arrays were made and freed; the process keeps none of it.
    assert float(done.stdout) < 16

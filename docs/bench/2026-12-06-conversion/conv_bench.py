"""Time one conversion of the bundled GGUF into a fresh cache folder, in a fresh process.

PYTHONPATH=<checkout> python conv_bench.py fast|transformers
transformers: gguf_fast is made to decline, so _convert_gguf takes transformers' path (the old one).
"""
import os
import shutil
import sys
import tempfile
import time

d = tempfile.mkdtemp(prefix="conv-")
os.environ["SPECVIZ_CACHE_DIR"] = d
import transformers  # noqa: F401,E402  (a cold start has imported it before the conversion)

from specviz.loading import gguf_fast  # noqa: E402
from specviz.loading.bundled import _convert_gguf, bundled_gguf_dir, cache_folder  # noqa: E402

if sys.argv[1] == "transformers":
    def decline(path, out):
        raise gguf_fast.Unsupported("this benchmark's old side")
    gguf_fast.convert = decline
t = time.perf_counter()
_convert_gguf(bundled_gguf_dir(), cache_folder(), lambda m: None)
print(sys.argv[1], f"{time.perf_counter() - t:.2f} s", "load", os.getloadavg()[0])
shutil.rmtree(d)

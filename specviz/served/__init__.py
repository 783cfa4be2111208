"""A target served by vLLM: the HTTP client that makes a server look like a loaded target
(remote.py) and the launcher that starts vLLM from its own venv (vllm_serve.py).

The other vLLM pieces sit with the layer whose job they do: the server's own plain decoding as
the AR baseline (specviz/decoding/served.py) and SpecViz over vLLM against vLLM itself
(specviz/measure/served_compare.py). Imports only specviz.models.
"""

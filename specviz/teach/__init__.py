"""Teaching layer: the toy distributions of the Learn tab, judged by decoding's own rules
(verify.py). No model is loaded here, and nothing here imports transformers."""

#!/usr/bin/env bash
# head v1's design and settings (6,000 steps: 3.1 passes over the data, v1 3.8) on all cached data (files 1-4: greedy + 3 sampled passes; file 5: greedy + 1)
cd /work/wt-data
git rev-parse HEAD > /work/headdata4/run.commit
exec .venv/bin/python -m specviz.training.head_train --aux 2 15 --data /work/headdata2 --cached-only --samples 3 \
  --threads 2 --steps 6000 --out /work/headdata4/head.safetensors

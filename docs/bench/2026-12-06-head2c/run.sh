#!/bin/bash
# Session 11: 3000 steps of head v2 on the full data, 2 threads, on an otherwise quiet machine.
cd /work/main
git rev-parse HEAD > /work/headdata2/run5.commit
.venv/bin/python -m specviz.training.head2_train --threads 2 --data /work/headdata2 --cached-only --samples 2 \
  --steps 3000 --lr 2e-3 --out /work/headdata2/v2c/head2.safetensors > /work/headdata2/train5.log 2>&1
echo TRAIN EXIT $? >> /work/headdata2/train5.log

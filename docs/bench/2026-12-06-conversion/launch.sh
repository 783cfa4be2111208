#!/bin/bash
# Launch to ready: `python app.py` started, until its log says the warm-up is done.
# usage: launch.sh CHECKOUT warm|fresh PORT   (fresh: an empty SPECVIZ_CACHE_DIR, as a new machine has)
cd "$1"
LOG=$(mktemp)
if [ "$2" = fresh ]; then export SPECVIZ_CACHE_DIR=$(mktemp -d); fi
T0=$(date +%s.%N)
PYTHONPATH="$1" GRADIO_SERVER_PORT=$3 /work/main/.venv/bin/python app.py > /dev/null 2> "$LOG" &
P=$!
until grep -q "warm-up done\|warm-up stopped" "$LOG"; do sleep 0.1; done
T1=$(date +%s.%N)
ANSWER=$(grep -m1 "warm-up 1/" "$LOG" | cut -c12-23)
printf "%s %s launch-to-ready %.2f s (first warm-up line %s, launched %s)\n" "$(basename $1)" "$2" \
  "$(echo "$T1 - $T0" | bc)" "$ANSWER" "$(date -d @$T0 +%H:%M:%S.%N | cut -c1-12)"
kill $P; wait $P 2>/dev/null
[ "$2" = fresh ] && rm -rf "$SPECVIZ_CACHE_DIR"
rm -f "$LOG"

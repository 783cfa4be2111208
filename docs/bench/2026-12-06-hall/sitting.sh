#!/bin/bash
# One sitting: old and new apps alternate; each start: 30x2 as soon as the page answers, then (warm-up
# done) 100x1, 100x1, 30x2, 1x8.  usage: sitting.sh ROUNDS
LT="/work/main/.venv/bin/python /work/main/scripts/load_test.py"
for r in $(seq $1); do
  for co in /work/wt-old55 /work/main; do
    L=$(basename $co)-r$r
    cd $co
    T0=$(date +%s.%N); echo "launched $(date +%H:%M:%S.%N | cut -c1-12)"
    PYTHONPATH=$co GRADIO_SERVER_PORT=7890 /work/main/.venv/bin/python app.py > /work/hall/sit-$L.log 2>&1 &
    P=$!
    until curl -s -o /dev/null -w "%{http_code}" http://127.0.0.1:7890/ | grep -q 200; do sleep 0.1; done
    echo "== $L page answers after $(echo "$(date +%s.%N) - $T0" | bc | cut -c1-5) s; 30 x 2 at once ($(date +%H:%M:%S), load $(cut -d' ' -f1 /proc/loadavg))"
    $LT http://127.0.0.1:7890/ --sessions 30 --steps 2 --pid $P 2>&1 | grep "errors\|p50\|wall"
    until grep -q "warm-up done\|warm-up stopped" /work/hall/sit-$L.log; do sleep 0.2; done
    grep -h "warm-up done" /work/hall/sit-$L.log | cut -c12-200
    sleep 8
    for t in 100x1 100x1 30x2 1x8; do
      echo "== $L $t ($(date +%H:%M:%S), load $(cut -d' ' -f1 /proc/loadavg))"
      $LT http://127.0.0.1:7890/ --sessions ${t%x*} --steps ${t#*x} --pid $P 2>&1 | grep "errors\|p50\|wall\|RSS"
    done
    kill $P; wait $P 2>/dev/null
  done
done

#!/bin/bash
# usage: run2.sh DIR LABEL ROUNDS [100]
cd "$1"
GRADIO_SERVER_PORT=7872 /work/main/.venv/bin/python app.py > /tmp/classbench/app-$2.log 2>&1 &
APP=$!
for i in $(seq 60); do curl -s -o /dev/null http://127.0.0.1:7872/ && break; sleep 1; done
LT="/work/main/.venv/bin/python /work/main/scripts/load_test.py http://127.0.0.1:7872/ --pid $APP"
echo "== $2 warm"; $LT --sessions 1 --steps 1 | head -2
for r in $(seq $3); do echo "== $2 30x2 round $r"; $LT --sessions 30 --steps 2; done
echo "== $2 alone 10"; $LT --sessions 1 --steps 10
if [ -n "$4" ]; then echo "== $2 100x1"; $LT --sessions 100 --steps 1; fi
kill $APP; wait $APP 2>/dev/null

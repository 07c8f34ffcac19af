#!/bin/bash
# abort_time.py for 1, 4 and 8 groups, serial and parallel, 3 runs each; JSON lines into
# $OUT/abort_time.jsonl (run from the checkout's root on a host with one NVIDIA GPU).
set -u
port=29700
for run in 1 2 3; do
    for k in 1 4 8; do
        for mode in serial parallel; do
            port=$((port + 1))
            MASTER_PORT=$port timeout -k 5 60 python3 tests/gpu_capture/abort_time.py $k $mode \
                >>"$OUT/abort_time.jsonl" 2>>"$OUT/abort_time.err"
        done
    done
done
cat "$OUT/abort_time.jsonl"

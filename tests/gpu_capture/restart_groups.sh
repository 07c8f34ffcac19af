#!/bin/bash
# The restart wrapper's re-entry for a rank in 8 NCCL process groups (tests/restart/
# rank_job.py, PG_GROUPS=8 EAGER=1, one rank on cuda:0, plain launcher): raising, and asleep
# past the soft timeout. One line per run into $OUT/groups.txt with the restart's phases.
# Recorded for this code ("new") and, from a copy of the tree with the previous
# doctor/restart/abort.py, for serial aborts ("old"); this script runs the tree as it is.
# PG_GROUPS, not GROUPS: bash ignores assignments to its own GROUPS variable.
set -u
REPO=$PWD
export TORCH_CPP_LOG_LEVEL=ERROR NCCL_DEBUG=WARN BACKEND=nccl STEPS=8 STEP_SLEEP=0.05 SOFT=8 \
    HARD=15 PG_TIMEOUT=120 MASTER_ADDR=127.0.0.1 PG_GROUPS=8 EAGER=1
port=29650
for fault in raise:0:3 hang_gil_released:0:3; do
    port=$((port + 1)); D=/tmp/groups/${fault%%:*}; rm -rf "$D"; mkdir -p "$D"
    (cd "$D" && PYTHONPATH=$REPO OUT_DIR=$D FAULT=$fault NCCL_DOCTOR_HOME=$D/home RANK=0 \
        LOCAL_RANK=0 WORLD_SIZE=1 MASTER_PORT=$port timeout -k 5 90 \
        python3 "$REPO/tests/restart/rank_job.py" >"$D/out" 2>"$D/err")
    echo "new $fault rc=$? $(grep -o '"phases": {[^}]*}' "$D/err") $(grep -o '"iteration": [0-9]' "$D/out")" \
        | tee -a "$OUT/groups.txt"
done

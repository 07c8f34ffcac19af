#!/bin/bash
# The in-process restart wrapper on a real ProcessGroupNCCL (run from the checkout's root on
# a host with one NVIDIA GPU): tests/restart/rank_job.py as one rank on cuda:0, started by a
# plain launcher (python, RANK/WORLD_SIZE/MASTER_* only) and by torchrun: healthy, raising in
# iteration 0, and hung in iteration 0 (asleep past the soft timeout); each fault makes the
# wrapper abort the communicator and re-create it in the same process. Outputs packed into
# $OUT/restart.tgz after each run.
set -u
REPO=$PWD; W=/tmp/restart
rm -rf "$W" && mkdir -p "$W"
LOG=$W/steps.log
pack() { tar czf "$OUT/restart.tgz.part" -C /tmp restart && mv "$OUT/restart.tgz.part" "$OUT/restart.tgz"; }
export PYTHONPATH=$REPO TORCH_CPP_LOG_LEVEL=ERROR NCCL_DEBUG=WARN BACKEND=nccl STEPS=8 \
    STEP_SLEEP=0.05 SOFT=8 HARD=15 PG_TIMEOUT=120 MASTER_ADDR=127.0.0.1
python3 -c "import torch; print(torch.__version__, torch.cuda.nccl.version())" >>"$LOG" 2>&1
port=29610
for launcher in plain torchrun; do
    for fault in none:-1:-1 raise:0:3 hang_gil_released:0:3; do
        D=$W/$launcher-${fault%%:*}; mkdir -p "$D"; port=$((port + 1)); start=$SECONDS
        echo "== $launcher $fault start t=${SECONDS}s" >>"$LOG"
        if [ "$launcher" = plain ]; then
            (cd "$D" && OUT_DIR=$D FAULT=$fault NCCL_DOCTOR_HOME=$D/home RANK=0 LOCAL_RANK=0 \
                WORLD_SIZE=1 MASTER_PORT=$port timeout -k 5 90 python3 "$REPO/tests/restart/rank_job.py" \
                >"$D/out" 2>"$D/err")
        else
            (cd "$D" && OUT_DIR=$D FAULT=$fault NCCL_DOCTOR_HOME=$D/home timeout -k 5 90 \
                torchrun --standalone --nproc-per-node 1 --rdzv-id "gpurestart$port" \
                "$REPO/tests/restart/rank_job.py" >"$D/out" 2>"$D/err")
        fi
        echo "== $launcher $fault rc=$? took $((SECONDS - start))s" >>"$LOG"
        grep -h "^RESULT" "$D/out" >>"$LOG"
        pack
    done
done

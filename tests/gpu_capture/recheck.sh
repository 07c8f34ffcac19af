#!/bin/bash
# Live triage of a real hung ProcessGroupNCCL rank with the current code: waiting in
# torch.cuda.synchronize (hang) and in .item() (hang-item). Outputs packed into $OUT/recheck.tgz.
set -u
REPO=$PWD; G=$REPO/.gpu; W=/tmp/recheck; SITE=/tmp/site
rm -rf "$W" && mkdir -p "$W"
LOG=$W/steps.log
pack() { tar czf "$OUT/recheck.tgz.part" -C /tmp recheck && mv "$OUT/recheck.tgz.part" "$OUT/recheck.tgz"; }
timeout 90 python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target $SITE "$REPO"/.whl/*.whl >"$W/install.out" 2>&1 && echo "== install ok" >>"$LOG"
export PYTHONPATH=$SITE PATH=$SITE/bin:$PATH
python3 -c "import doctor, sys; print(doctor.__file__)" >>"$LOG" 2>&1
for mode in hang hang-item; do
    D=$W/$mode; mkdir -p "$D/self"
    echo "== $mode start t=${SECONDS}s" >>"$LOG"
    ( cd "$D" && CAP_PG_TIMEOUT=600 TORCH_FR_BUFFER_SIZE=2000 NCCL_DEBUG=WARN \
        timeout -k 5 120 torchrun --standalone --nproc-per-node 1 --rdzv-id "gpu$mode" \
        "$G/job.py" "$mode" "$D/self" >"$D/job.log" 2>&1 ) &
    JOB=$!
    for _ in $(seq 180); do [ -f "$D/self/hung" ] || ! kill -0 $JOB 2>/dev/null && break; sleep 0.5; done
    sleep 1
    echo "== $mode marker $(cat "$D/self/hung" 2>/dev/null || echo none) t=${SECONDS}s" >>"$LOG"
    (cd "$D" && timeout -k 5 60 python3 -m doctor triage --job "gpu$mode" --once --json \
        --bundle "$D/bundle.tar.gz" >"$D/triage.json" 2>"$D/triage.err"; echo "rc=$?" >>"$D/triage.err")
    (cd "$D" && COLUMNS=120 timeout -k 5 60 python3 -m doctor triage --job "gpu$mode" --once \
        >"$D/triage.txt" 2>&1)
    timeout 20 py-spy dump --native --pid "$(cat "$D/self/hung" 2>/dev/null || echo 1)" >"$D/pyspy-native.txt" 2>&1
    pkill -f "job.py $mode" ; kill $JOB 2>/dev/null; wait $JOB
    echo "== $mode done t=${SECONDS}s" >>"$LOG"
    pack
done
pack

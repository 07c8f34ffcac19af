#!/bin/bash
# Records what tests/fixtures/gpu holds, on a host with one NVIDIA GPU (run from the
# checkout's root, with this folder copied to .gpu/ and the wheels in .whl/). Every step is
# bounded by `timeout` and the outputs are packed into $OUT/capture.tgz after each step,
# so a step that fails or a run cut short loses nothing already recorded.
set -u
REPO=$PWD
G=$REPO/.gpu
W=${CAP_DIR:-/tmp/cap}
SITE=${CAP_SITE:-/tmp/site}
rm -rf "$W" && mkdir -p "$W/fr" "$W/self"
LOG=$W/steps.log
FIELDS=index,name,uuid,pci.bus_id,driver_version,utilization.gpu,power.draw,power.limit,enforced.power.limit,memory.used,memory.total,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,clocks_event_reasons.active,ecc.mode.current,ecc.errors.uncorrected.volatile.total,ecc.errors.uncorrected.aggregate.total,ecc.errors.corrected.volatile.total,retired_pages.single_bit_ecc.count,retired_pages.double_bit.count,retired_pages.pending,persistence_mode,mig.mode.current,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max,pstate

pack() { tar czf "$OUT/capture.tgz.part" -C "$(dirname "$W")" "$(basename "$W")" && mv "$OUT/capture.tgz.part" "$OUT/capture.tgz"; }
# step NAME SECONDS CMD...: CMD's stdout and stderr into $W/NAME.out, its status into the log
step() {
    local name=$1 secs=$2 start=$SECONDS
    shift 2
    echo "== $name start $(date -u +%T) (t=${SECONDS}s)" >>"$LOG"
    (cd "$W" && timeout -k 5 "$secs" "$@") >"$W/$name.out" 2>&1
    echo "== $name rc=$? took $((SECONDS - start))s" >>"$LOG"
    pack
}
late() { [ "$SECONDS" -gt "$1" ] && echo "== skipped $2 at t=${SECONDS}s" >>"$LOG"; }

step env 60 bash -c 'date -u; uname -a; id; nvidia-smi; nvidia-smi -L;
  python3 -c "import torch,sys; print(sys.version); print(\"torch\", torch.__version__, \"cuda\", torch.version.cuda, \"nccl\", torch.cuda.nccl.version()); print(torch.cuda.get_device_name(0), torch.cuda.get_device_capability(0), torch.cuda.device_count())";
  python3 -m pip list 2>/dev/null | grep -i -E "^(torch|nvidia-ml-py|nvidia-nccl|typer|rich|psutil|click) ";
  cat /proc/sys/kernel/yama/ptrace_scope; ls -la /dev/shm | head -3; df -h /dev/shm; nproc; env | grep -E "^(NCCL|TORCH|CUDA)" | sort'
step smi 60 bash -c "nvidia-smi -q >smi-q.txt; nvidia-smi topo -m >smi-topo.txt 2>&1; nvidia-smi nvlink -s >smi-nvlink.txt 2>&1;
  nvidia-smi --query-gpu=$FIELDS --format=csv >smi-idle.csv 2>&1; nvidia-smi --query-gpu=$FIELDS --format=csv,noheader,nounits >smi-idle-nounits.csv 2>&1;
  nvidia-smi --query-remapped-rows=gpu_bus_id,remapped_rows.correctable,remapped_rows.uncorrectable,remapped_rows.pending,remapped_rows.failure --format=csv >smi-remapped.csv 2>&1;
  nvidia-smi -q -d PERFORMANCE,ECC,PAGE_RETIREMENT,ROW_REMAPPER,PCI,CLOCK,POWER,TEMPERATURE >smi-q-sections.txt 2>&1; ls -la"

echo "== install start (t=${SECONDS}s)" >>"$LOG"
if timeout 90 python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target $SITE "$REPO"/.whl/*.whl >"$W/install.out" 2>&1; then
    export PYTHONPATH=$SITE PATH=$SITE/bin:$PATH
    echo "== install ok" >>"$LOG"
else
    export PYTHONPATH=$REPO  # doctor.gpu.nvml imports without the wheels; the CLI may not
    echo "== install FAILED, PYTHONPATH=$REPO" >>"$LOG"
fi
pack

step nvml-idle 60 python3 "$G/nvml_record.py" "$W/nvml-idle.json" idle

export MASTER_ADDR=127.0.0.1 RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1
MASTER_PORT=29531 NCCL_DEBUG=INFO step nccl-info 90 python3 "$G/job.py" ok

# The hang: one rank under torchrun, an all_reduce queued behind a ~100 s spin, PG timeout 60 s.
echo "== hang start $(date -u +%T) (t=${SECONDS}s)" >>"$LOG"
(
    cd "$W" && unset MASTER_ADDR RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE
    CAP_PG_TIMEOUT=60 TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_FR_BUFFER_SIZE=2000 \
        TORCH_NCCL_DUMP_ON_TIMEOUT=1 TORCH_FR_DUMP_TEMP_FILE=$W/fr/nccl_trace_rank_ \
        TORCH_NCCL_DEBUG_INFO_TEMP_FILE=$W/fr/nccl_trace_rank_ NCCL_DEBUG=INFO \
        timeout -k 5 170 torchrun --standalone --nproc-per-node 1 --rdzv-id gpuhang \
        "$G/job.py" hang "$W/self" >"$W/hang.log" 2>&1
    echo "== torchrun rc=$?" >>"$W/hang.log"
) &
HANG=$!
for _ in $(seq 180); do [ -f "$W/self/hung" ] || ! kill -0 $HANG 2>/dev/null && break; sleep 0.5; done
echo "== hung marker: $(cat "$W/self/hung" 2>/dev/null || echo none) at t=${SECONDS}s" >>"$LOG"
pack
if [ -f "$W/self/hung" ]; then
    PID=$(cat "$W/self/hung")
    step busy-ps 15 bash -c "ps -eo pid,ppid,stat,etime,cmd | grep -v ' ps ' ; cat /proc/$PID/status | head -12; cat /proc/$PID/wchan; echo"
    step busy-smi 30 bash -c "nvidia-smi --query-gpu=$FIELDS --format=csv; nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv; nvidia-smi"
    step nvml-busy 40 python3 "$G/nvml_record.py" "$W/nvml-busy.json" busy
    step pyspy 20 py-spy dump --pid "$PID"
    step triage-json 45 python3 -m doctor triage --job gpuhang --once --json --bundle "$W/triage-bundle.tar.gz"
    late 150 triage-text || step triage-text 30 env COLUMNS=120 python3 -m doctor triage --job gpuhang --once
fi
echo "== waiting for the hang to end (t=${SECONDS}s)" >>"$LOG"
wait $HANG
echo "== hang done (t=${SECONDS}s)" >>"$LOG"
ls -la "$W/fr" "$W/self" >>"$LOG"
pack

late 280 dup || MASTER_PORT=29532 NCCL_DEBUG=INFO step dup 60 torchrun --standalone \
    --nproc-per-node 2 "$G/job.py" ok
late 300 nccl-coll || MASTER_PORT=29533 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL,ENV \
    step nccl-coll 60 python3 "$G/job.py" ok
unset MASTER_ADDR RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE
late 310 preflight || step preflight-json 40 python3 -m doctor preflight --json
late 320 preflight || step preflight-text 40 env COLUMNS=120 python3 -m doctor preflight
late 330 analyze || step analyze 40 env COLUMNS=120 python3 -m doctor analyze "$W/fr"
late 335 analyze-json || step analyze-json 40 python3 -m doctor analyze "$W/fr" --json
late 340 fields || step smi-fields 40 bash -c "for f in ${FIELDS//,/ } clocks_throttle_reasons.active power.draw.instant; do
  printf '%s=' \$f; nvidia-smi --query-gpu=\$f --format=csv,noheader 2>&1 | head -1; done"
echo "== end t=${SECONDS}s" >>"$LOG"
pack

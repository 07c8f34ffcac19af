#!/bin/bash
# A real host-preflight/v1 document from this GPU host (NVML facts), and the fleet merge of it
set -u
REPO=$PWD; SITE=/tmp/site; W=$OUT/fleet; mkdir -p "$W"
timeout 90 python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target $SITE "$REPO"/.whl/*.whl >"$W/install.out" 2>&1 && echo "install ok" >>"$W/steps.log"
export PYTHONPATH=$SITE PATH=$SITE/bin:$PATH
cd "$W"
nvidia-smi -L >"$W/smi-L.txt" 2>&1
timeout 60 python3 -m doctor fleet-host --preflight >"$W/fleet-host.txt" 2>"$W/fleet-host.err"; echo "rc=$?" >>"$W/fleet-host.err"
timeout 60 python3 -m doctor preflight --json >"$W/preflight.json" 2>"$W/preflight.err"; echo "rc=$?" >>"$W/preflight.err"
echo done >>"$W/steps.log"

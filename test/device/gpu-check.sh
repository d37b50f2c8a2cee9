#!/usr/bin/env bash
# The node agent's GPU detection and GPU Jobs' boxes on a lent NVIDIA machine (docs/live.md, "GPUs"). Run from the
# repository root there, with .device/ holding node.xz (node_modules/node/bin/node, xz), modules.tar.xz (a production
# `npm ci --omit=dev`) and the bubblewrap .deb (`apt-get download bubblewrap`): the machine has no registry to install
# from. What it sees goes under $OUT.
set -u
OUT=${OUT:-$(mktemp -d)}
work=$(mktemp -d)
chmod 755 "$work" # bwrap runs as nobody (the agent is root), and must get to its binary
xz -dc .device/node.xz > "$work/node" && chmod +x "$work/node"
[ -d node_modules ] || { mkdir node_modules && xz -dc .device/modules.tar.xz | tar -xf - -C node_modules; }
command -v bwrap > /dev/null || { dpkg -x .device/bubblewrap_*.deb "$work/bw" && export PATH="$work/bw/usr/bin:$PATH"; }
export PATH="$work:$PATH"
echo "== host"; uname -r; id -u; node --version; bwrap --version; command -v python3
echo "== nvidia-smi"
nvidia-smi --query-gpu=index,name,memory.total,pci.bus_id --format=csv,noheader,nounits
cat /proc/driver/nvidia/gpus/*/information
ls -l /dev/nvidia*
echo "== what the agent detects"
node --input-type=module -e '
const facts = await import("./src/backends/live/HostFacts.ts")
const isolation = await import("./src/backends/live/Isolation.ts")
console.log(JSON.stringify({ gpus: facts.detectGpus(), isolation: isolation.detectIsolation() }))' | tee "$OUT/detected.json"
echo "== a server with its local agent, and two Jobs"
node test/device/GpuCheck.ts "$OUT"

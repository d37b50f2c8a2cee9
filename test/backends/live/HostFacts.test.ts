/**
 * What the agent measures of its host's GPUs (src/backends/live/HostFacts.ts): nvidia-smi's listing, and the driver's
 * minor number that names each GPU's device node. The H200's nvidia-smi line and driver information are a real
 * machine's, read on 2026-11-26 by test/device/gpu-check.sh (docs/live.md, "GPUs").
 */
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { detectGpus, driverMinor, parseNvidiaSmi } from "../../../src/backends/live/HostFacts.ts"

const dir = mkdtempSync(join(tmpdir(), "nodus-host-facts-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** What an H200 machine's nvidia-smi and driver said (the UUID shortened). */
const h200 = {
  line: "0, NVIDIA H200, 143771, 00000000:00:06.0",
  information:
    "Model: \t\t NVIDIA H200\nIRQ:   \t\t 41\nGPU UUID: \t GPU-7dd1984e-0000\nVideo BIOS: \t 96.00.a5.00.1a\nBus Type: \t PCIe\n" +
    "DMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\nBus Location: \t 0000:00:06.0\nDevice Minor: \t 0\nGPU Firmware: \t 580.159.04\nGPU Excluded:\t No\n"
}

describe("nvidia-smi", () => {
  it("lists one GPU per line: index, name, memory in MiB and PCI bus id; its node is /dev/nvidia<index> unless the driver says", () => {
    const output =
      "0, NVIDIA H100 80GB HBM3, 81559, 00000000:18:00.0\n1, NVIDIA H100 80GB HBM3, 81559, 00000000:2A:00.0\n"
    expect(parseNvidiaSmi(output)).toEqual([
      { model: "NVIDIA H100 80GB HBM3", memoryMiB: 81_559, device: "/dev/nvidia0" },
      { model: "NVIDIA H100 80GB HBM3", memoryMiB: 81_559, device: "/dev/nvidia1" }
    ])
    expect(parseNvidiaSmi(output, (busId) => (busId === "00000000:2A:00.0" ? 5 : undefined))[1]!.device).toBe(
      "/dev/nvidia5"
    )
  })

  it("gives nothing for what is not a GPU line", () => {
    expect(parseNvidiaSmi("")).toEqual([])
    expect(parseNvidiaSmi("No devices were found\n")).toEqual([])
    expect(parseNvidiaSmi("0, NVIDIA L4, [N/A], 00000000:01:00.0\n")).toEqual([])
    expect(parseNvidiaSmi("NVIDIA L4, 23034\n")).toEqual([])
  })

  it("reads the driver's minor number under /proc/driver/nvidia/gpus, whose directory has a 4-digit domain", () => {
    const gpus = join(dir, "gpus")
    mkdirSync(join(gpus, "0000:2a:00.0"), { recursive: true })
    writeFileSync(
      join(gpus, "0000:2a:00.0", "information"),
      "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 0\nDevice Minor: \t 3\nBus Location: \t 0000:2a:00.0\n"
    )
    expect(driverMinor(gpus)("00000000:2A:00.0")).toBe(3)
    expect(driverMinor(gpus)("00000000:18:00.0")).toBeUndefined()
  })

  it("runs nvidia-smi with the query it parses, and finds no GPU where it is missing or fails", () => {
    const fake = join(dir, "nvidia-smi")
    writeFileSync(
      fake,
      `#!/bin/sh\n[ "$1" = --query-gpu=index,name,memory.total,pci.bus_id ] || exit 9\necho '${h200.line}'\n`
    )
    chmodSync(fake, 0o755)
    const gpus = join(dir, "h200-gpus")
    mkdirSync(join(gpus, "0000:00:06.0"), { recursive: true })
    writeFileSync(join(gpus, "0000:00:06.0", "information"), h200.information)
    expect(detectGpus(fake, gpus)).toEqual([{ model: "NVIDIA H200", memoryMiB: 143_771, device: "/dev/nvidia0" }])
    expect(detectGpus(fake, join(dir, "gpus"))).toEqual([{
      model: "NVIDIA H200",
      memoryMiB: 143_771,
      device: "/dev/nvidia0"
    }])
    expect(detectGpus(join(dir, "absent"))).toEqual([])
    const failing = join(dir, "failing-smi")
    writeFileSync(
      failing,
      "#!/bin/sh\necho 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver' >&2\nexit 9\n"
    )
    chmodSync(failing, 0o755)
    expect(detectGpus(failing)).toEqual([])
  })
})

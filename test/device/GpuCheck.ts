/**
 * The GPU check of a lent NVIDIA machine (test/device/gpu-check.sh runs it; docs/live.md, "GPUs" records what it
 * saw): a `nodus serve --backend local` on the machine, whose in-process agent found the GPUs; one Job that asks for a
 * GPU and lists what its box sees (device nodes, nvidia-smi, the CUDA driver), and one that asks for none. Writes each
 * object and log under the directory it is given, and exits non-zero when a Job did not end as expected.
 */
import { spawn } from "node:child_process"
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { callAs, printedBy } from "../support/ServerProcess.ts"

const out = process.argv[2] ?? mkdtempSync(join(tmpdir(), "gpu-check-"))
const token = "nds_gpu-check-token-0123456789abcdefghijklmnopqrstuv"
const root = join(import.meta.dirname, "..", "..")
const dataDir = mkdtempSync(join(tmpdir(), "nodus-gpu-check-"))

const server = spawn(process.execPath, [
  join(root, "bin", "nodus.js"),
  "serve",
  "--data-dir",
  dataDir,
  "--addr",
  "127.0.0.1:0"
], {
  env: { ...process.env, NODUS_TLS: "off", NODUS_BOOTSTRAP_TOKEN: token }
})
const serverLog = printedBy(server)
const url = await serverLog.first(/nodus serving (http:\/\/\S+)/u, 90_000)
const callAdmin = callAs(token)
const call = (method: string, path: string, body?: unknown) => callAdmin(url, method, path, body)

const save = (name: string, value: unknown) =>
  writeFileSync(join(out, name), typeof value === "string" ? value : JSON.stringify(value, null, 2))

/** What a box sees of GPUs: its device nodes, nvidia-smi, and the CUDA driver's device count and first name. */
const probe = [
  "echo '-- /dev'; ls /dev",
  "echo '-- nvidia-smi -L'; nvidia-smi -L; echo \"nvidia-smi exit $?\"",
  "echo '-- CUDA driver'; python3 -c \"import ctypes; c = ctypes.CDLL('libcuda.so.1'); n = ctypes.c_int(); print('cuInit', c.cuInit(0)); print('cuDeviceGetCount', c.cuDeviceGetCount(ctypes.byref(n)), n.value); d = ctypes.c_int(); b = ctypes.create_string_buffer(128); c.cuDeviceGet(ctypes.byref(d), 0); c.cuDeviceGetName(b, 128, d); print('device 0', b.value.decode())\"",
  "echo \"python exit $?\""
].join("; ")

const job = (name: string, gpus: number) => ({
  apiVersion: "nodus.dev/v1",
  kind: "Job",
  metadata: { name },
  spec: {
    image: "debian:12",
    command: ["sh", "-c", probe],
    ...(gpus === 0 ? {} : { resources: { gpu: { count: gpus } } })
  }
})

const jobs = "/apis/nodus.dev/v1/namespaces/gpu/jobs"
let failed = false
try {
  console.log(
    "namespace",
    (await call("POST", "/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: "gpu" } }))
      .status
  )
  for (const [name, gpus] of [["with-gpu", 1], ["without-gpu", 0]] as const) {
    const created = await call("POST", jobs, job(name, gpus))
    console.log("create", name, created.status, created.status === 201 ? "" : created.text)
    if (created.status !== 201) failed = true
  }
  for (const name of ["with-gpu", "without-gpu"]) {
    const deadline = Date.now() + 90_000
    let phase = ""
    while (Date.now() < deadline) {
      const got = (await call("GET", `${jobs}/${name}`)).body
      phase = got?.status?.phase ?? ""
      if (["Succeeded", "Failed"].includes(phase)) {
        save(`${name}.json`, got)
        break
      }
      await new Promise((resolve) => setTimeout(resolve, 500))
    }
    const log = await call("GET", `${jobs}/${name}/log`)
    save(`${name}.log`, log.text)
    console.log(`---- ${name}: ${phase}\n${log.text}`)
    if (phase !== "Succeeded") failed = true
  }
  // The local Node is no Node object: its capacity shows as its offerings (`local`, `local-gpu<N>`).
  const offerings = (await call("GET", "/apis/nodus.dev/v1/offerings")).body
  save("offerings.json", offerings)
  console.log(
    "offerings",
    JSON.stringify(offerings?.items?.map((offering: any) => [offering.metadata.name, offering.spec?.accelerator]))
  )
} finally {
  server.kill("SIGTERM")
  save("server.log", serverLog.output())
}
process.exit(failed ? 1 : 0)

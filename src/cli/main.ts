/**
 * The `nodus` command. `nodus serve` runs the API server; `nodus kubeconfig` prints a kubeconfig for the admin so
 * that `KUBECONFIG=<file> kubectl get nodus -A` works. Settings come from flags or environment (Config.ts).
 * `nodus sim <scenario>` runs a simulator scenario headless (Sim.ts); `nodus agent` joins this host to a control
 * plane as a Node (AgentCommand.ts); `nodus replay-functions` replays LLM serving load on a Function under the
 * simulator (ReplayFunctions.ts). Each command loads only the modules it needs, so `nodus sim` starts without the
 * server's.
 */
import type { Cause } from "effect"
import { flushCompileCache } from "node:module"
import { resolve, type ServerConfig, usage } from "../server/Config.ts"
import { operatorUsage } from "./Operator.ts"

/** Here, not in AgentCommand.ts and Workloads.ts: printing the help should not load their modules. */
const agentUsage =
  `  nodus agent --server <url> --token <token> [--ca <file>] [--data-dir <dir>] [--name <node>] [--warm-boxes N]
              [--egress-allow-cidr <cidr>]…
                              join this host to a control plane as a Node (docs/live.md)`
const workloadsUsage = `  nodus logs job/<name> [-n <project>] [-f] [--index N] [--attempt N] [--tail N]
                              print a Job's log (follow it with -f)
  nodus output job/<name> <output> [-n <project>] [--index N] [-o <file>]
                              download an output of a Job (stdout unless -o)
  nodus nodes [-n <project>]  list enrolled Nodes (every project without -n)
  nodus volume put <volume> <dir> -n <project>
                              commit a directory as a Volume's next revision (a tar.zst)
  nodus volume get <volume> <dir> -n <project> [--revision N]
                              unpack a Volume's revision (its latest without --revision) into a directory
  nodus sandbox exec <name> -n <project> [-i] [-w <dir>] [-e NAME=value]… [--timeout 30s] -- <command> [args…]
                              run a command in a Sandbox; exits with its code (-i: send stdin)
  nodus sandbox cp <name>:<path> <file> | <file> <name>:<path> -n <project>
                              copy a file out of or into a Sandbox ("-" for stdout or stdin)
  nodus sandbox shell <name> -n <project> [--shell /bin/bash]
                              an interactive terminal in a Sandbox`

const help = `nodus — control plane for compute, training and agent workloads

Usage:
  nodus serve [flags]         run the API server
  nodus kubeconfig [flags]    print a kubeconfig for the admin (add --namespace <project> to set a default project)
  nodus sim <scenario> [...]  run a simulator scenario headless and print its JSON summary (nodus sim --help)
  nodus report <scenario> [--out report.html]  run its what-if variants and write an HTML report (nodus report --help)
  nodus replay-functions [--trace code|conv|genai|FILE] [--minutes N] [--concurrency 1,4,16] [--json]
                              replay LLM serving load on a Function under the simulator (nodus replay-functions --help)
  nodus forecast [--trace alibaba|FILE] [--horizon 168h] [--capacity-gpus N] [--json]
                              a Pool's GPU demand forecast from a trace, with its backtest (nodus forecast --help)
${agentUsage}
${workloadsUsage}
${operatorUsage}

Flags (each also an environment variable):
${usage()}
`

/** How long after its modules load a server writes Node's compile cache: once it has started, off its start's path. */
const compileCacheFlushMs = 10_000

const fail = (message: string): never => {
  process.stderr.write(`nodus: ${message}\n`)
  process.exit(2)
}

const configFrom = (args: ReadonlyArray<string>): ServerConfig => {
  const result = resolve(process.env, args)
  return result._tag === "Ok" ? result.config : fail(result.message)
}

/** A failure in one line for humans: the messages of the error and its causes, no stack traces. */
const summary = (squash: (cause: Cause.Cause<unknown>) => unknown, cause: Cause.Cause<unknown>): string => {
  const messages: Array<string> = []
  let error: unknown = squash(cause)
  while (error !== undefined && error !== null && messages.length < 4) {
    const message = error instanceof Error ? error.message : typeof error === "object" ? "" : String(error)
    if (message !== "" && !messages.includes(message)) messages.push(message)
    error = typeof error === "object" ? (error as { cause?: unknown }).cause : undefined
  }
  return messages.length === 0 ? "unknown error" : messages.join(": ")
}

const serve = async (args: ReadonlyArray<string>) => {
  const config = configFrom(args)
  // Begun before the server's modules load, and done meanwhile: a new embedded database is unpacked on a worker thread
  // (loading them holds this thread for a second or so).
  const { prepareStore } = await import("../server/DataDir.ts")
  const prepared = prepareStore(config).catch((error: unknown) =>
    fail(`cannot prepare ${config.dataDir}: ${error instanceof Error ? error.message : String(error)}`)
  )
  // Modules by their own path: the package's index loads every module it has, its Redis client's included (about 700).
  const [NodeRuntime, { Cause, Effect, Layer }, Server] = await Promise.all([
    import("@effect/platform-node/NodeRuntime"),
    import("effect"),
    import("../server/Server.ts"),
    prepared
  ])
  // Written now rather than at exit alone, so that a server that is killed leaves the next start its compiled code too.
  setTimeout(() => flushCompileCache(), compileCacheFlushMs).unref()
  const program = Layer.launch(Server.layer(config)).pipe(
    Effect.catchCause((cause) => Effect.sync(() => fail(`cannot serve: ${summary(Cause.squash, cause)}`)))
  )
  NodeRuntime.runMain(program, { disableErrorReporting: true })
}

const printKubeconfig = async (args: ReadonlyArray<string>) => {
  const { ensureAdminToken, ensureDataDir, ensureTls, kubeconfig, serverUrl } = await import("../server/Bootstrap.ts")
  const namespaceIndex = args.findIndex((arg) => arg === "--namespace" || arg.startsWith("--namespace="))
  const namespace = namespaceIndex === -1
    ? undefined
    : args[namespaceIndex]!.includes("=")
    ? args[namespaceIndex]!.split("=")[1]
    : args[namespaceIndex + 1]
  const rest = namespaceIndex === -1
    ? args
    : args.filter((_, index) =>
      index !== namespaceIndex && (args[namespaceIndex]!.includes("=") || index !== namespaceIndex + 1)
    )
  const config = configFrom(rest)
  ensureDataDir(config.dataDir)
  const tls = config.tls ? ensureTls(config, new Date()) : undefined
  process.stdout.write(kubeconfig({
    server: serverUrl(config),
    ca: tls?.ca,
    token: ensureAdminToken(config),
    ...(namespace === undefined ? {} : { namespace })
  }))
}

const [command, ...args] = process.argv.slice(2)
switch (command) {
  case "serve":
    await serve(args)
    break
  case "kubeconfig":
    await printKubeconfig(args)
    break
  case "grant":
  case "refund": {
    const { operate } = await import("./Operator.ts")
    process.exitCode = await operate(command, args, configFrom)
    break
  }
  case "logs":
  case "output":
  case "nodes": {
    const { workloads } = await import("./Workloads.ts")
    process.exitCode = await workloads(command, args, configFrom)
    break
  }
  case "volume": {
    const { volume } = await import("./VolumeCommand.ts")
    process.exitCode = await volume(args, configFrom)
    break
  }
  case "sandbox": {
    const { sandbox } = await import("./SandboxCommand.ts")
    process.exitCode = await sandbox(args, configFrom)
    break
  }
  case "agent": {
    const { runAgent } = await import("./AgentCommand.ts")
    // Its long poll would keep the process up for seconds after every program stopped.
    process.exit(await runAgent(args))
    break
  }
  case "sim": {
    const { sim } = await import("./Sim.ts")
    process.exitCode = sim(args)
    break
  }
  case "report": {
    const { report } = await import("./Report.ts")
    process.exitCode = report(args)
    break
  }
  case "replay-functions": {
    const { replayFunctions } = await import("./ReplayFunctions.ts")
    process.exitCode = await replayFunctions(args)
    break
  }
  case "forecast": {
    const { forecast } = await import("./Forecast.ts")
    process.exitCode = forecast(args)
    break
  }
  case undefined:
  case "help":
  case "--help":
  case "-h":
    process.stdout.write(help)
    break
  default:
    fail(`unknown command "${command}"\n\n${help}`)
}

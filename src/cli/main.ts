/**
 * The `nodus` command. `nodus serve` runs the API server; `nodus kubeconfig` prints a kubeconfig for the admin so
 * that `KUBECONFIG=<file> kubectl get nodus -A` works. Settings come from flags or environment (Config.ts).
 */
import { NodeRuntime } from "@effect/platform-node"
import { Cause, Effect, Layer } from "effect"
import { ensureAdminToken, ensureDataDir, ensureTls, kubeconfig, serverUrl } from "../server/Bootstrap.ts"
import { resolve, type ServerConfig, usage } from "../server/Config.ts"
import * as Server from "../server/Server.ts"

const help = `nodus — control plane for compute, training and agent workloads

Usage:
  nodus serve [flags]         run the API server
  nodus kubeconfig [flags]    print a kubeconfig for the admin (add --namespace <project> to set a default project)

Flags (each also an environment variable):
${usage()}
`

const fail = (message: string): never => {
  process.stderr.write(`nodus: ${message}\n`)
  process.exit(2)
}

const configFrom = (args: ReadonlyArray<string>): ServerConfig => {
  const result = resolve(process.env, args)
  return result._tag === "Ok" ? result.config : fail(result.message)
}

/** A failure in one line for humans: the messages of the error and its causes, no stack traces. */
const summary = (cause: Cause.Cause<unknown>): string => {
  const messages: Array<string> = []
  let error: unknown = Cause.squash(cause)
  while (error !== undefined && error !== null && messages.length < 4) {
    const message = error instanceof Error ? error.message : typeof error === "object" ? "" : String(error)
    if (message !== "" && !messages.includes(message)) messages.push(message)
    error = typeof error === "object" ? (error as { cause?: unknown }).cause : undefined
  }
  return messages.length === 0 ? "unknown error" : messages.join(": ")
}

const serve = (args: ReadonlyArray<string>) => {
  const config = configFrom(args)
  const program = Layer.launch(Server.layer(config)).pipe(
    Effect.catchCause((cause) => Effect.sync(() => fail(`cannot serve: ${summary(cause)}`)))
  )
  NodeRuntime.runMain(program, { disableErrorReporting: true })
}

const printKubeconfig = (args: ReadonlyArray<string>) => {
  const namespaceIndex = args.findIndex((arg) => arg === "--namespace" || arg.startsWith("--namespace="))
  const namespace = namespaceIndex === -1 ? undefined : args[namespaceIndex]!.includes("=") ? args[namespaceIndex]!.split("=")[1] : args[namespaceIndex + 1]
  const rest = namespaceIndex === -1 ? args : args.filter((_, index) => index !== namespaceIndex && (args[namespaceIndex]!.includes("=") || index !== namespaceIndex + 1))
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
    serve(args)
    break
  case "kubeconfig":
    printKubeconfig(args)
    break
  case undefined:
  case "help":
  case "--help":
  case "-h":
    process.stdout.write(help)
    break
  default:
    fail(`unknown command "${command}"\n\n${help}`)
}

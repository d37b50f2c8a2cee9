/**
 * The operator's credit commands (docs/billing.md, "Credits"): `nodus grant <amountUSD>` creates a CreditGrant and
 * `nodus refund <topup>` refunds a TopUp, through the server's admin-only operations. They find the server and the
 * admin token as the other commands do (ServerClient.ts: the kubeconfig, else flags, environment, data directory). A
 * grant carries one Idempotency-Key for all its attempts, so a retry never grants twice: after a lost connection, a
 * request still in progress (409 RequestInProgress) or a server briefly unavailable (503), the command tries again
 * itself, and the operator never has to rerun it, which would send a new key and grant twice.
 */
import { randomUUID } from "node:crypto"
import { request as httpRequest } from "node:http"
import { request as httpsRequest } from "node:https"
import type { ServerConfig } from "../server/Config.ts"
import { findServer, type Server, statusLine } from "./ServerClient.ts"

export const operatorUsage = `  nodus grant <amountUSD> [--reason <text>] [--name <name>] [flags]
                              grant credits as the operator (a CreditGrant of source Admin)
  nodus refund <topup> [flags]
                              refund a Succeeded TopUp as the operator`

/** Attempts of one request (the same Idempotency-Key each time). */
const attemptsMax = 5

/** The longest wait between two attempts, whatever `details.retryAfterSeconds` asks, so a command never hangs long. */
const retryAfterMsMax = 10_000

interface Reply {
  readonly status: number
  readonly body: any
}

const send = (server: Server, url: string, body: unknown, headers: Record<string, string>) =>
  new Promise<Reply>((resolve, reject) => {
    const text = JSON.stringify(body ?? {})
    const options = {
      method: "POST",
      headers: { authorization: `Bearer ${server.token}`, "content-type": "application/json", ...headers },
      ...(server.ca === undefined ? {} : { ca: server.ca })
    }
    const call = (server.url.startsWith("https:") ? httpsRequest : httpRequest)(url, options, (response) => {
      let received = ""
      response.setEncoding("utf8")
      response.on("data", (chunk: string) => (received += chunk))
      response.on("end", () => {
        let parsed: unknown
        try {
          parsed = JSON.parse(received)
        } catch {
          parsed = { message: received }
        }
        resolve({ status: response.statusCode ?? 0, body: parsed })
      })
    })
    call.on("error", reject)
    call.end(text)
  })

/** Answers that the same request may get right later: one with this key still in progress, or a server unavailable. */
const retryable = (reply: Reply): boolean =>
  (reply.status === 409 && reply.body?.reason === "RequestInProgress") || reply.status === 503

/**
 * The wait before the next attempt: what the server asked (`details.retryAfterSeconds`, bounded), else a growing pause.
 */
const pauseMs = (attempt: number, reply: Reply | undefined): number => {
  const asked: unknown = reply?.body?.details?.retryAfterSeconds
  return typeof asked === "number" && Number.isFinite(asked) && asked >= 0
    ? Math.min(asked * 1000, retryAfterMsMax)
    : 500 * attempt
}

const sendWithRetries = async (
  server: Server,
  url: string,
  body: unknown,
  headers: Record<string, string>
): Promise<Reply> => {
  for (let attempt = 1;; attempt++) {
    let reply: Reply | undefined
    try {
      reply = await send(server, url, body, headers)
    } catch (error) {
      if (attempt >= attemptsMax) throw error
    }
    if (reply !== undefined && (!retryable(reply) || attempt >= attemptsMax)) return reply
    await new Promise((resolve) => setTimeout(resolve, pauseMs(attempt, reply)))
  }
}

/** Splits the command's own flags and positional arguments from the server flags (every server flag takes a value). */
const split = (args: ReadonlyArray<string>, own: ReadonlyArray<string>) => {
  const values = new Map<string, string>()
  const positional: Array<string> = []
  const rest: Array<string> = []
  for (let index = 0; index < args.length; index++) {
    const arg = args[index]!
    const [flag, inline] = arg.includes("=")
      ? [arg.slice(0, arg.indexOf("=")), arg.slice(arg.indexOf("=") + 1)]
      : [arg, undefined]
    if (!arg.startsWith("--")) positional.push(arg)
    else if (own.includes(flag)) values.set(flag, inline ?? args[++index] ?? "")
    else rest.push(...(inline === undefined && index + 1 < args.length ? [arg, args[++index]!] : [arg]))
  }
  return { values, positional, rest }
}

const failure = (reply: Reply): string => statusLine(reply.body ?? {}, reply.status)

/** Runs `nodus grant` or `nodus refund`; answers the exit code. */
export const operate = async (
  command: "grant" | "refund",
  args: ReadonlyArray<string>,
  configFrom: (args: ReadonlyArray<string>) => ServerConfig
): Promise<number> => {
  const { values, positional, rest } = split(args, ["--reason", "--name"])
  if (positional.length !== 1) {
    process.stderr.write(
      `nodus: ${command} needs exactly one ${
        command === "grant" ? "amount in USD (e.g. nodus grant 25 --reason goodwill)" : "TopUp name"
      }\n`
    )
    return 2
  }
  const target = positional[0]!
  try {
    const server = await findServer(rest, configFrom)
    const base = `${server.url}/apis/${server.apiGroup}/v1`
    if (command === "refund") {
      const reply = await sendWithRetries(
        server,
        `${base}/operator/topups/${encodeURIComponent(target)}/refund`,
        {},
        {}
      )
      if (reply.status !== 200) throw new Error(failure(reply))
      process.stdout.write(`topup/${reply.body.metadata.name} ${reply.body.status?.phase ?? ""}\n`)
      return 0
    }
    const name = values.get("--name")
    const reason = values.get("--reason")
    const grant = {
      apiVersion: `${server.apiGroup}/v1`,
      kind: "CreditGrant",
      metadata: name === undefined ? { generateName: "grant-" } : { name },
      spec: { amountUSD: target, source: "Admin", ...(reason === undefined ? {} : { reason }) }
    }
    const reply = await sendWithRetries(server, `${base}/operator/creditgrants`, grant, {
      "idempotency-key": randomUUID()
    })
    if (reply.status !== 201) throw new Error(failure(reply))
    process.stdout.write(`creditgrant/${reply.body.metadata.name} granted ${reply.body.spec.amountUSD} USD\n`)
    return 0
  } catch (error) {
    process.stderr.write(`nodus: ${command} failed: ${error instanceof Error ? error.message : String(error)}\n`)
    return 1
  }
}

/**
 * `nodus sandbox shell` (SandboxCommand.ts): this terminal joined to a shell in a Sandbox over the server's terminal
 * WebSocket (kinds/sandbox/http/SandboxApi.ts): keystrokes go as binary frames, the shell's output comes back as binary
 * frames, a resize of this terminal is sent as `{"resize": …}`, and the shell's exit code ends the command.
 */
import WebSocket from "ws"
import { type Server, statusLine } from "./ServerClient.ts"

/** The size a terminal asks for: this one's, or 80×24 where it says 0 or nothing (a 0×0 pty, no terminal at all). */
export const terminalSize = (stream: { readonly columns?: number | undefined; readonly rows?: number | undefined }) => {
  const fit = (
    value: number | undefined,
    fallback: number
  ) => (value !== undefined && Number.isInteger(value) && value >= 1 ? Math.min(value, 1000) : fallback)
  return { cols: fit(stream.columns, 80), rows: fit(stream.rows, 24) }
}

/** Why a shell cannot be joined to this process's stdin, if it cannot: it must be a terminal. */
export const noTerminal = (stdin: { readonly isTTY?: boolean | undefined }): string | undefined =>
  stdin.isTTY === true
    ? undefined
    : "stdin is not a terminal: a shell needs one. To run a command without a terminal, use nodus sandbox exec <name> -n <project> -- <command>"

export const shell = async (server: Server, url: string, shellPath: string | undefined): Promise<number> => {
  const { token, ca } = server
  const size = () => terminalSize(process.stdout)
  const query = new URLSearchParams({
    cols: String(size().cols),
    rows: String(size().rows),
    ...(shellPath === undefined ? {} : { shell: shellPath })
  })
  const socket = new WebSocket(`${url.replace(/^http/u, "ws")}?${query}`, {
    headers: { authorization: `Bearer ${token}` },
    ...(ca === undefined ? {} : { ca })
  })
  return new Promise((resolve) => {
    let code = 1
    const raw = process.stdin.isTTY === true
    const restore = () => {
      if (raw) process.stdin.setRawMode(false)
      process.stdin.pause()
    }
    socket.on("open", () => {
      if (raw) process.stdin.setRawMode(true)
      process.stdin.on("data", (chunk: Buffer) => socket.send(chunk, { binary: true }))
      process.stdout.on("resize", () => socket.send(JSON.stringify({ resize: size() })))
    })
    socket.on("message", (data: Buffer, binary: boolean) => {
      if (binary) process.stdout.write(data)
      else code = (JSON.parse(data.toString("utf8")) as { exit?: number | null }).exit ?? 1
    })
    socket.on("unexpected-response", (_request, response) => {
      let body = ""
      response.setEncoding("utf8").on("data", (chunk: string) => (body += chunk)).on("end", () => {
        const status = (() => {
          try {
            return (JSON.parse(body) ?? {}) as Record<string, unknown>
          } catch {
            return { message: body }
          }
        })()
        process.stderr.write(`nodus sandbox shell: ${statusLine(status, response.statusCode)}\n`)
        restore()
        resolve(1)
      })
    })
    socket.on("error", (error) => {
      process.stderr.write(`nodus sandbox shell: ${error.message}\n`)
      restore()
      resolve(1)
    })
    socket.on("close", () => {
      restore()
      resolve(code)
    })
  })
}

/**
 * A nodus server in a process of its own, as tests and the device check drive it: what it prints, the URL it
 * announces, JSON calls with its admin token, and waiting for a condition.
 */
import type { ChildProcess } from "node:child_process"

/** Collects what `child` prints (stdout and stderr); `first` resolves with group 1 of `pattern` once it appears. */
export const printedBy = (child: ChildProcess) => {
  let output = ""
  const listeners = new Set<() => void>()
  const onData = (chunk: Buffer) => {
    output += chunk.toString()
    for (const listener of listeners) listener()
  }
  child.stdout?.on("data", onData)
  child.stderr?.on("data", onData)
  return {
    output: () => output,
    first: (pattern: RegExp, timeoutMs: number) =>
      new Promise<string>((resolve, reject) => {
        const check = () => {
          const match = pattern.exec(output)
          if (match === null) return
          clearTimeout(timer)
          listeners.delete(check)
          resolve(match[1]!)
        }
        const timer = setTimeout(() => {
          listeners.delete(check)
          reject(new Error(`nothing matched ${pattern} within ${timeoutMs / 1000} s:\n${output}`))
        }, timeoutMs)
        listeners.add(check)
        check()
      })
  }
}

/** A JSON call to a server as its admin: the status, the text, and the body parsed (undefined when it is not JSON). */
export const callAs = (token: string) => async (url: string, method: string, path: string, body?: unknown) => {
  const response = await fetch(`${url}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  const text = await response.text()
  let parsed: any
  try {
    parsed = JSON.parse(text)
  } catch {
    parsed = undefined
  }
  return { status: response.status, text, body: parsed }
}

/** Polls `check` every 100 ms until it holds, or throws after `timeoutMs`. */
export const eventually = async (what: string, check: () => Promise<boolean> | boolean, timeoutMs = 30_000) => {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

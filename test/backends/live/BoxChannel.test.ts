/** The agent's end of a box's supervisor (BoxChannel.ts), over streams the test writes: what it takes and what it drops. */
import { PassThrough } from "node:stream"
import { describe, expect, it } from "vitest"
import { BoxChannel } from "../../../src/backends/live/BoxChannel.ts"

const channel = () => {
  const input = new PassThrough()
  const output = new PassThrough()
  const sent: Array<Record<string, unknown>> = []
  input.setEncoding("utf8").on("data", (chunk: string) => {
    for (const line of chunk.split("\n").filter(Boolean)) sent.push(JSON.parse(line))
  })
  const box = new BoxChannel({ input, output }, () => 1_000)
  const say = (line: string) => output.write(`${line}\n`)
  return { box, say, output, sent }
}

const tick = () => new Promise((resolve) => setTimeout(resolve, 5))

describe("the box channel", () => {
  it("drops lines that are not supervisor messages, and answers a refusal it does not know as Invalid", async () => {
    const { box, say, sent } = channel()
    say(`{"ev":"ready","main":[]}`)
    await box.ready
    for (const line of ["not json", `{"ev":"out","id":"x","fd":1,"data":12345}`, `{"ev":"exit","id":"x","code":"1","signal":null,"timedOut":false}`, `{"ev":"out","id":"x","fd":3,"data":""}`]) say(line)
    const reply = box.handle({ _tag: "ReadFile", path: "/x", maxBytes: 10 })
    await tick()
    const rid = sent.find((request) => request["op"] === "read")!["rid"]
    say(`{"rid":${rid},"ok":false,"code":"SomethingElse","message":"odd"}`)
    expect(await reply).toEqual({ _tag: "Refused", code: "Invalid", message: "odd" })
  })

  it("drops a line longer than any answer, and goes on with the next", async () => {
    const { box, say, output, sent } = channel()
    say(`{"ev":"ready","main":[]}`)
    await box.ready
    output.write("x".repeat(23 * 1024 * 1024))
    const reply = box.handle({ _tag: "DeleteFile", path: "/x" })
    await tick()
    const rid = sent.find((request) => request["op"] === "delete")!["rid"]
    say(`{"rid":${rid},"ok":true}`)
    expect(await reply).toEqual({ _tag: "Done" })
  })

  it("tracks a command's output and exit, and answers every waiter when the box ends", async () => {
    const { box, say, output } = channel()
    say(`{"ev":"ready","main":[]}`)
    await box.ready
    const done = box.handle({ _tag: "Exec", command: "c1", argv: ["echo"], env: {}, workingDir: undefined, stdin: undefined, keepStdin: false, timeoutMs: undefined, background: false })
    expect(box.busy).toBe(true)
    say(`{"ev":"out","id":"c1","fd":1,"data":"${Buffer.from("hi\n").toString("base64")}"}`)
    say(`{"ev":"exit","id":"c1","code":0,"signal":null,"timedOut":false}`)
    const reply = await done
    expect(reply).toMatchObject({ _tag: "Command", state: { phase: "Exited", exitCode: 0, stdout: Buffer.from("hi\n").toString("base64") } })
    expect(box.busy).toBe(false)
    const pending = box.handle({ _tag: "ReadFile", path: "/x", maxBytes: 10 })
    output.end()
    await tick()
    expect(await pending).toMatchObject({ _tag: "Refused", code: "SandboxNotRunning" })
  })

  it("keeps a background command's output for its log only, and forgets old exited commands", async () => {
    const { box, say } = channel()
    say(`{"ev":"ready","main":[]}`)
    await box.ready
    for (let index = 0; index < 70; index++) {
      await box.handle({ _tag: "Exec", command: `bg${index}`, argv: ["true"], env: {}, workingDir: undefined, stdin: undefined, keepStdin: false, timeoutMs: undefined, background: true })
      say(`{"ev":"out","id":"bg${index}","fd":1,"data":"${Buffer.from("x").toString("base64")}"}`)
      say(`{"ev":"exit","id":"bg${index}","code":0,"signal":null,"timedOut":false}`)
      await tick()
    }
    expect(await box.handle({ _tag: "Command", command: "bg0" })).toMatchObject({ _tag: "Refused", code: "NotFound" })
    expect(await box.handle({ _tag: "Output", command: "bg69", offset: 0, waitMs: 0 })).toMatchObject({ _tag: "Output", data: Buffer.from("x").toString("base64"), exited: true })
    expect(await box.handle({ _tag: "Resize", command: "bg69", cols: 80, rows: 24 })).toMatchObject({ _tag: "Refused", code: "NotFound" })
  })
})

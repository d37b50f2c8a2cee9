/**
 * The agent's end of a box's supervisor (BoxChannel.ts), over streams the test writes: what it takes and what it drops.
 */
import { PassThrough } from "node:stream"
import { describe, expect, it } from "vitest"
import { BoxChannel, type OutputBounds } from "../../../src/backends/live/BoxChannel.ts"
import { OutputBudget } from "../../../src/backends/live/CommandOutput.ts"

const channel = (bounds?: OutputBounds) => {
  const input = new PassThrough()
  const output = new PassThrough()
  const sent: Array<Record<string, unknown>> = []
  input.setEncoding("utf8").on("data", (chunk: string) => {
    for (const line of chunk.split("\n").filter(Boolean)) sent.push(JSON.parse(line))
  })
  const box = new BoxChannel({ input, output }, () => 1_000, bounds)
  const say = (line: string) => output.write(`${line}\n`)
  return { box, say, output, sent }
}

const tick = () => new Promise((resolve) => setTimeout(resolve, 5))

describe("the box channel", () => {
  it("drops lines that are not supervisor messages, and answers a refusal it does not know as Invalid", async () => {
    const { box, say, sent } = channel()
    say(`{"ev":"ready","main":[]}`)
    await box.ready
    for (
      const line of [
        "not json",
        `{"ev":"out","id":"x","fd":1,"data":12345}`,
        `{"ev":"exit","id":"x","code":"1","signal":null,"timedOut":false}`,
        `{"ev":"out","id":"x","fd":3,"data":""}`
      ]
    ) say(line)
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
    const done = box.handle({
      _tag: "Exec",
      command: "c1",
      argv: ["echo"],
      env: {},
      workingDir: undefined,
      stdin: undefined,
      keepStdin: false,
      timeoutMs: undefined,
      background: false
    })
    expect(box.busy).toBe(true)
    say(`{"ev":"out","id":"c1","fd":1,"data":"${Buffer.from("hi\n").toString("base64")}"}`)
    say(`{"ev":"exit","id":"c1","code":0,"signal":null,"timedOut":false}`)
    const reply = await done
    expect(reply).toMatchObject({
      _tag: "Command",
      state: { phase: "Exited", exitCode: 0, stdout: Buffer.from("hi\n").toString("base64") }
    })
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
      await box.handle({
        _tag: "Exec",
        command: `bg${index}`,
        argv: ["true"],
        env: {},
        workingDir: undefined,
        stdin: undefined,
        keepStdin: false,
        timeoutMs: undefined,
        background: true
      })
      say(`{"ev":"out","id":"bg${index}","fd":1,"data":"${Buffer.from("x").toString("base64")}"}`)
      say(`{"ev":"exit","id":"bg${index}","code":0,"signal":null,"timedOut":false}`)
      await tick()
    }
    expect(await box.handle({ _tag: "Command", command: "bg0" })).toMatchObject({ _tag: "Refused", code: "NotFound" })
    expect(await box.handle({ _tag: "Output", command: "bg69", offset: 0, waitMs: 0 })).toMatchObject({
      _tag: "Output",
      data: Buffer.from("x").toString("base64"),
      exited: true
    })
    expect(await box.handle({ _tag: "Resize", command: "bg69", cols: 80, rows: 24 })).toMatchObject({
      _tag: "Refused",
      code: "NotFound"
    })
  })

  it("keeps the output of many noisy commands within the bounds of a command, a box and a host, dropping the oldest first", async () => {
    const host = new OutputBudget(1_000)
    const bounds: OutputBounds = { host, boxMax: 600, commandMax: 250 }
    const boxes = [channel(bounds), channel(bounds), channel(bounds)]
    for (const { box, say } of boxes) {
      say(`{"ev":"ready","main":[]}`)
      await box.ready
    }
    const exec = (box: BoxChannel, id: string) =>
      box.handle({
        _tag: "Exec",
        command: id,
        argv: ["yes"],
        env: {},
        workingDir: undefined,
        stdin: undefined,
        keepStdin: false,
        timeoutMs: undefined,
        background: true
      })
    const kept = async (box: BoxChannel, id: string) => {
      const reply = await box.handle({ _tag: "Output", command: id, offset: 0, waitMs: 0 })
      return reply._tag === "Output"
        ? { from: reply.offset, bytes: Buffer.from(reply.data, "base64").length }
        : { from: 0, bytes: 0 }
    }
    // Twelve commands over three boxes, each writing 100 chunks of 10 bytes: 12,000 bytes in all.
    for (const [index, { box }] of boxes.entries()) {
      for (let command = 0; command < 4; command++) await exec(box, `c${index}-${command}`)
    }
    for (let round = 0; round < 100; round++) {
      for (const [index, { say }] of boxes.entries()) {
        for (let command = 0; command < 4; command++) {
          say(
            `{"ev":"out","id":"c${index}-${command}","fd":1,"data":"${
              Buffer.from(`${String(round).padStart(9, "0")}\n`).toString("base64")
            }"}`
          )
        }
      }
      await tick()
      const perBox = await Promise.all(boxes.map(async ({ box }, index) => {
        let total = 0
        for (let command = 0; command < 4; command++) {
          const { bytes } = await kept(box, `c${index}-${command}`)
          expect(bytes).toBeLessThanOrEqual(250)
          total += bytes
        }
        return total
      }))
      for (const total of perBox) expect(total).toBeLessThanOrEqual(600)
      expect(perBox.reduce((sum, total) => sum + total, 0)).toBeLessThanOrEqual(1_000)
      expect(host.held).toBe(perBox.reduce((sum, total) => sum + total, 0))
    }
    // What is kept is the newest: each command's last bytes, its start dropped and said (the offset, droppedBytes).
    const { box } = boxes[2]!
    const last = await box.handle({ _tag: "Output", command: "c2-3", offset: 0, waitMs: 0 })
    expect(last._tag === "Output" && Buffer.from(last.data, "base64").toString().endsWith("000000099\n")).toBe(true)
    const state = await box.handle({ _tag: "Command", command: "c2-3" })
    expect(state._tag === "Command" && state.state.droppedBytes).toBe(last._tag === "Output" ? last.offset : -1)
    // A box that ends lets go of all it kept.
    boxes[0]!.output.end()
    await tick()
    let rest = 0
    for (const index of [1, 2]) {
      for (let command = 0; command < 4; command++) {
        rest += (await kept(boxes[index]!.box, `c${index}-${command}`)).bytes
      }
    }
    expect(host.held).toBe(rest)
    expect(host.members.size).toBe(8)
  })

  it("answers a foreground command with the last of each stream, truncated when any was cut or dropped", async () => {
    const { box, say } = channel({ host: new OutputBudget(1_000_000), boxMax: 1_000_000, commandMax: 8 })
    say(`{"ev":"ready","main":[]}`)
    await box.ready
    const done = box.handle({
      _tag: "Exec",
      command: "f",
      argv: ["x"],
      env: {},
      workingDir: undefined,
      stdin: undefined,
      keepStdin: false,
      timeoutMs: undefined,
      background: false
    })
    for (const [fd, text] of [[1, "abcd"], [2, "EFGH"], [1, "ijkl"]] as const) {
      say(`{"ev":"out","id":"f","fd":${fd},"data":"${Buffer.from(text).toString("base64")}"}`)
    }
    say(`{"ev":"exit","id":"f","code":0,"signal":null,"timedOut":false}`)
    const reply = await done
    expect(reply._tag).toBe("Command")
    if (reply._tag !== "Command") return
    expect(Buffer.from(reply.state.stdout!, "base64").toString()).toBe("ijkl")
    expect(Buffer.from(reply.state.stderr!, "base64").toString()).toBe("EFGH")
    expect(reply.state).toMatchObject({ truncated: true, droppedBytes: 4 })
  })
})

// Unit tests for src/server/Config.ts: defaults, environment variables over defaults, flags over environment (both
// flag forms), address parsing, every rejected setting, and the --help text naming each variable.

import { assert, describe, it } from "@effect/vitest"
import { parseRange } from "../../src/core/PublicAddress.ts"
import {
  type ConfigResult,
  parseAddress,
  resolve,
  type ServerConfig,
  settings,
  usage
} from "../../src/server/Config.ts"

const ok = (result: ConfigResult): ServerConfig => {
  if (result._tag === "Err") assert.fail(`expected a configuration, got: ${result.message}`)
  return result.config
}

const err = (result: ConfigResult): string => {
  if (result._tag === "Ok") assert.fail(`expected an error, got ${JSON.stringify(result.config)}`)
  return result.message
}

const defaults: ServerConfig = {
  host: "127.0.0.1",
  port: 8443,
  dataDir: "./.nodus",
  databaseUrl: undefined,
  tls: true,
  tlsCert: undefined,
  tlsKey: undefined,
  bootstrapToken: undefined,
  secretKey: undefined,
  apiGroup: "nodus.dev",
  backend: "local",
  simSpeed: 1,
  warmBoxes: 1,
  publicUrl: undefined,
  webhookAllowLoopback: false,
  role: "all",
  egressAllow: []
}

describe("Config.resolve", () => {
  it("has defaults", () => {
    assert.deepStrictEqual(ok(resolve({}, [])), defaults)
  })

  it("treats an empty environment variable as unset", () => {
    assert.deepStrictEqual(ok(resolve({ NODUS_ADDR: "", NODUS_TLS: "", DATABASE_URL: "" }, [])), defaults)
  })

  it("ignores unrelated environment variables", () => {
    assert.deepStrictEqual(ok(resolve({ PATH: "/bin", HOME: "/root", NODUS_OTHER: "x" }, [])), defaults)
  })

  it("reads every setting from its environment variable", () => {
    const env = {
      NODUS_ADDR: "0.0.0.0:9443",
      NODUS_DATA_DIR: "/var/lib/nodus",
      DATABASE_URL: "postgres://u@db/nodus",
      NODUS_TLS: "off",
      NODUS_TLS_CERT: "/etc/tls.crt",
      NODUS_TLS_KEY: "/etc/tls.key",
      NODUS_BOOTSTRAP_TOKEN: "secret",
      NODUS_SECRET_KEY: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
      NODUS_API_GROUP: "example.com",
      NODUS_BACKEND: "sim",
      NODUS_SIM_SPEED: "60",
      NODUS_WARM_BOXES: "4",
      NODUS_PUBLIC_URL: "https://nodus.example.com/",
      NODUS_WEBHOOK_ALLOW_LOOPBACK: "1",
      NODUS_ROLE: "controllers",
      NODUS_EGRESS_ALLOW_CIDR: "127.0.0.1/32, fd00::/8"
    }
    assert.deepStrictEqual(ok(resolve(env, [])), {
      host: "0.0.0.0",
      port: 9443,
      dataDir: "/var/lib/nodus",
      databaseUrl: "postgres://u@db/nodus",
      tls: false,
      tlsCert: "/etc/tls.crt",
      tlsKey: "/etc/tls.key",
      bootstrapToken: "secret",
      secretKey: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
      apiGroup: "example.com",
      backend: "sim",
      simSpeed: 60,
      warmBoxes: 4,
      publicUrl: "https://nodus.example.com",
      webhookAllowLoopback: true,
      role: "controllers",
      egressAllow: [parseRange("127.0.0.1/32")!, parseRange("fd00::/8")!]
    })
  })

  it("adds up a repeated --egress-allow-cidr, replacing its variable's list, and refuses what is no range", () => {
    const env = { NODUS_EGRESS_ALLOW_CIDR: "10.0.0.0/8" }
    assert.deepStrictEqual(
      ok(resolve(env, ["--egress-allow-cidr", "127.0.0.1/32", "--egress-allow-cidr=::1"])).egressAllow,
      [parseRange("127.0.0.1/32")!, parseRange("::1/128")!]
    )
    assert.deepStrictEqual(ok(resolve(env, [])).egressAllow, [parseRange("10.0.0.0/8")!])
    for (const bad of ["localhost", "10.0.0.0/33", "10.0.0.0/8/1", "::1/129"]) {
      assert.include(err(resolve({}, ["--egress-allow-cidr", bad])), `"${bad}" is not an address range`)
    }
  })

  it("lets a flag override its environment variable, in either form", () => {
    const env = { NODUS_ADDR: "0.0.0.0:1", NODUS_TLS: "on", NODUS_API_GROUP: "env.example.com", NODUS_DATA_DIR: "/env" }
    const table: Record<string, { readonly args: ReadonlyArray<string>; readonly expected: Partial<ServerConfig> }> = {
      "--addr x": { args: ["--addr", "10.0.0.1:2"], expected: { host: "10.0.0.1", port: 2 } },
      "--addr=x": { args: ["--addr=10.0.0.1:3"], expected: { host: "10.0.0.1", port: 3 } },
      "--tls off": { args: ["--tls", "off"], expected: { tls: false } },
      "--tls=off": { args: ["--tls=off"], expected: { tls: false } },
      "--webhook-allow-loopback (a switch)": {
        args: ["--webhook-allow-loopback", "--tls", "off"],
        expected: { webhookAllowLoopback: true, tls: false }
      },
      "--webhook-allow-loopback=off": {
        args: ["--webhook-allow-loopback=off"],
        expected: { webhookAllowLoopback: false }
      },
      "--webhook-allow-loopback 1 (a switch value after it)": {
        args: ["--webhook-allow-loopback", "1", "--tls", "off"],
        expected: { webhookAllowLoopback: true, tls: false }
      },
      "--webhook-allow-loopback off": {
        args: ["--webhook-allow-loopback", "off"],
        expected: { webhookAllowLoopback: false }
      },
      "--api-group": { args: ["--api-group=flag.example.com"], expected: { apiGroup: "flag.example.com" } },
      "--data-dir": { args: ["--data-dir", "/flag"], expected: { dataDir: "/flag" } },
      "--database-url with '=' in the value": {
        args: ["--database-url=postgres://h/db?sslmode=require"],
        expected: { databaseUrl: "postgres://h/db?sslmode=require" }
      },
      "--bootstrap-token": { args: ["--bootstrap-token", "t"], expected: { bootstrapToken: "t" } },
      "--tls-cert and --tls-key": {
        args: ["--tls-cert", "c.pem", "--tls-key=k.pem"],
        expected: { tlsCert: "c.pem", tlsKey: "k.pem" }
      },
      "--sim-speed": { args: ["--sim-speed", "0.5"], expected: { simSpeed: 0.5 } },
      "--warm-boxes": { args: ["--warm-boxes", "0"], expected: { warmBoxes: 0 } },
      "--backend=sim": { args: ["--backend=sim"], expected: { backend: "sim" } },
      "--backend=none": { args: ["--backend=none"], expected: { backend: "none" } },
      "--backend=local": { args: ["--backend=local"], expected: { backend: "local" } },
      "--role api on a database": {
        args: ["--role", "api", "--database-url=postgres://h/db", "--backend=none"],
        expected: { role: "api", databaseUrl: "postgres://h/db", backend: "none" }
      },
      "--role=controllers on a database": {
        args: ["--role=controllers", "--database-url=postgres://h/db"],
        expected: { role: "controllers", databaseUrl: "postgres://h/db" }
      },
      "the last of a repeated flag": {
        args: ["--addr", "10.0.0.1:4", "--addr=10.0.0.1:5"],
        expected: { host: "10.0.0.1", port: 5 }
      }
    }
    const fromEnv = ok(resolve(env, []))
    for (const [label, row] of Object.entries(table)) {
      assert.deepStrictEqual(ok(resolve(env, row.args)), { ...fromEnv, ...row.expected }, label)
    }
  })

  it("accepts a flag setting an environment variable's value back to its default", () => {
    assert.deepStrictEqual(ok(resolve({ NODUS_TLS: "off" }, ["--tls", "on"])), defaults)
  })

  it("rejects bad settings with a message naming the variable", () => {
    const table: Record<
      string,
      { readonly env?: Record<string, string>; readonly args?: ReadonlyArray<string>; readonly mentions: string }
    > = {
      "address without port": { env: { NODUS_ADDR: "localhost" }, mentions: "NODUS_ADDR" },
      "a role that is none": {
        args: ["--role", "scheduler", "--database-url=postgres://h/db"],
        mentions: "NODUS_ROLE"
      },
      "role api on the embedded store": { args: ["--role", "api", "--backend", "none"], mentions: "--database-url" },
      "role controllers on the embedded store": { args: ["--role", "controllers"], mentions: "--role all" },
      "role api with the local backend": {
        args: ["--role", "api", "--database-url=postgres://h/db"],
        mentions: "--backend none"
      },
      "address with a non-numeric port": { env: { NODUS_ADDR: "localhost:http" }, mentions: "NODUS_ADDR" },
      "port above 65535": { env: { NODUS_ADDR: "127.0.0.1:65536" }, mentions: "NODUS_ADDR" },
      "port of six digits": { args: ["--addr", "127.0.0.1:100000"], mentions: "NODUS_ADDR" },
      "empty --addr=": { args: ["--addr="], mentions: "NODUS_ADDR" },
      "NODUS_TLS=maybe": { env: { NODUS_TLS: "maybe" }, mentions: "NODUS_TLS" },
      "--tls=true": { args: ["--tls=true"], mentions: "NODUS_TLS" },
      "cert without key": { env: { NODUS_TLS_CERT: "c.pem" }, mentions: "NODUS_TLS_KEY" },
      "key without cert": { args: ["--tls-key", "k.pem"], mentions: "NODUS_TLS_CERT" },
      "API group without a dot": { env: { NODUS_API_GROUP: "nodus" }, mentions: "NODUS_API_GROUP" },
      "API group with upper case": { env: { NODUS_API_GROUP: "Nodus.dev" }, mentions: "NODUS_API_GROUP" },
      "API group with an empty label": { args: ["--api-group", "nodus..dev"], mentions: "NODUS_API_GROUP" },
      "a backend that does not exist": { env: { NODUS_BACKEND: "aws" }, mentions: "NODUS_BACKEND" },
      "--backend=live": { args: ["--backend=live"], mentions: "choose local, sim or none" },
      "a speed of zero": { env: { NODUS_SIM_SPEED: "0" }, mentions: "NODUS_SIM_SPEED" },
      "a negative speed": { args: ["--sim-speed=-2"], mentions: "NODUS_SIM_SPEED" },
      "a speed that is not a number": { env: { NODUS_SIM_SPEED: "fast" }, mentions: "NODUS_SIM_SPEED" },
      "a speed in exponent form": { env: { NODUS_SIM_SPEED: "1e3" }, mentions: "NODUS_SIM_SPEED" },
      "more warm boxes than a host keeps": { env: { NODUS_WARM_BOXES: "17" }, mentions: "NODUS_WARM_BOXES" },
      "warm boxes that are no number": { args: ["--warm-boxes=some"], mentions: "from 0 to 16" },
      "a public URL that is not http(s)": {
        env: { NODUS_PUBLIC_URL: "ftp://nodus.example.com" },
        mentions: "NODUS_PUBLIC_URL"
      },
      "a public URL with a query": {
        args: ["--public-url", "https://nodus.example.com/?x=1"],
        mentions: "NODUS_PUBLIC_URL"
      },
      "a public URL that is no URL": { args: ["--public-url=nodus"], mentions: "NODUS_PUBLIC_URL" },
      "a secret key that is too short": { env: { NODUS_SECRET_KEY: "c2hvcnQ=" }, mentions: "NODUS_SECRET_KEY" },
      "a secret key that is no base64 or hex": {
        args: ["--secret-key", "not a key at all, though it is long enough!!"],
        mentions: "openssl rand -base64 32"
      },
      "unknown flag": { args: ["--port", "1"], mentions: "--port" },
      "unknown flag in = form": { args: ["--verbose=1"], mentions: "--verbose" },
      "a positional argument": { args: ["serve"], mentions: "serve" },
      "flag without value": { args: ["--addr"], mentions: "--addr" },
      "flag without value after another": { args: ["--tls", "off", "--data-dir"], mentions: "--data-dir" },
      "flag followed by another flag": {
        args: ["--data-dir", "--tls", "off"],
        mentions: "flag --data-dir needs a value"
      }
    }
    for (const [label, row] of Object.entries(table)) {
      const message = err(resolve(row.env ?? {}, row.args ?? []))
      assert.include(message, row.mentions, label)
    }
  })

  it("words the flag errors", () => {
    assert.strictEqual(err(resolve({}, ["--bogus"])), "unknown flag --bogus (see nodus --help)")
    assert.strictEqual(err(resolve({}, ["--addr"])), "flag --addr needs a value")
    assert.strictEqual(err(resolve({ NODUS_TLS: "maybe" }, [])), `NODUS_TLS must be on or off, not "maybe"`)
  })

  it("checks the flag, not the environment variable it overrides", () => {
    assert.strictEqual(ok(resolve({ NODUS_TLS: "maybe" }, ["--tls", "off"])).tls, false)
    assert.include(err(resolve({ NODUS_TLS: "off" }, ["--tls", "maybe"])), "maybe")
  })
})

describe("Config.parseAddress", () => {
  const table: ReadonlyArray<readonly [string, { readonly host: string; readonly port: number } | undefined]> = [
    ["127.0.0.1:8443", { host: "127.0.0.1", port: 8443 }],
    ["0.0.0.0:80", { host: "0.0.0.0", port: 80 }],
    ["localhost:9000", { host: "localhost", port: 9000 }],
    ["[::1]:9000", { host: "::1", port: 9000 }],
    ["[::]:443", { host: "::", port: 443 }],
    [":9000", { host: "127.0.0.1", port: 9000 }],
    ["host:0", { host: "host", port: 0 }],
    ["host:65535", { host: "host", port: 65_535 }],
    ["host:65536", undefined],
    ["host:99999", undefined],
    ["host:123456", undefined],
    ["host:", undefined],
    ["host", undefined],
    ["", undefined],
    ["::1:9000", undefined],
    ["[127.0.0.1]:9000", undefined],
    ["[localhost]:9000", undefined],
    ["[::1]", undefined],
    ["host:-1", undefined],
    ["host:8a", undefined],
    ["a:b:9000", undefined]
  ]
  for (const [address, expected] of table) {
    it(`${JSON.stringify(address)} → ${expected === undefined ? "rejected" : `${expected.host} ${expected.port}`}`, () => {
      assert.deepStrictEqual(parseAddress(address), expected)
    })
  }
})

describe("Config.usage", () => {
  it("mentions every environment variable and flag", () => {
    const text = usage()
    const names = [
      "NODUS_ADDR",
      "NODUS_DATA_DIR",
      "DATABASE_URL",
      "NODUS_TLS",
      "NODUS_TLS_CERT",
      "NODUS_TLS_KEY",
      "NODUS_BOOTSTRAP_TOKEN",
      "NODUS_SECRET_KEY",
      "NODUS_API_GROUP",
      "NODUS_BACKEND",
      "NODUS_SIM_SPEED",
      "NODUS_WARM_BOXES",
      "NODUS_PUBLIC_URL",
      "NODUS_WEBHOOK_ALLOW_LOOPBACK",
      "NODUS_ROLE",
      "NODUS_EGRESS_ALLOW_CIDR"
    ]
    assert.deepStrictEqual(settings.map((setting) => setting.env), names)
    for (const name of names) assert.match(text, new RegExp(`\\b${name}\\b`, "u"), name)
    for (const setting of settings) assert.include(text, setting.flag, setting.flag)
  })

  it("states the defaults", () => {
    const text = usage()
    for (const fallback of ["127.0.0.1:8443", "./.nodus", "(default on)", "nodus.dev"]) assert.include(text, fallback)
    assert.strictEqual(text.split("\n").length, settings.length)
  })

  it("states a switch as one, not as a default value to pass", () => {
    const line = usage().split("\n").find((row) => row.includes("--webhook-allow-loopback"))!
    assert.notInclude(line, "(default 0)")
    assert.include(line, "a switch: off unless given")
  })
})

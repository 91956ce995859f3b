// test/interop/interop.js: a node-redlock client driven line by line by
// test/t/020_interop_with_node_redlock.pl, to check that the redlock extension and node-redlock exclude
// each other on the same masters and the same resource names.
//
//   node interop.js PORT [PORT...]
//
// Commands on stdin, one per line; one answer line each on stdout:
//   acquire NAME TTL_MS   -> "ok VALUE" (the lock's random value) | "fail ERRORNAME: MESSAGE"
//   release NAME          -> "ok" | "fail ERRORNAME: MESSAGE"  (releases the lock this
//                            process took for NAME, even after its TTL ran out)
//   extend NAME TTL_MS    -> "ok" | "fail ..."
//   quit                  -> "bye", then exit
// Every attempt is a single one (retryCount 0), so a held lock fails at once.
"use strict";

const readline = require("readline");
const Redis = require("ioredis");
const Redlock = require("redlock").default;

const ports = process.argv.slice(2).map(Number);
if (ports.length === 0 || ports.some((p) => !(p > 0))) {
  console.error("usage: node interop.js PORT [PORT...]");
  process.exit(2);
}

const clients = ports.map(
  (port) =>
    new Redis({ host: "127.0.0.1", port, maxRetriesPerRequest: 1, enableOfflineQueue: true })
);
const redlock = new Redlock(clients, { retryCount: 0, driftFactor: 0.01 });
const locks = new Map();

function say(line) {
  process.stdout.write(line + "\n");
}

function failure(err) {
  // ExecutionError carries the per-attempt votes; name the first reason from a master.
  return `fail ${err.name}: ${err.message}`.replace(/\s+/g, " ");
}

async function handle(words) {
  const [cmd, name, ttl] = words;
  switch (cmd) {
    case "acquire": {
      const lock = await redlock.acquire([name], Number(ttl));
      locks.set(name, lock);
      return `ok ${lock.value}`;
    }
    case "release": {
      const lock = locks.get(name);
      if (!lock) return "fail NoLock: this process never acquired " + name;
      locks.delete(name);
      await lock.release();
      return "ok";
    }
    case "extend": {
      const lock = locks.get(name);
      if (!lock) return "fail NoLock: this process never acquired " + name;
      locks.set(name, await lock.extend(Number(ttl)));
      return "ok";
    }
    case "quit":
      return "bye";
    default:
      return "fail BadCommand: " + cmd;
  }
}

const rl = readline.createInterface({ input: process.stdin });
let queue = Promise.resolve();
rl.on("line", (line) => {
  const words = line.trim().split(/\s+/);
  queue = queue.then(async () => {
    let answer;
    try {
      answer = await handle(words);
    } catch (err) {
      answer = failure(err);
    }
    say(answer);
    if (answer === "bye") {
      clients.forEach((c) => c.disconnect());
      process.exit(0);
    }
  });
});
rl.on("close", () => {
  queue.then(() => {
    clients.forEach((c) => c.disconnect());
    process.exit(0);
  });
});

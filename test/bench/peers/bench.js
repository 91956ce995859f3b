'use strict';
// test/bench/peers/bench.js: acquire + release pairs with a peer Redlock client.
//
//   node bench.js LIB PORT[,PORT...] WORKERS SECONDS
//
// LIB is "redlock" (node-redlock 5 beta: new Redlock(clients).acquire([key], ttl), then
// lock.release()) or "semaphore" (redis-semaphore's RedlockMutex: tryAcquire(), release()).
// One ioredis client per master on 127.0.0.1, shared by WORKERS concurrent async loops,
// as these libraries are meant to be used.  Each pair takes a distinct key with a
// 10 s TTL, then releases it.  After 0.3 s of warm-up, runs for SECONDS and prints one
// line of key=value figures:
//
//   lib=redlock workers=16 pairs=... seconds=... pairs_per_s=... avg_us=... mid_us=...
//   p50_us=... p99_us=... failed=...
//
// mid_us: the median, over batches of 500 consecutive pairs of one worker, of each
// batch's average latency (as floor.c computes it).

const Redis = require('ioredis');
const { default: Redlock } = require('redlock');
const { RedlockMutex } = require('redis-semaphore');

const [lib, portList, workersArg, secondsArg] = process.argv.slice(2);
if (!lib || !portList || !workersArg || !secondsArg) {
  console.error('usage: node bench.js redlock|semaphore PORT[,PORT...] WORKERS SECONDS');
  process.exit(2);
}
const workers = Number(workersArg);
const seconds = Number(secondsArg);
const TTL_MS = 10000;
const WARMUP_MS = 300;
const MAX_PAIRS = 2000000;
const BATCH = 500;

const clients = portList.split(',').map((port) => new Redis({
  host: '127.0.0.1',
  port: Number(port),
  lazyConnect: true,
  maxRetriesPerRequest: 1,
  enableOfflineQueue: false,
}));

const redlock = new Redlock(clients, { retryCount: 0, driftFactor: 0.01 });
redlock.on('error', () => {}); // failed attempts are counted below

async function pair(key) {
  if (lib === 'redlock') {
    let lock;
    try {
      lock = await redlock.acquire([key], TTL_MS);
    } catch (e) {
      return false;
    }
    await lock.release();
    return true;
  }
  const mutex = new RedlockMutex(clients, key, {
    lockTimeout: TTL_MS,
    acquireAttemptsLimit: 1,
    refreshInterval: 0,
  });
  if (!(await mutex.tryAcquire())) {
    return false;
  }
  await mutex.release();
  return true;
}

async function main() {
  if (lib !== 'redlock' && lib !== 'semaphore') {
    throw new Error(`unknown LIB "${lib}"`);
  }
  await Promise.all(clients.map((c) => c.connect()));
  const lat = [];
  const perWorker = [];
  let failed = 0;
  let seq = 0;
  const warmEnd = Date.now() + WARMUP_MS;
  let measuring = false;
  let start;
  let end;

  async function worker(w) {
    const mine = [];
    perWorker.push(mine);
    // warm-up, not counted
    while (Date.now() < warmEnd) {
      await pair(`peer:${lib}:${process.pid}:${w}:${seq++}`);
    }
    if (!measuring) {
      measuring = true;
      start = process.hrtime.bigint();
      end = start + BigInt(Math.round(seconds * 1e9));
    }
    for (;;) {
      const t0 = process.hrtime.bigint();
      if (t0 >= end || lat.length >= MAX_PAIRS) break;
      const ok = await pair(`peer:${lib}:${process.pid}:${w}:${seq++}`);
      const t1 = process.hrtime.bigint();
      if (!ok) failed++;
      lat.push(Number(t1 - t0) / 1000);
      mine.push(Number(t1 - t0) / 1000);
    }
  }

  await Promise.all(Array.from({ length: workers }, (_, w) => worker(w)));
  const elapsed = Number(process.hrtime.bigint() - start) / 1e9;
  lat.sort((a, b) => a - b);
  const n = lat.length;
  const sum = lat.reduce((a, b) => a + b, 0);
  const pct = (q) => (n ? lat[Math.min(n - 1, Math.floor(n * q))] : 0);
  const means = [];
  perWorker.forEach((l) => {
    for (let b = 0; b + BATCH <= l.length; b += BATCH) {
      means.push(l.slice(b, b + BATCH).reduce((a, x) => a + x, 0) / BATCH);
    }
  });
  means.sort((a, b) => a - b);
  const mid = means.length ? means[Math.floor(means.length / 2)] : (n ? sum / n : 0);
  console.log(`lib=${lib} workers=${workers} pairs=${n} seconds=${elapsed.toFixed(3)} `
    + `pairs_per_s=${(n / elapsed).toFixed(1)} avg_us=${(n ? sum / n : 0).toFixed(1)} `
    + `mid_us=${mid.toFixed(1)} `
    + `p50_us=${pct(0.5).toFixed(1)} p99_us=${pct(0.99).toFixed(1)} failed=${failed}`);
  clients.forEach((c) => c.disconnect());
}

main().catch((e) => {
  console.error(`peers: ${e.stack || e}`);
  clients.forEach((c) => c.disconnect());
  process.exit(1);
});

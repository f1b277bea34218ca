#!/usr/bin/env node
// A scripted stand-in for `pimem serve` (docs/host-protocol.md), for the adapter's tests.
//
// FAKE_PIMEM_LOG: a file that gets one JSON line per thing that happened here: "started" (with
// the process's cwd and PYTHONIOENCODING), every "request" received, the host's answer to our
// own requests ("host-answer") and the end of stdin ("eof").
// FAKE_PIMEM_SCRIPT: JSON with the behaviours a test wants, all optional:
//   answers:   { method: result }           replaces the default result
//   errors:    { method: {type, message} }  answers with an error instead
//   delays:    { method: ms }               answers that late
//   progress:  { method: [line, ...] }      progress lines sent before the answer
//   crash:     [method, ...]                exit with code 3 on receiving it, without answering
//   crashOnce: [method, ...]                the same, in the first process to receive it only
//   complete:  params                       sent as a `complete` request once session.start is answered
//   notices:   { method: [{text, key}, ...] } notice events sent before answering it
//   service:   {socket, python, version, protocol}  a service event sent after the ready line
//   ignoreEof: true                         stay alive after stdin ends (must be killed)
//   silent:    true                         never write the ready line nor answer anything
//   failBeforeReady: {code, stderr}         write stderr and exit with code, before the ready line

import { appendFileSync, existsSync, writeFileSync } from "node:fs";

const logFile = process.env.FAKE_PIMEM_LOG;
const script = JSON.parse(process.env.FAKE_PIMEM_SCRIPT || "{}");

function log(entry) {
  if (logFile) appendFileSync(logFile, `${JSON.stringify({ pid: process.pid, ...entry })}\n`);
}

function send(message) {
  if (!script.silent) process.stdout.write(`${JSON.stringify(message)}\n`);
}

const DEFAULT_ANSWERS = {
  "session.start": { scope: { project: "fake" } },
  "session.before_prompt": { snapshot: null, hidden: [] },
  "session.settled": { queued: true },
  "session.compacted": {},
  "session.shutdown": { captured_in_time: true, indexed_in_time: true, seconds: 0 },
  ping: { pong: true },
};

function answer(id, method) {
  for (const notice of script.notices?.[method] ?? []) send({ event: "notice", ...notice });
  for (const line of script.progress?.[method] ?? []) send({ id, progress: line });
  const error = script.errors?.[method];
  if (error) {
    send({ id, error });
    return;
  }
  send({ id, result: script.answers?.[method] ?? DEFAULT_ANSWERS[method] ?? { text: `${method} done` } });
  if (method === "session.start" && script.complete) {
    send({ id: "pimem-1", method: "complete", params: script.complete });
  }
}

function receive(line) {
  const message = JSON.parse(line);
  if (typeof message.method !== "string") {
    log({ kind: "host-answer", message });
    return;
  }
  log({ kind: "request", id: message.id, method: message.method, params: message.params });
  if (script.crash?.includes(message.method)) process.exit(3);
  if (script.crashOnce?.includes(message.method)) {
    const marker = `${logFile}.crashed-${message.method}`;
    if (!existsSync(marker)) {
      writeFileSync(marker, "");
      process.exit(3);
    }
  }
  const delay = script.delays?.[message.method];
  if (delay) setTimeout(() => answer(message.id, message.method), delay);
  else answer(message.id, message.method);
}

log({ kind: "started", cwd: process.cwd(), argv: process.argv.slice(2), pythonioencoding: process.env.PYTHONIOENCODING });
if (script.failBeforeReady) {
  process.stderr.write(script.failBeforeReady.stderr);
  process.exit(script.failBeforeReady.code);
}
send({ event: "ready", methods: Object.keys(DEFAULT_ANSWERS) });
if (script.service) send({ event: "service", ...script.service });

let buffer = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => {
  buffer += chunk;
  let newline = buffer.indexOf("\n");
  while (newline >= 0) {
    const line = buffer.slice(0, newline);
    buffer = buffer.slice(newline + 1);
    if (line.trim()) receive(line);
    newline = buffer.indexOf("\n");
  }
});
process.stdin.on("end", () => {
  log({ kind: "eof" });
  if (script.ignoreEof) setInterval(() => {}, 60_000); // only a kill ends it now
  else process.exit(0);
});

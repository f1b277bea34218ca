// Where the user's memory service listens, as the last bridge found it. With a route the adapter
// speaks to the service over its socket itself and starts no bridge process (ADR 0029). A route
// is only a hint: the service still checks the installation and the settings when the session
// attaches, and anything amiss (no route, a stopped service, a refusal) falls back to a bridge,
// which finds or starts the right service and says where it listens.

import { lstatSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { dirname, join } from "node:path";

/** The route's file in pimem's runtime directory. */
export const ROUTE_FILE = "pi-route.json";

/** A service as a bridge attached to it (its `{"event": "service"}` line). */
export interface ServiceRoute {
  socket: string;
  /** The Python installation the service runs (`sys.prefix`), which it checks on attach. */
  python: string;
  version: string;
  protocol: number;
}

const SERVICE_ON = new Set(["on", "1", "true", "yes"]);

/** The route's fields from a line or a file; `undefined` unless every one is there. */
export function routeOf(value: unknown): ServiceRoute | undefined {
  const route = value as Partial<ServiceRoute> | null;
  if (
    typeof route?.socket !== "string" ||
    typeof route.python !== "string" ||
    typeof route.version !== "string" ||
    typeof route.protocol !== "number"
  ) {
    return undefined;
  }
  return { socket: route.socket, python: route.python, version: route.version, protocol: route.protocol };
}

/** pimem's runtime directory (docs/host-protocol.md): `$PIMEM_HOME/run`, else
 * `$XDG_RUNTIME_DIR/pimem`, else `pimem-<uid>` in the temporary directory (Linux). */
export function runtimeDir(env: NodeJS.ProcessEnv): string | undefined {
  if (env.PIMEM_HOME) return join(env.PIMEM_HOME.replace(/^~(?=\/|$)/, homedir()), "run");
  const xdg = env.XDG_RUNTIME_DIR;
  if (xdg && isDirectory(xdg)) return join(xdg, "pimem");
  if (process.platform === "linux" && process.getuid) return join(tmpdir(), `pimem-${process.getuid()}`);
  return undefined;
}

/** The route recorded for `command`, if the memory service is on and the route can be trusted:
 * a file only this user can read, in a runtime directory only this user can enter, naming a
 * socket of this user's inside it. */
export function readRoute(env: NodeJS.ProcessEnv, command: string): ServiceRoute | undefined {
  if (!SERVICE_ON.has((env.PIMEM_SERVICE ?? "on").toLowerCase())) return undefined;
  const directory = runtimeDir(env);
  if (directory === undefined || !isPrivate(directory, "directory")) return undefined;
  const file = join(directory, ROUTE_FILE);
  if (!isPrivate(file, "file")) return undefined;
  try {
    const recorded = JSON.parse(readFileSync(file, "utf8")) as { command?: unknown } | null;
    const route = routeOf(recorded);
    if (recorded?.command !== command || route === undefined) return undefined;
    if (dirname(route.socket) !== directory || !isPrivate(route.socket, "socket")) return undefined;
    return route;
  } catch {
    return undefined; // unreadable or half-written: a bridge finds the service instead
  }
}

/** Record `route` for `command`, whole or not at all; a route that cannot be written costs the
 * next session its direct start, nothing more. */
export function writeRoute(env: NodeJS.ProcessEnv, command: string, route: ServiceRoute): void {
  const directory = runtimeDir(env);
  if (directory === undefined || dirname(route.socket) !== directory || !isPrivate(directory, "directory")) return;
  const file = join(directory, ROUTE_FILE);
  const temporary = `${file}.${process.pid}.tmp`;
  try {
    writeFileSync(temporary, JSON.stringify({ command, ...route }), { mode: 0o600 });
    renameSync(temporary, file);
  } catch {
    // not writable: the next session starts a bridge, as before
  }
}

function isDirectory(path: string): boolean {
  try {
    return lstatSync(path).isDirectory();
  } catch {
    return false;
  }
}

/** `path` is this user's, of the given kind, and (for a directory or a file) shut to others. */
function isPrivate(path: string, kind: "directory" | "file" | "socket"): boolean {
  try {
    const stat = lstatSync(path);
    if (process.getuid && stat.uid !== process.getuid()) return false;
    if (kind === "socket") return stat.isSocket();
    const right = kind === "directory" ? stat.isDirectory() : stat.isFile();
    return right && (stat.mode & 0o077) === 0;
  } catch {
    return false;
  }
}

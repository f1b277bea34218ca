// The part of pi's extension API this adapter uses, typed structurally so the same source runs
// on @mariozechner/pi-coding-agent 0.73.x and @earendil-works/pi-coding-agent 1.x, and so tests
// can hand it a fake.

export interface ModelInfo {
  provider: string;
  id: string;
  cost?: { input?: number; output?: number };
}

export interface ModelRegistryLike {
  getAvailable(): ModelInfo[];
  find(provider: string, id: string): ModelInfo | undefined;
  getApiKeyAndHeaders?(
    model: ModelInfo,
  ): Promise<{ ok: boolean; apiKey?: string; headers?: Record<string, string>; error?: string }>;
}

export interface SessionManagerLike {
  getSessionId(): string;
  getSessionFile(): string | undefined;
  getLeafId(): string | null | undefined;
}

export interface ContextLike {
  cwd: string;
  sessionManager: SessionManagerLike;
  modelRegistry?: ModelRegistryLike;
  model?: ModelInfo;
  hasUI?: boolean;
  ui?: {
    notify?(message: string, level?: "info" | "warning" | "error"): void;
    /** A line in pi's footer under `key`; undefined clears it. */
    setStatus?(key: string, text: string | undefined): void;
  };
  /** Whether the agent is idle (no run, nothing queued). */
  isIdle?(): boolean;
}

export interface TextContent {
  type: "text";
  text: string;
}

export interface ToolResult {
  content: TextContent[];
  details: Record<string, unknown>;
}

export type ToolUpdate = (partial: ToolResult) => void;

export interface ToolDefinitionLike {
  name: string;
  label: string;
  description: string;
  /** A line in pi's "Available tools"; pimem's tools have none (their description says it). */
  promptSnippet?: string;
  parameters: unknown;
  execute(
    toolCallId: string,
    params: Record<string, unknown>,
    signal: AbortSignal | undefined,
    onUpdate: ToolUpdate | undefined,
    ctx: ContextLike,
  ): Promise<ToolResult>;
}

export interface BeforeAgentStartEvent {
  prompt: string;
  systemPrompt: string;
}

export interface BeforeAgentStartResult {
  systemPrompt?: string;
  message?: { customType: string; content: string; display: boolean };
}

// Each event has its own payload; handlers narrow it themselves.
export type Handler = (event: any, ctx: ContextLike) => unknown;

export interface PiLike {
  // 1.x returns an unsubscribe function, 0.73 returns nothing.
  on(event: string, handler: Handler): unknown;
  registerTool(tool: ToolDefinitionLike): void;
}

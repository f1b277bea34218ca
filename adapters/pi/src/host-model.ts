// Distillation with pi's own models: pimem names the model (from the catalog the adapter sends
// at session start) and the adapter runs one completion with no tools and no session.

import type { ContextLike, ModelInfo, ModelRegistryLike } from "./pi.ts";

export interface CompletionRequest {
  model: ModelInfo;
  system: string;
  prompt: string;
  apiKey?: string;
  headers?: Record<string, string>;
  signal: AbortSignal;
}

/** Runs one completion and returns the model's text. */
export type Complete = (request: CompletionRequest) => Promise<string>;

/** The catalog pimem chooses the capture model from. */
export function modelCatalog(ctx: ContextLike): { model?: Record<string, unknown>; models: Record<string, unknown>[] } {
  const describe = (model: ModelInfo) => ({
    provider: model.provider,
    id: model.id,
    input_cost: model.cost?.input ?? 0,
    output_cost: model.cost?.output ?? 0,
  });
  let models: ModelInfo[] = [];
  try {
    models = ctx.modelRegistry?.getAvailable() ?? [];
  } catch {
    models = []; // a registry that cannot list leaves capture to pimem's other distillers
  }
  return { model: ctx.model ? describe(ctx.model) : undefined, models: models.map(describe) };
}

/** Answers pimem's `complete` requests with the model registry of the session's context. */
export async function completeWithRegistry(
  registry: ModelRegistryLike | undefined,
  params: Record<string, unknown>,
  complete: Complete,
): Promise<{ text: string }> {
  const wanted = params.model as { provider?: string; id?: string } | undefined;
  if (!registry || !wanted?.provider || !wanted.id) throw new Error("no model registry to run the completion with");
  const model = registry.find(wanted.provider, wanted.id);
  if (!model) throw new Error(`model ${wanted.provider}/${wanted.id} is not in pi's model registry`);
  let apiKey: string | undefined;
  let headers: Record<string, string> | undefined;
  if (registry.getApiKeyAndHeaders) {
    const auth = await registry.getApiKeyAndHeaders(model);
    if (!auth.ok) throw new Error(auth.error ?? `no credentials for ${model.provider}`);
    apiKey = auth.apiKey;
    headers = auth.headers;
  }
  const timeoutMs = typeof params.timeout_ms === "number" ? params.timeout_ms : 30_000;
  const text = await complete({
    model,
    system: String(params.system ?? ""),
    prompt: String(params.prompt ?? ""),
    apiKey,
    headers,
    signal: AbortSignal.timeout(timeoutMs),
  });
  return { text };
}

interface AssistantMessageLike {
  content: { type: string; text?: string }[];
  stopReason?: string;
  errorMessage?: string;
}

interface PiAi {
  complete(model: unknown, context: unknown, options: unknown): Promise<AssistantMessageLike>;
}

/** pi's completion function, with `prepare` to load its module ahead of the first
 * distillation (never during pi's start-up). */
export function piCompletion(): { complete: Complete; prepare: () => void } {
  let loading: Promise<PiAi> | undefined;
  const load = (): Promise<PiAi> => {
    // Both pi lines map this name to their own module; a failed load is tried again.
    loading ??= (import("@mariozechner/pi-ai") as unknown as Promise<PiAi>).catch((error: unknown) => {
      loading = undefined;
      throw error;
    });
    return loading;
  };
  return {
    complete: (request) => load().then((ai) => completeWith(ai, request)),
    prepare: () => void load().catch(() => {}),
  };
}

async function completeWith(ai: PiAi, request: CompletionRequest): Promise<string> {
  const message = await ai.complete(
    request.model,
    {
      systemPrompt: request.system,
      messages: [{ role: "user", content: [{ type: "text", text: request.prompt }], timestamp: Date.now() }],
    },
    { apiKey: request.apiKey, headers: request.headers, signal: request.signal },
  );
  if (message.stopReason === "error" || message.stopReason === "aborted") {
    throw new Error(message.errorMessage ?? `the model stopped: ${message.stopReason}`);
  }
  return message.content
    .filter((block) => block.type === "text" && typeof block.text === "string")
    .map((block) => block.text)
    .join("\n");
}

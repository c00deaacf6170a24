/**
 * A typed client for memsys's v3 API: memorize, flush, retrieve_lightweight, context and forget.
 *
 * No runtime dependencies: it uses the platform's `fetch` (Node 18+, Deno, Bun, browsers). Field names are the
 * API's own (snake_case), so the HTTP reference and this client read the same. Every failure is a `MemsysError`
 * carrying the envelope's `code` (a subclass per kind); a 503, a 429 (after its Retry-After) and a connection
 * error are retried `maxRetries` times, which is safe for memorize because a `message_id` is stored once.
 */

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

export interface MemsysOptions {
  /** The server, without a path: `http://127.0.0.1:1995` (the default). */
  baseUrl?: string;
  /** An API key (`memsys keys create`); sent as `Authorization: Bearer`. Omit for an anonymous local server. */
  apiKey?: string;
  /** Per request, in milliseconds (default 60 000). */
  timeoutMs?: number;
  /** Retries of a 503, a 429 or a connection error (default 2); 0 turns them off. */
  maxRetries?: number;
  /** A `fetch` of your own (tests, proxies); the global one by default. */
  fetch?: typeof fetch;
}

// ---- requests and results (the server's schemas: GET /docs/openapi.json) -----------------------------------

export interface MemorizeRequest {
  message_id: string;
  /** ISO 8601 (its offset is kept), or a Date. */
  create_time: string | Date;
  sender: string;
  content: string;
  sender_name?: string;
  group_id?: string;
  group_name?: string;
  refer_list?: string[];
  /** Your own JSON object (up to 8 KB, 4 levels): carried to the memories formed from the message; `filters` find
   * them by it. */
  metadata?: Record<string, Json>;
  /** Scopes (default `"default"`): your application and a project within it. */
  app_id?: string;
  project_id?: string;
  /** Scope: the agent the conversation is with. */
  agent_id?: string;
  /** Scope: the conversation; defaults to `group_id`. */
  session_id?: string;
}

export interface SavedMemory {
  id: string;
  memory_type: string;
  user_id: string | null;
  group_id: string | null;
  timestamp: string;
  content: string;
  title?: string | null;
  summary?: string | null;
  memcell_id: string;
  source_message_ids: string[];
  valid_from?: string | null;
  valid_to?: string | null;
  metadata: Record<string, Json>;
}

export interface MemorizeResult {
  saved_memories: SavedMemory[];
  count: number;
  status_info: "extracted" | "accumulated" | "duplicate" | "pending";
  warning?: string | null;
  formation?: string | null;
  idle_close_seconds?: number | null;
}

export interface FlushRequest {
  group_id?: string;
  /** For a personal stream (no group_id): its sender. */
  sender?: string;
}

export type RetrievalMode = "rrf" | "embedding" | "bm25";
export type DataSource = "episode" | "event_log" | "semantic_memory" | "agent_case" | "agent_skill" | "profile";

/** The filter language's operators (docs/filters.md). */
export type FilterOperator = "eq" | "ne" | "in" | "nin" | "gt" | "gte" | "lt" | "lte" | "contains" | "exists";

/** A field's condition: a value (equality) or operators with their operands, `{ gte: 3, lt: 10 }`. */
export type FilterCondition = Json | { [operator in FilterOperator]?: Json };

/**
 * Scopes (`app_id`, `project_id`, `agent_id`, `session_id`, `user_id`, `group_id`), `timestamp` and your metadata's
 * keys (`plan` or `metadata.plan`, dotted for nesting), combined with `AND` / `OR` (lists) and `NOT`:
 * `{ plan: "pro", OR: [{ channel: "email" }, { tags: { contains: "vip" } }] }`.
 */
export type Filter = {
  AND?: Filter[];
  OR?: Filter[];
  NOT?: Filter;
  [field: string]: FilterCondition | Filter[] | Filter | undefined;
};

export interface ScopedSearch {
  user_id?: string;
  group_id?: string;
  time_range_days?: number;
  top_k?: number;
  memory_scope?: "all" | "personal" | "group";
  current_time?: string;
  /** Also memories a newer one superseded (marked `status: "superseded"`). */
  include_superseded?: boolean;
  /** ISO 8601: what was true at that time. */
  as_of?: string;
  explain?: boolean;
  /** Scopes, time and your metadata (docs/filters.md); a bad node is an `InvalidParameterError` naming it. */
  filters?: Filter;
}

export interface RetrieveLightweightRequest extends ScopedSearch {
  query?: string;
  retrieval_mode?: RetrievalMode;
  data_source?: DataSource;
  radius?: number;
  participant_copies?: boolean;
  time_aware?: boolean;
}

export interface RetrievedMemory {
  id: string;
  /** episode, event_log, semantic_memory, profile; or message: stored, not yet formed. */
  memory_type: string;
  formed: boolean;
  content: string;
  title?: string | null;
  summary?: string | null;
  score: number;
  timestamp: string;
  user_id: string | null;
  group_id: string | null;
  memcell_id: string | null;
  source_message_ids: string[];
  valid_from?: string | null;
  valid_to?: string | null;
  /** current; superseded (with `include_superseded` or `as_of` only). */
  status?: string;
  superseded_by?: string | null;
  profile?: Record<string, Json> | null;
  weight?: number | null;
  explain?: Record<string, Json> | null;
}

export interface RetrieveLightweightResult {
  memories: RetrievedMemory[];
  count: number;
  metadata: Record<string, Json>;
}

export interface ChatMessage {
  role: "system" | "user" | "assistant" | "tool" | "developer";
  content?: string | null;
  name?: string;
  tool_calls?: Record<string, Json>[];
  tool_call_id?: string;
}

export interface ContextRequest extends ScopedSearch {
  /** The user's new message: the query, and the last message. */
  query: string;
  system_prompt?: string;
  history?: ChatMessage[];
  semantic?: { enabled?: boolean; top_k?: number; min_score?: number; max_tokens?: number };
  episodes?: { enabled?: boolean; top_k?: number; max_tokens?: number };
  history_max_tokens?: number;
  context_max_tokens?: number;
}

export interface ContextSection {
  tokens: number;
  budget?: number | null;
  sources?: { id: string; memory_type: string; score: number; tokens: number; truncated: boolean }[] | null;
  messages?: number | null;
  dropped?: number | null;
}

export interface ContextResult {
  /** Ready for an OpenAI-style chat call. */
  messages: { role: string; content: string }[];
  sections: Record<string, ContextSection>;
  total_tokens: number;
  context_max_tokens: number;
}

export interface MemoryPatch {
  content?: string;
  valid_from?: string | null;
  valid_to?: string | null;
  expires_at?: string | null;
  /** "current": bring back a superseded or expired memory. */
  status?: "current";
}

export interface MemoryDetail {
  memory: Record<string, Json>;
  sources: Record<string, Json>;
  superseded_by?: Record<string, Json> | null;
  supersedes: Record<string, Json>[];
}

export interface MemoryHistory {
  memory_id: string;
  /** Oldest first: event, at, actor, reason, details. */
  events: Record<string, Json>[];
}

export interface ForgetUserResult {
  user_id: string;
  deleted: Record<string, number>;
  reformed: Record<string, number>;
  conversations: number;
  forgotten_at: string;
}

export interface ForgetGroupResult {
  group_id: string;
  deleted: Record<string, number>;
}

// ---- errors ---------------------------------------------------------------------------------------------------

/** The envelope's codes; a newer server may send others. */
export type ErrorCode =
  | "INVALID_PARAMETER"
  | "UNAUTHORIZED"
  | "FORBIDDEN"
  | "NOT_FOUND"
  | "METHOD_NOT_ALLOWED"
  | "PAYLOAD_TOO_LARGE"
  | "REQUEST_TIMEOUT"
  | "TOO_MANY_REQUESTS"
  | "SERVICE_UNAVAILABLE"
  | "SYSTEM_ERROR"
  | "CONNECTION_ERROR"
  | (string & {});

/** A request memsys refused or could not serve: `status` 0 and `code` CONNECTION_ERROR when it was not reached. */
export class MemsysError extends Error {
  override name = "MemsysError";
  /** From the answer's Retry-After (a 429), in milliseconds. */
  retryAfterMs?: number;
  /** The request's id (`X-Request-Id`), as the server's log lines carry it: quote it when reporting a failure. */
  requestId?: string;
  constructor(
    message: string,
    readonly status: number,
    readonly code: ErrorCode,
    readonly path?: string,
    readonly body?: unknown,
  ) {
    super(message);
  }
}
export class InvalidParameterError extends MemsysError {
  override name = "InvalidParameterError";
}
export class UnauthorizedError extends MemsysError {
  override name = "UnauthorizedError";
}
export class ForbiddenError extends MemsysError {
  override name = "ForbiddenError";
}
export class NotFoundError extends MemsysError {
  override name = "NotFoundError";
}
export class PayloadTooLargeError extends MemsysError {
  override name = "PayloadTooLargeError";
}
export class RateLimitedError extends MemsysError {
  override name = "RateLimitedError";
}
export class ServiceUnavailableError extends MemsysError {
  override name = "ServiceUnavailableError";
}
export class MemsysConnectionError extends MemsysError {
  override name = "MemsysConnectionError";
}

const ERRORS: Record<number, typeof MemsysError> = {
  400: InvalidParameterError,
  401: UnauthorizedError,
  403: ForbiddenError,
  404: NotFoundError,
  413: PayloadTooLargeError,
  415: InvalidParameterError,
  429: RateLimitedError,
  503: ServiceUnavailableError,
};

// ---- the client -----------------------------------------------------------------------------------------------

const V3 = "/api/v3/agentic";

export class MemsysClient {
  readonly baseUrl: string;
  private readonly apiKey?: string;
  private readonly timeoutMs: number;
  private readonly maxRetries: number;
  private readonly fetch: typeof fetch;

  constructor(options: MemsysOptions = {}) {
    this.baseUrl = (options.baseUrl ?? "http://127.0.0.1:1995").replace(/\/+$/, "");
    this.apiKey = options.apiKey;
    this.timeoutMs = options.timeoutMs ?? 60_000;
    this.maxRetries = options.maxRetries ?? 2;
    this.fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
  }

  /** Store one message (store-only: workers form memories); a repeated `message_id` is `duplicate`. */
  memorize(request: MemorizeRequest): Promise<MemorizeResult> {
    const create_time = request.create_time instanceof Date ? request.create_time.toISOString() : request.create_time;
    return this.call("POST", `${V3}/memorize`, { ...request, create_time });
  }

  /** Close a stream's open MemCell now and wait (up to the server's flush timeout) for its memories. */
  flush(request: FlushRequest): Promise<MemorizeResult> {
    return this.call("POST", `${V3}/flush`, request);
  }

  /** Hybrid (RRF), vector or keyword search of one kind of memory. */
  retrieveLightweight(request: RetrieveLightweightRequest): Promise<RetrieveLightweightResult> {
    return this.call("POST", `${V3}/retrieve_lightweight`, request);
  }

  /** The messages to send to an LLM: system prompt, knowledge, episodes, history and the query, within budgets. */
  context(request: ContextRequest): Promise<ContextResult> {
    return this.call("POST", `${V3}/context`, request);
  }

  /** One memory: its status, validity, sources and what superseded it. */
  getMemory(memoryId: string): Promise<MemoryDetail> {
    return this.call("GET", `${V3}/memories/${encodeURIComponent(memoryId)}`);
  }

  /** Correct a memory's content, validity or expiry, or set its status back to current. */
  editMemory(memoryId: string, patch: MemoryPatch): Promise<MemoryDetail> {
    return this.call("PATCH", `${V3}/memories/${encodeURIComponent(memoryId)}`, patch);
  }

  /** Delete a memory (restorable until the purge). */
  deleteMemory(memoryId: string): Promise<Record<string, Json>> {
    return this.call("DELETE", `${V3}/memories/${encodeURIComponent(memoryId)}`);
  }

  /** Bring back a deleted, superseded or expired memory. */
  restoreMemory(memoryId: string): Promise<MemoryDetail> {
    return this.call("POST", `${V3}/memories/${encodeURIComponent(memoryId)}/restore`);
  }

  /** A memory's events, oldest first. */
  memoryHistory(memoryId: string): Promise<MemoryHistory> {
    return this.call("GET", `${V3}/memories/${encodeURIComponent(memoryId)}/history`);
  }

  /** Forget a user: their messages, memories and profiles. */
  forgetUser(userId: string): Promise<ForgetUserResult> {
    return this.call("DELETE", `${V3}/users?user_id=${encodeURIComponent(userId)}`);
  }

  /** Forget a group: its messages, memories, profiles and metadata. */
  forgetGroup(groupId: string): Promise<ForgetGroupResult> {
    return this.call("DELETE", `${V3}/groups?group_id=${encodeURIComponent(groupId)}`);
  }

  private async call<T>(method: string, path: string, body?: unknown): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.once<T>(method, path, body);
      } catch (error) {
        const retriable =
          error instanceof ServiceUnavailableError ||
          error instanceof RateLimitedError ||
          error instanceof MemsysConnectionError;
        if (!retriable || attempt >= this.maxRetries) throw error;
        await sleep(retryDelayMs(error, attempt));
      }
    }
  }

  private async once<T>(method: string, path: string, body?: unknown): Promise<T> {
    const headers: Record<string, string> = { Accept: "application/json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (this.apiKey) headers["Authorization"] = `Bearer ${this.apiKey}`;
    let response: Response;
    let text: string;
    try {
      response = await this.fetch(this.baseUrl + path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(this.timeoutMs),
      });
      text = await response.text();
    } catch (cause) {
      const what = cause instanceof Error && cause.name === "TimeoutError" ? `no answer within ${this.timeoutMs} ms` : String(cause);
      throw new MemsysConnectionError(`memsys at ${this.baseUrl} was not reached: ${what}`, 0, "CONNECTION_ERROR", path);
    }
    const parsed = parseJson(text);
    if (response.ok && isRecord(parsed) && parsed["status"] === "ok") return parsed["result"] as T;
    throw errorOf(response, parsed, text, path);
  }
}

function errorOf(response: Response, parsed: unknown, text: string, path: string): MemsysError {
  const envelope = isRecord(parsed) ? parsed : {};
  const code = typeof envelope["code"] === "string" ? envelope["code"] : response.ok ? "SYSTEM_ERROR" : `HTTP_${response.status}`;
  const message =
    typeof envelope["message"] === "string" ? envelope["message"] : `HTTP ${response.status}: ${text.slice(0, 200)}`;
  const kind = ERRORS[response.status] ?? MemsysError;
  const error = new kind(message, response.status, code, typeof envelope["path"] === "string" ? envelope["path"] : path, parsed);
  const retryAfter = Number(response.headers.get("retry-after"));
  if (Number.isFinite(retryAfter) && retryAfter > 0) error.retryAfterMs = retryAfter * 1000;
  const requestId = typeof envelope["request_id"] === "string" ? envelope["request_id"] : response.headers.get("x-request-id");
  if (requestId) error.requestId = requestId;
  return error;
}

function retryDelayMs(error: MemsysError, attempt: number): number {
  return error.retryAfterMs ?? 500 * 2 ** attempt * (0.5 + Math.random());
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

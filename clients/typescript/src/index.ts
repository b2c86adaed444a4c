/**
 * TypeScript client of a deltamem REST server (`deltamem serve`).
 *
 * Generated from the server's OpenAPI document, which the server derives from deltamem's
 * operation table: the types (`src/schema.ts`, by openapi-typescript) and one method per
 * operation (`src/operations.ts`, by scripts/operations.py: recall, recordOutcome, correct,
 * consolidate, listNodes, show, stats, delete, forget), each taking the operation's input model
 * and answering its answer model. This file is the hand-written part: learn, learnMany,
 * exportLines and importLines, retries with backoff that honour `Retry-After`, and errors as
 * `DeltaMemError`.
 *
 *     import { Client } from "deltamem-client";
 *     const mem = new Client("http://127.0.0.1:8080", { apiKey: "dmk_...", space: "agent-1" });
 *     await mem.learn({ task: "heat the apple", success: true, steps: [{ action: "...", observation: "..." }] });
 *     const recall = await mem.recall({ task: "heat the apple", env: "a kitchen" });
 *
 * Retries (the same rules as the Python client): reads (recall, show, listNodes, stats,
 * exportLines) are retried on a network error and on 429, 502, 503 and 504; every call is
 * retried when the server could not be reached at all or its rate limit refused the request
 * (429 with Retry-After). A write whose answer was lost is never sent twice.
 */

import type { components } from "./schema.js";
import { type Call, Operations, toQuery } from "./operations.js";

export { Operations, toQuery };
export type { Call };

export type Schemas = components["schemas"];
export type RecallOut = Schemas["RecallOut"];
export type LearnOut = Schemas["LearnOut"];
export type BatchOut = Schemas["BatchOut"];
export type ShowOut = Schemas["ShowOut"];
export type NodeListOut = Schemas["NodeListOut"];
export type StatsOut = Schemas["StatsOut"];
export type OutcomeOut = Schemas["OutcomeOut"];
export type ConsolidationOut = Schemas["ConsolidationOut"];
export type ImportOut = Schemas["ImportOut"];
export type RecallRequest = Schemas["RecallRequest"];
export type CorrectRequest = Schemas["CorrectRequest"];
export type CorrectionOut = Schemas["CorrectionOut"];

/** One step of an episode (fields with server defaults are optional here). */
export interface Step {
  action: string;
  observation?: string;
  thought?: string | null;
  reward?: number | null;
}

/** A finished episode, as `learn` takes it. */
export interface Episode {
  task: string;
  success: boolean;
  env?: string;
  score?: number | null;
  steps?: Step[];
  messages?: Record<string, unknown>[];
  meta?: Record<string, unknown>;
}

export interface RetryPolicy {
  /** Extra attempts after the first (0: never retry). Default 3. */
  retries: number;
  /** First wait in seconds without Retry-After; doubled per attempt, with jitter. Default 0.5. */
  backoff: number;
  /** Longest single wait in seconds; a longer Retry-After is raised at once. Default 30. */
  maxWait: number;
}

export interface ClientOptions {
  apiKey?: string;
  space?: string;
  /** A number of retries, or the whole policy. */
  retries?: number | Partial<RetryPolicy>;
  /** Seconds per request. Default 120. */
  timeout?: number;
  /** A fetch implementation (default: the global one). */
  fetch?: typeof fetch;
}

/** An error answer of the server, or no answer at all (`status` undefined). `type` is the
 * server's error class (`NodeNotFound`, `EpisodeError`, `Unauthorized`, `RateLimited`, ...). */
export class DeltaMemError extends Error {
  readonly status?: number;
  readonly type: string;
  readonly field: string | null;

  constructor(message: string, options: { status?: number; type?: string; field?: string | null }) {
    super(message);
    this.name = "DeltaMemError";
    this.status = options.status;
    this.type = options.type ?? "RemoteError";
    this.field = options.field ?? null;
  }
}

const RETRY_STATUSES = new Set([429, 502, 503, 504]);

/** Seconds from a Retry-After header (seconds or an HTTP date); undefined if absent or bad. */
export function retryAfter(value: string | null | undefined, now: number = Date.now()): number | undefined {
  if (value == null || value.trim() === "") return undefined;
  const seconds = Number(value.trim());
  if (Number.isFinite(seconds)) return Math.max(0, seconds);
  const when = Date.parse(value);
  if (Number.isNaN(when)) return undefined;
  return Math.max(0, (when - now) / 1000);
}

const sleep = (seconds: number) => new Promise((resolve) => setTimeout(resolve, seconds * 1000));

export class Client extends Operations {
  readonly baseUrl: string;
  readonly space: string;
  readonly retry: RetryPolicy;
  private readonly headers: Record<string, string>;
  private readonly timeout: number;
  private readonly fetchImpl: typeof fetch;

  constructor(baseUrl: string, options: ClientOptions = {}) {
    super();
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.space = options.space ?? "default";
    const given = typeof options.retries === "number" ? { retries: options.retries } : options.retries ?? {};
    this.retry = { retries: 3, backoff: 0.5, maxWait: 30, ...given };
    if (this.retry.retries < 0 || this.retry.backoff < 0 || this.retry.maxWait < 0) {
      throw new RangeError("retries, backoff and maxWait must be >= 0");
    }
    this.headers = options.apiKey ? { Authorization: `Bearer ${options.apiKey}` } : {};
    this.timeout = options.timeout ?? 120;
    this.fetchImpl = options.fetch ?? globalThis.fetch;
  }

  protected path(suffix = ""): string {
    return `/v1/spaces/${encodeURIComponent(this.space)}${suffix}`;
  }

  /** Learn one finished episode. */
  learn(episode: Episode): Promise<LearnOut> {
    return this.json({ method: "POST", path: this.path("/learn"), idempotent: false, json: episode });
  }

  /** Learn a batch: every episode is validated before any is learned. */
  learnMany(episodes: Episode[]): Promise<BatchOut> {
    return this.json({ method: "POST", path: this.path("/learn"), idempotent: false, json: { episodes } });
  }

  /** The space as JSON Lines (one string per record, without newlines). */
  async exportLines(): Promise<string[]> {
    const response = await this.send({ method: "GET", path: this.path("/export"), idempotent: true });
    return (await response.text()).split("\n").filter((line) => line.trim() !== "");
  }

  /** Load an export's lines into the space in one transaction (all or nothing). */
  importLines(lines: string[]): Promise<ImportOut> {
    const body = lines.map((line) => line.replace(/\n$/, "")).join("\n") + "\n";
    return this.json({ method: "POST", path: this.path("/import"), idempotent: false, body, contentType: "application/x-ndjson" });
  }

  // -- transport -------------------------------------------------------------------------
  protected async json<T>(call: Call): Promise<T> {
    const response = await this.send(call);
    return (await response.json()) as T;
  }

  /** Send with retries; the successful response, or a DeltaMemError. */
  private async send(call: Call): Promise<Response> {
    for (let attempt = 0; ; attempt++) {
      let response: Response | undefined;
      let failure: unknown;
      try {
        response = await this.fetchOnce(call);
      } catch (error) {
        failure = error;
      }
      const wait = this.delay(call, attempt, response, failure);
      if (wait === undefined) {
        if (response === undefined) {
          const tries = attempt ? ` (after ${attempt + 1} attempts)` : "";
          throw new DeltaMemError(`no answer from the deltamem server at ${this.baseUrl}${tries}: ${describe(failure)}`, {});
        }
        if (!response.ok) throw await errorFrom(response);
        return response;
      }
      await response?.body?.cancel();
      await sleep(wait);
    }
  }

  private async fetchOnce(call: Call): Promise<Response> {
    const url = new URL(this.baseUrl + call.path);
    for (const [name, value] of Object.entries(call.query ?? {})) {
      for (const one of Array.isArray(value) ? value : [value]) url.searchParams.append(name, one);
    }
    const headers: Record<string, string> = { ...this.headers };
    let body: string | undefined;
    if (call.json !== undefined) {
      headers["Content-Type"] = "application/json";
      body = JSON.stringify(call.json);
    } else if (call.body !== undefined) {
      headers["Content-Type"] = call.contentType ?? "text/plain";
      body = call.body;
    }
    return this.fetchImpl(url, { method: call.method, headers, body, signal: AbortSignal.timeout(this.timeout * 1000) });
  }

  /** Seconds to wait before another attempt, or undefined to stop. */
  private delay(call: Call, attempt: number, response: Response | undefined, failure: unknown): number | undefined {
    if (attempt >= this.retry.retries) return undefined;
    if (response === undefined) {
      return call.idempotent || neverSent(failure) ? this.backoff(attempt) : undefined;
    }
    if (!RETRY_STATUSES.has(response.status)) return undefined;
    const asked = retryAfter(response.headers.get("Retry-After"));
    const refusedBeforeRunning = response.status === 429 && asked !== undefined;
    if (!(call.idempotent || refusedBeforeRunning)) return undefined;
    if (asked === undefined) return this.backoff(attempt);
    return asked <= this.retry.maxWait ? asked : undefined;
  }

  private backoff(attempt: number): number {
    const wait = Math.min(this.retry.maxWait, this.retry.backoff * 2 ** attempt);
    return wait * (0.5 + Math.random() / 2);
  }
}

/** Whether a fetch failure happened before the request was sent (connection refused). */
function neverSent(failure: unknown): boolean {
  const cause = (failure as { cause?: { code?: string } } | undefined)?.cause;
  return cause?.code === "ECONNREFUSED";
}

function describe(failure: unknown): string {
  const cause = (failure as { cause?: { message?: string } } | undefined)?.cause;
  if (cause?.message) return cause.message;
  return failure instanceof Error ? failure.message : String(failure);
}

async function errorFrom(response: Response): Promise<DeltaMemError> {
  const text = await response.text();
  try {
    const detail = (JSON.parse(text) as Schemas["ErrorBody"]).error;
    return new DeltaMemError(detail.message, { status: response.status, type: detail.type, field: detail.field ?? null });
  } catch {
    return new DeltaMemError(`HTTP ${response.status}: ${text.slice(0, 300)}`, { status: response.status, type: "HTTPError" });
  }
}

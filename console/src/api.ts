// In charge of talking to the gateway: the admin key (sessionStorage only, this tab, never a URL),
// and one fetch wrapper that turns the API's error bodies into ApiError with their code and fields.

/** The same slot /docs uses, so signing in to one signs in to the other (the contract's rule). */
const STORED = 'queryapigate.api_key';

export const session = {
  key: (): string => sessionStorage.getItem(STORED) ?? '',
  signIn: (key: string) => sessionStorage.setItem(STORED, key),
  signOut: () => sessionStorage.removeItem(STORED),
};

/** An error answer: its code, its message, and per-field problems when the API named them. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly fields: Record<string, string> = {},
    readonly body: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

export interface Reply<T> {
  status: number;
  headers: Headers;
  data: T;
}

/** A request with the key in X-API-Key; `key` overrides it (the run panel's "run as key"). */
export async function call<T = unknown>(method: string, path: string, body?: unknown, key = session.key()): Promise<Reply<T>> {
  const headers: Record<string, string> = {};
  if (key) headers['X-API-Key'] = key;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let res: Response;
  try {
    res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: 'no-store', credentials: 'omit' });
  } catch {
    throw new ApiError(0, 'network', 'The server did not answer. Is it running?');
  }
  const text = await res.text();
  let data: unknown = text;
  if ((res.headers.get('content-type') ?? '').includes('json') && text) {
    try {
      data = JSON.parse(text);
    } catch {
      /* left as text */
    }
  }
  if (res.status >= 400) {
    const b = (typeof data === 'object' && data !== null ? data : {}) as Record<string, unknown>;
    const fields = typeof b.errors === 'object' && b.errors !== null && !Array.isArray(b.errors) ? (b.errors as Record<string, string>) : {};
    throw new ApiError(res.status, String(b.code ?? 'error'), String(b.error ?? res.statusText), fields, b);
  }
  return { status: res.status, headers: res.headers, data: data as T };
}

export const api = {
  get: <T>(path: string) => call<T>('GET', path).then((r) => r.data),
  post: <T>(path: string, body: unknown = {}) => call<T>('POST', path, body).then((r) => r.data),
  patch: <T>(path: string, body: unknown) => call<T>('PATCH', path, body).then((r) => r.data),
  del: (path: string, body?: unknown) => call('DELETE', path, body).then(() => undefined),
};

export const enc = encodeURIComponent;

/** Which form field an error code concerns, when the API names none (its message is then shown there). */
const CODE_FIELDS: Record<string, string> = {
  invalid_name: 'name',
  connection_exists: 'name',
  query_exists: 'name',
  key_exists: 'name',
  reason_required: 'reason',
  connection_not_found: 'connection_name',
};

/** The problems of an error, by field ('' for the form as a whole). */
export function fieldErrors(e: unknown): Record<string, string> {
  if (!(e instanceof ApiError)) return { '': String((e as Error)?.message ?? e) };
  if (Object.keys(e.fields).length) return { ...e.fields, '': e.message };
  const field = CODE_FIELDS[e.code];
  return field ? { [field]: e.message } : { '': e.message };
}

// In charge of how a command that talks to a running server (export, events tail) finds it and calls
// with which key: --url, else http://QUERYAPIGATE_HOST:QUERYAPIGATE_PORT; --key (an administrator
// token or a key), else QUERYAPIGATE_ADMIN_TOKEN, else QUERYAPIGATE_API_KEY; and of turning a refused answer into the command's failure with its code.
import type { Config } from '../config.js';
import type { Invocation, Option } from './tree.js';
import { Failure } from './tree.js';

export const URL_OPTION: Option = { type: 'string', value: 'URL', help: 'the server (default: from QUERYAPIGATE_HOST and QUERYAPIGATE_PORT)' };
export const KEY_OPTION: Option = {
  type: 'string',
  value: 'KEY',
  help: 'the administrator token (qagadm_...) or API key to call with (default: QUERYAPIGATE_ADMIN_TOKEN, else QUERYAPIGATE_API_KEY)',
};

export function serverTarget(config: Config, values: Invocation['values']): { base: string; key: string } {
  const host = ['0.0.0.0', '::'].includes(config.host) ? '127.0.0.1' : config.host.includes(':') ? `[${config.host}]` : config.host;
  const base = ((values.url as string | undefined) ?? `http://${host}:${config.port}`).replace(/\/+$/, '');
  return { base, key: (values.key as string | undefined) ?? config.adminToken ?? config.adminKey ?? '' };
}

/** The cause of a failed fetch, in words ("connect ECONNREFUSED 127.0.0.1:5000"). */
export function unreachable(base: string, e: unknown): Failure {
  return new Failure(`cannot reach the server at ${base}: ${((e as Error).cause as Error | undefined)?.message ?? (e as Error).message}`);
}

/** A refused answer as the command's failure: the gateway's message and code, else the status. */
export async function refused(res: Response): Promise<Failure> {
  const text = await res.text();
  let body: { error?: string; code?: string } = {};
  try {
    body = JSON.parse(text);
  } catch {
    /* not the gateway's error body */
  }
  return new Failure(body.error ?? `the server answered ${res.status}`, body.code ?? `http_${res.status}`);
}
